package config

import (
	"strings"
	"testing"
)

func TestStoreSetting(t *testing.T) {
	const servers = "servers:\n  a: {command: x}\n"
	for _, tc := range []struct {
		value, want, err string
	}{
		{"postgres://toolwire@db.internal:5432/toolwire?sslmode=verify-full", "postgres://toolwire@db.internal:5432/toolwire?sslmode=verify-full", ""},
		{"postgresql://db/toolwire", "postgresql://db/toolwire", ""},
		{"${TOOLWIRE_STORE}", "${TOOLWIRE_STORE}", ""},
		{"postgres://toolwire:hunter2@db/toolwire", "", "store: the URL holds a password"},
		{"postgres://db/toolwire?password=hunter2", "", "store: the URL holds a password"},
		{"mysql://db/toolwire", "", "store: want a PostgreSQL URL"},
		{"/var/lib/toolwire", "", "store: want a PostgreSQL URL"},
		{`""`, "", "store: must not be empty"},
		{"5432", "", "store: want a string"},
	} {
		f, err := Parse("t.yaml", []byte(servers+"store: "+tc.value+"\n"), "/cfg")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("store: %s: err = %v, want %q (and no password)", tc.value, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("store: %s: %v", tc.value, err)
			continue
		}
		if f.Store != tc.want {
			t.Errorf("store: %s: Store = %q, want %q", tc.value, f.Store, tc.want)
		}
		out, err := Marshal(f)
		if err != nil || !strings.Contains(string(out), "store: ") {
			t.Errorf("store: %s: not written back: %v\n%s", tc.value, err, out)
		}
	}
	f, err := Parse("t.yaml", []byte(servers), "/cfg")
	if err != nil || f.Store != "" {
		t.Errorf("no store: %q, %v; want the files", f.Store, err)
	}
}
