package audit_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/audit"
)

// A line whose prev member is there but not as toolwire writes it is not
// reported as having none (issue 23.13).
func TestVerifyNamesAMisformedPrevMember(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeEvents(t, path, nil, 0, 4)
	lines := rawLines(t, path)
	// As a JSON tool that re-indents might write it.
	lines[2] = bytes.Replace(lines[2], []byte(`,"prev":"`), []byte(`, "prev": "`), 1)
	_, err := verifyBytes(joinLines(lines), nil)
	var le *audit.LineError
	if !errors.As(err, &le) || le.Line != 3 || !errors.Is(err, audit.ErrBrokenChain) {
		t.Fatalf("Verify = %v, want a broken chain at line 3", err)
	}
	if strings.Contains(err.Error(), "no prev member") || !strings.Contains(err.Error(), "prev member is not as toolwire writes it") {
		t.Errorf("error %q for a line that has a prev member", err)
	}
}
