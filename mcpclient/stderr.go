package mcpclient

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"

	"github.com/toolwire/toolwire/audit"
)

// stderrTailSize is how much of a child's most recent stderr is kept to
// explain a failure.
const stderrTailSize = 4 << 10

// stderrLog receives a stdio server's stderr. Each complete line goes to the
// logger at debug level, tagged with the server's name; the last few KiB are
// kept so that a failed start can say what the server printed. Known secrets
// are masked in both.
type stderrLog struct {
	server  string
	logger  *slog.Logger
	secrets *audit.Secrets

	mu      sync.Mutex
	tail    []byte
	partial []byte
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tail = append(w.tail, p...)
	if over := len(w.tail) - stderrTailSize; over > 0 {
		w.tail = append(w.tail[:0], w.tail[over:]...)
	}
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(w.partial[:i]), "\r")
		w.partial = w.partial[i+1:]
		if line != "" {
			w.logger.Debug("server stderr", "server", w.server, "line", w.secrets.String(line))
		}
	}
	if len(w.partial) > stderrTailSize {
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

// Tail returns the last lines the server printed, masked, trimmed, at most
// maxLines of them.
func (w *stderrLog) Tail(maxLines int) string {
	w.mu.Lock()
	text := strings.TrimSpace(string(w.tail))
	w.mu.Unlock()
	lines := strings.Split(text, "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return w.secrets.String(strings.Join(lines, "\n"))
}
