package workspace

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/toolwire/toolwire/agent"
	"github.com/toolwire/toolwire/config"
)

// ProviderOptions are what a command may set over a configuration's agent
// section when it builds the model's provider ([NewProvider]); each
// non-empty string replaces the section's value.
type ProviderOptions struct {
	Provider  string // "openai" (the default: OpenAI and compatible servers) or "anthropic"
	Model     string
	BaseURL   string
	APIKeyEnv string // the variable holding the key; default OPENAI_API_KEY or ANTHROPIC_API_KEY
	// MaxTokens bounds a reply (anthropic); 0 means agent.DefaultMaxTokens.
	MaxTokens int
	// NoImages describes images in text (openai, for models without
	// vision).
	NoImages bool
	// AllowInsecureHTTP accepts a plain http base URL off loopback.
	AllowInsecureHTTP bool
	// IdleTimeout gives up on a reply stream silent this long; 0 means
	// agent.DefaultIdleTimeout, a negative value no limit.
	IdleTimeout time.Duration
	// LookupEnv reads the key's variable; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// ErrNoModel is returned by [NewProvider] when neither the options nor the
// agent section name a model.
var ErrNoModel = errors.New("no model")

// NewProvider builds the model's provider from the agent section and o
// (nil for none): which API, which model (required), where, and the API key
// from its variable. It returns the key too, so that the caller can mask it
// wherever text leaves the program ([Workspace.Agent] does).
func NewProvider(section config.Agent, o *ProviderOptions) (agent.Provider, string, error) {
	var opts ProviderOptions
	if o != nil {
		opts = *o
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	name := firstSet(opts.Provider, section.Provider, "openai")
	model := firstSet(opts.Model, section.Model)
	if model == "" {
		return nil, "", ErrNoModel
	}
	baseURL := firstSet(opts.BaseURL, section.BaseURL)
	keyEnv := firstSet(opts.APIKeyEnv, section.APIKeyEnv)
	switch name {
	case "openai":
		keyEnv = firstSet(keyEnv, "OPENAI_API_KEY")
		key, _ := opts.LookupEnv(keyEnv)
		p, err := agent.NewOpenAI(model, &agent.OpenAIOptions{
			BaseURL: baseURL, APIKey: key, APIKeyEnv: keyEnv, NoImages: opts.NoImages, AllowInsecureHTTP: opts.AllowInsecureHTTP, IdleTimeout: opts.IdleTimeout,
		})
		return p, key, err
	case "anthropic":
		keyEnv = firstSet(keyEnv, "ANTHROPIC_API_KEY")
		key, _ := opts.LookupEnv(keyEnv)
		p, err := agent.NewAnthropic(model, &agent.AnthropicOptions{
			BaseURL: baseURL, APIKey: key, APIKeyEnv: keyEnv, MaxTokens: opts.MaxTokens, AllowInsecureHTTP: opts.AllowInsecureHTTP, IdleTimeout: opts.IdleTimeout,
		})
		return p, key, err
	}
	return nil, "", fmt.Errorf("unknown provider %q (want openai or anthropic)", name)
}

// Agent returns the LLM tool loop over the workspace's executor with
// provider, whose API key (as NewProvider returned it) joins the secrets
// the workspace masks, so that neither a log line, nor the audit log of a
// call whose arguments a model filled with it, nor an llm.failed event can
// carry it. opts.Audit defaults to the workspace's audit log.
func (w *Workspace) Agent(provider agent.Provider, key string, opts *agent.Options) *agent.Agent {
	var o agent.Options
	if opts != nil {
		o = *opts
	}
	if o.Audit == nil {
		o.Audit = w.audit
	}
	w.secrets.Add(key)
	return agent.New(w.executor, provider, &o)
}

func firstSet(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
