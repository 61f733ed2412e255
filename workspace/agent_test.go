package workspace_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/workspace"
)

// NewProvider takes each setting from the options, else the agent section,
// and reads the key from the variable they name, else the provider's own.
func TestNewProvider(t *testing.T) {
	t.Parallel()
	env := map[string]string{"OPENAI_API_KEY": "sk-openai-default-key", "MY_KEY": "sk-configured-variable", "ANTHROPIC_API_KEY": "sk-anthropic-key"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, c := range []struct {
		name    string
		section config.Agent
		opts    workspace.ProviderOptions
		key     string
		err     string
	}{
		{"no model", config.Agent{}, workspace.ProviderOptions{}, "", "no model"},
		{"section's model, default key", config.Agent{Model: "m"}, workspace.ProviderOptions{}, "sk-openai-default-key", ""},
		{"section's key variable", config.Agent{Model: "m", APIKeyEnv: "MY_KEY"}, workspace.ProviderOptions{}, "sk-configured-variable", ""},
		{"the options over the section", config.Agent{Model: "m", Provider: "openai", APIKeyEnv: "MY_KEY"}, workspace.ProviderOptions{Provider: "anthropic", APIKeyEnv: "ANTHROPIC_API_KEY"}, "sk-anthropic-key", ""},
		{"unknown provider", config.Agent{Model: "m", Provider: "llama"}, workspace.ProviderOptions{}, "", `unknown provider "llama"`},
	} {
		o := c.opts
		o.LookupEnv = lookup
		p, key, err := workspace.NewProvider(c.section, &o)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one saying %q", c.name, err, c.err)
			}
			if c.err == "no model" && !errors.Is(err, workspace.ErrNoModel) {
				t.Errorf("%s: %v does not wrap ErrNoModel", c.name, err)
			}
			continue
		}
		if err != nil || p == nil || key != c.key {
			t.Errorf("%s: provider %v, key %q, error %v; want the key %q", c.name, p, key, err, c.key)
		}
	}
}
