package agent

import "testing"

// The models listing is under the configured base URL, whatever the host is
// called and whether the base ends in a slash.
func TestJoinURL(t *testing.T) {
	for _, c := range []struct{ base, path, want string }{
		{"https://models.github.ai/inference", "models", "https://models.github.ai/inference/models"},
		{"http://127.0.0.1:11434/v1/", "models", "http://127.0.0.1:11434/v1/models"},
		{"https://api.anthropic.com", "v1/models", "https://api.anthropic.com/v1/models"},
	} {
		if got := joinURL(c.base, c.path); got != c.want {
			t.Errorf("joinURL(%q, %q) = %q, want %q", c.base, c.path, got, c.want)
		}
	}
}
