package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/tool"
	"github.com/toolwire/toolwire/workspace"
)

// serverName is the configured name of the suite's test server.
const serverName = "conformance"

// requestTimeout bounds each request to the server (config.Server's
// timeout), within the scenario's timeout.
const requestTimeout = 10 * time.Second

// errUnsupported is wrapped by the error of a scenario toolwire cannot do.
var errUnsupported = errors.New("not supported by toolwire")

// run connects to the scenario's server as toolwire's CLI would (see the
// package doc), calls the scenario's tool if it has one, and closes.
func run(ctx context.Context, r *runner) error {
	if r.sc.unsupported != "" {
		return fmt.Errorf("%w: %s", errUnsupported, r.sc.unsupported)
	}
	cfg := config.Server{
		Name: serverName, Transport: config.TransportHTTP, URL: r.url,
		DefaultTier: "read", Timeout: requestTimeout,
	}
	if r.sc.oauth != nil {
		cfg.OAuth = r.sc.oauth(r.cctx)
	}
	if cfg.OAuth != nil && cfg.OAuth.ClientSecretEnv != "" {
		// toolwire reads secrets from the environment, never from files or
		// flags: this is where an operator would have put it.
		if err := os.Setenv(cfg.OAuth.ClientSecretEnv, r.cctx.ClientSecret); err != nil {
			return err
		}
	}
	if cfg.OAuth != nil && cfg.OAuth.IdP != nil && cfg.OAuth.IdP.IDTokenEnv != "" {
		// Where the user's SSO agent would have put the ID token.
		if err := os.Setenv(cfg.OAuth.IdP.IDTokenEnv, r.cctx.IdPIDToken); err != nil {
			return err
		}
	}
	if cfg.OAuth != nil && cfg.OAuth.PrivateKeyEnv != "" {
		if err := os.Setenv(cfg.OAuth.PrivateKeyEnv, r.cctx.PrivateKeyPEM); err != nil {
			return err
		}
	}
	// A store of its own per run, and pins of its own: the suite's
	// servers are new each time.
	dir, err := os.MkdirTemp("", "toolwire-conformance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := oauth.NewStore(filepath.Join(dir, "oauth.json"), &oauth.StoreOptions{KeyFile: filepath.Join(dir, "oauth.key")})
	if err != nil {
		return err
	}
	// The server is required: its failure to start is the scenario's
	// failure, with the reason.
	cfg.Required = true
	file := &config.File{Servers: []config.Server{cfg}, Security: config.Security{PinsFile: filepath.Join(dir, "pins.json")}}
	w, err := workspace.Open(ctx, file, &workspace.Options{
		Confirmer: approveAll{},
		Logger:    r.logger,
		// The login's handlers, as toolwire login makes them: the
		// loopback receiver as the fetcher, the browser played by follow.
		OAuth: workspace.OAuthHandlers(store, &workspace.OAuthOptions{
			Fetcher:    &oauth.Loopback{Open: follow, Out: r.out, Timeout: requestTimeout},
			ClientName: "toolwire conformance client",
		}),
		// The calls' caller (user) answers elicitations.
		Relay: mcpclient.RelayCapabilities{Elicitation: true},
	})
	if err != nil {
		return err
	}
	defer w.Close()
	if r.sc.tool == "" {
		return nil
	}
	name, err := registered(w.Registry(), r.sc.tool)
	if err != nil {
		return err
	}
	res := w.Executor().Call(tool.WithCaller(ctx, user{}), name, json.RawMessage(r.sc.args))
	if res.IsError {
		return fmt.Errorf("call %s: %s: %s", name, res.Reason, res.Message)
	}
	return nil
}

// registered returns the name under which the server's tool was
// registered.
func registered(reg *tool.Registry, original string) (string, error) {
	for _, t := range reg.List() {
		if t.Origin.Source == serverName && t.Origin.Name == original {
			return t.Name, nil
		}
	}
	return "", fmt.Errorf("the server lists no tool %q", original)
}

// browser is the user's browser: it follows the authorization URL and
// the redirects after it. The suite's authorization server redirects at
// once, with no login page, to the loopback receiver.
var browser = &http.Client{Timeout: requestTimeout}

// follow is the loopback's opener: the "browser" goes to the URL and
// follows the redirect back to the receiver, which checks the state.
func follow(ctx context.Context, authURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return err
	}
	resp, err := browser.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// The URL's query holds the code: name the page without it.
		u := *resp.Request.URL
		u.RawQuery = ""
		return fmt.Errorf("the authorization ended at %s with HTTP %d", u.String(), resp.StatusCode)
	}
	return nil
}

// approveAll confirms every write and destructive call: the scenarios'
// calls are the operator's own.
type approveAll struct{}

func (approveAll) Confirm(context.Context, tool.PendingCall) (bool, error) { return true, nil }
