package demo

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestNotesFileKeepsNotesAcrossServers(t *testing.T) {
	file := filepath.Join(t.TempDir(), "notes.json")
	first := connectInMemory(t, NewServer(&Options{NotesFile: file}), nil)
	successText(t, call(t, first, "write_note", map[string]any{"title": "a", "body": "one"}))
	successText(t, call(t, first, "write_note", map[string]any{"title": "b", "body": "two"}))

	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var onDisk map[string]string
	if err := json.Unmarshal(raw, &onDisk); err != nil || onDisk["a"] != "one" || onDisk["b"] != "two" {
		t.Fatalf("notes file = %s (err %v), want both notes", raw, err)
	}

	second := connectInMemory(t, NewServer(&Options{NotesFile: file}), nil)
	if _, titles := listNotes(t, second); len(titles) != 2 {
		t.Fatalf("a new server with the same file lists %v, want [a b]", titles)
	}
	successText(t, call(t, second, "delete_note", map[string]any{"title": "a"}))
	third := connectInMemory(t, NewServer(&Options{NotesFile: file}), nil)
	if _, titles := listNotes(t, third); len(titles) != 1 || titles[0] != "b" {
		t.Fatalf("after a delete, a new server lists %v, want [b]", titles)
	}
}

func TestNotesFileWriteFailureUndoesTheChange(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "missing-dir", "notes.json") // its directory does not exist
	cs := connectInMemory(t, NewServer(&Options{NotesFile: file}), nil)
	msg := errorText(t, call(t, cs, "write_note", map[string]any{"title": "a", "body": "one"}))
	if msg == "" {
		t.Fatal("want an error result when the notes file cannot be written")
	}
	if _, titles := listNotes(t, cs); len(titles) != 0 {
		t.Fatalf("a note that could not be saved is still listed: %v", titles)
	}
}
