package task_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolwire/toolwire/task"
)

// TestStatusMessagesAreOneBoundedLine: a status message comes from a tool
// or its server (a progress report, a result's text); the record keeps it
// as one line without control characters, cut to a bound at a character's
// start, however the server wrote it.
func TestStatusMessagesAreOneBoundedLine(t *testing.T) {
	t.Parallel()
	f, err := task.OpenFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := task.NewStore(f, nil)
	ctx := context.Background()
	r, err := s.Create(ctx, &task.Record{Owner: "subject:alice", Tool: "t"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	hostile := "done\x1b[2J\r\nforged line\x00\x7f" + strings.Repeat("é", 2000)
	if err := s.Report(ctx, r.ID, hostile, -1, 0, false); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "subject:alice", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsFunc(got.Message, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		t.Errorf("the message kept control characters: %q", got.Message[:40])
	}
	if !strings.HasPrefix(got.Message, "done [2J  forged line  é") || !strings.HasSuffix(got.Message, "…") {
		t.Errorf("the message: %q…; want the text with spaces for its controls, cut and marked", got.Message[:40])
	}
	if len(got.Message) > 1024+len("…") || !utf8.ValidString(got.Message) {
		t.Errorf("the message is %d bytes, valid UTF-8 %v; want at most 1024 and a character's end", len(got.Message), utf8.ValidString(got.Message))
	}
}
