package config

import (
	"strings"
	"testing"
)

func TestAuditRequiredIsReadAndWrittenBack(t *testing.T) {
	f, err := Parse("t.yaml", []byte("servers:\n  a: {command: x}\naudit:\n  file: a.jsonl\n  required: true\n"), "/cfg")
	if err != nil {
		t.Fatal(err)
	}
	if !f.Audit.Required {
		t.Fatalf("Audit = %+v, want Required", f.Audit)
	}
	out, err := Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "required: true") {
		t.Errorf("marshalled config lacks audit.required:\n%s", out)
	}
	if _, err := Parse("t.yaml", []byte("servers:\n  a: {command: x}\naudit:\n  required: sometimes\n"), "/cfg"); err == nil ||
		!strings.Contains(err.Error(), "audit.required: want true or false") {
		t.Errorf("a non-boolean audit.required: err = %v", err)
	}
}
