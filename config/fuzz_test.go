package config

import (
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		fullYAML,
		fullJSON,
		"",
		"servers: {}",
		"servers:\n  a: {command: x, onlyTools: []}\n",
		`{"mcpServers": {"a": {"command": "x", "disabled": true}}}`,
		`{"mcpServers": {"a": {"type": "sse", "url": "http://h"}}}`,
		"a: &a [*a]\n",
		"{\n\t\"mcpServers\": {\"\\/\": 1}}",
		"servers:\n  a:\n    <<: {command: x}\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		file, err := Parse("fuzz", []byte(data), "/cfg")
		if err != nil {
			if file != nil {
				t.Fatalf("File and error both returned")
			}
			// Every reported problem is one line naming the file.
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz") {
					t.Fatalf("error line %q does not name the file", line)
				}
			}
			return
		}
		if len(file.Servers) == 0 {
			t.Fatalf("no servers loaded without an error")
		}
		for _, s := range file.Servers {
			if !serverNameRE.MatchString(s.Name) || s.Line < 1 {
				t.Fatalf("bad name or line: %+v", s)
			}
			if (s.Transport == "stdio") == (s.Command == "") || (s.Transport == "http") == (s.URL == "") {
				t.Fatalf("transport does not match command/url: %+v", s)
			}
			switch s.DefaultTier {
			case "read", "write", "destructive":
			default:
				t.Fatalf("bad default tier: %+v", s)
			}
		}
	})
}
