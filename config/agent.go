package config

var agentFields = []string{"provider", "model", "baseURL", "apiKeyEnv"}

// Agent holds the "agent" section: the LLM that "toolwire run" and
// "toolwire chat" use. Flags and TOOLWIRE_* variables override it; empty
// fields mean the defaults (docs/agent.md).
type Agent struct {
	// Provider is "openai" (OpenAI's API and compatible servers) or
	// "anthropic".
	Provider string
	// Model names the model, as the provider knows it.
	Model string
	// BaseURL is the API's base URL, e.g. http://127.0.0.1:11434/v1.
	BaseURL string
	// APIKeyEnv names the environment variable holding the API key; the
	// key itself never goes in a configuration file.
	APIKeyEnv string
}

func (d *decoder) agent(v *node, a *Agent) {
	const path = "agent"
	if !d.wantMap(v, path, "a map of agent settings") {
		return
	}
	for _, p := range d.entries(v, path) {
		fpath := joinPath(path, p.key)
		switch p.key {
		case "provider":
			if s, ok := d.choice(p.value, fpath, "provider", "openai or anthropic", "openai", "anthropic"); ok {
				a.Provider = s
			}
		case "model":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				a.Model = s
			}
		case "baseURL":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				if msg := urlProblem(s, true); msg != "" {
					d.errorf(p.value.line, fpath, "%s", msg)
					continue
				}
				a.BaseURL = s
			}
		case "apiKeyEnv":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				if !isEnvName(s) {
					// Not quoted: a key pasted here by mistake stays out of the message.
					d.errorf(p.value.line, fpath, "must name an environment variable (letters, digits and _, not starting with a digit); put the key in that variable, never in the file")
					continue
				}
				a.APIKeyEnv = s
			}
		default:
			d.unknownField(p, path, agentFields)
		}
	}
}

// isEnvName reports whether s can name an environment variable.
func isEnvName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}
