package audit_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/audit"
)

// secretValue is a LogValuer whose value holds a secret.
type secretValue string

func (v secretValue) LogValue() slog.Value { return slog.StringValue(string(v)) }

// Every string a record carries reaches the handler masked: the message,
// attributes (in groups, fixed by WithAttrs, resolved from a LogValuer)
// and errors' text; other values pass unchanged.
func TestSecretsHandlerMasksEveryString(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-secret-value"
	s := audit.NewSecrets(secret)
	var out bytes.Buffer
	log := slog.New(s.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{
		// A fixed time keeps the line comparable.
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})))
	log.With("fixed", "a "+secret).WithGroup("g").Warn("token "+secret+" refused",
		"plain", "x "+secret, "n", 7,
		"err", errors.New("dial "+secret+": refused"),
		slog.Group("inner", "deep", secret),
		"valuer", secretValue(secret))
	want := `level=WARN msg="token [REDACTED] refused" fixed="a [REDACTED]" g.plain="x [REDACTED]" g.n=7 g.err="dial [REDACTED]: refused" g.inner.deep=[REDACTED] g.valuer=[REDACTED]` + "\n"
	if got := out.String(); got != want {
		t.Errorf("logged\n%s\nwant\n%s", got, want)
	}

	// A secret learned later is masked from then on.
	out.Reset()
	s.Add("later-secret-value")
	log.Info("now later-secret-value")
	if strings.Contains(out.String(), "later-secret-value") {
		t.Errorf("a secret added later was logged: %s", out.String())
	}

	// A nil Secrets masks nothing.
	out.Reset()
	slog.New((*audit.Secrets)(nil).Handler(slog.NewTextHandler(&out, nil))).Info(secret)
	if !strings.Contains(out.String(), secret) {
		t.Errorf("a nil Secrets changed the line: %s", out.String())
	}
}
