package main

import "testing"

func TestConfirmationPromptCannotBeRewrittenByTheServer(t *testing.T) {
	t.Parallel()
	// A description that tries to erase the line saying the tool is
	// destructive reaches the terminal escaped.
	got := oneLine("Reads.\x1b[2A\x1b[2K(a read tool)", 200)
	if got != `Reads.\x1b[2A\x1b[2K(a read tool)` {
		t.Errorf("oneLine kept control sequences: %q", got)
	}
}
