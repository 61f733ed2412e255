package main

import (
	"strings"
	"testing"
)

// The terminal prompt is the shared render (tool.PendingCall.Render), as the
// gateway's approval messages are: the arguments before the server's
// description, which is marked as the server's words.
func TestCallPromptShowsArgumentsBeforeTheServersDescription(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	o := f.run(t, "n\n", true, "call", "demo__write_note", "title=groceries", "body=milk")
	o.expect(t, exitDeclined)
	head := strings.Index(o.stderr, `demo__write_note is a write tool of server "demo".`)
	args := strings.Index(o.stderr, `"title": "groceries"`)
	desc := strings.Index(o.stderr, "The server describes it as (its words, not toolwire's): Saves a note")
	ask := strings.Index(o.stderr, "Run it? [y/N]")
	if head < 0 || args < head || desc < args || ask < desc {
		t.Errorf("prompt parts at head=%d args=%d description=%d question=%d, want them in that order:\n%s", head, args, desc, ask, o.stderr)
	}
}
