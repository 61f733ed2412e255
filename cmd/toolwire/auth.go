package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/netpolicy"
	"github.com/toolwire/toolwire/oauth"
)

// tokenStore opens the OAuth token store (oauth.DefaultPath, keyed by
// TOOLWIRE_PASSPHRASE or the key file beside it). It does no I/O.
func tokenStore(e *env) (*oauth.Store, error) {
	pass, _ := e.lookupEnv(oauth.PassphraseEnv)
	return oauth.NewStore("", &oauth.StoreOptions{Passphrase: pass})
}

// oauthHandlers makes each remote server's OAuth handler. fetcher is nil
// for commands that cannot prompt: a server that needs a person then fails
// with an error naming "toolwire login SERVER".
func oauthHandlers(e *env, store *oauth.Store, fetcher oauth.Fetcher) mcpclient.OAuthFunc {
	return func(cfg config.Server, client *http.Client) (auth.OAuthHandler, error) {
		o := cfg.OAuth
		if o == nil {
			o = &config.OAuth{}
		}
		if o.PerCaller() {
			// Fail closed: no shared credential may stand in for the
			// callers' own (oauth.Callers serves them, per caller).
			return nil, fmt.Errorf("server %q: oauth.identity is caller: it is reached only with a gateway caller's own identity, and this connection has no caller", cfg.Name)
		}
		if o.Grant == "client_credentials" || o.Grant == "enterprise" {
			return oauth.NewClientCredentialsHandler(&oauth.ClientCredentialsConfig{
				Server: cfg.Name, ClientID: o.ClientID, SecretEnv: o.ClientSecretEnv, Key: mcpclient.OAuthClientKey(o), AuthMethod: o.AuthMethod, Scopes: o.Scopes, IdP: mcpclient.OAuthIdP(o), HTTPClient: client,
			})
		}
		// Resource binds the stored tokens to this URL and is what the
		// refreshes name (RFC 8707) before any discovery in this process.
		hc := &oauth.HandlerConfig{Server: cfg.Name, Resource: cfg.URL, Store: store, HTTPClient: client, Scopes: o.Scopes, ClientMetadataURL: o.ClientMetadataURL, Fetcher: fetcher}
		if o.ClientID != "" {
			secret := ""
			if o.ClientSecretEnv != "" {
				// A confidential client without its secret must not quietly
				// become a public one.
				if secret, _ = e.lookupEnv(o.ClientSecretEnv); secret == "" {
					return nil, fmt.Errorf("server %q: oauth.clientSecretEnv: the variable %s is not set", cfg.Name, o.ClientSecretEnv)
				}
			}
			hc.Client = &oauth.ClientConfig{ID: o.ClientID, Secret: secret, Key: mcpclient.OAuthClientKey(o)}
		}
		return oauth.NewHandler(hc)
	}
}

// browserOpener opens a URL in the desktop's browser.
func browserOpener(ctx context.Context, url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.CommandContext(ctx, "open", url)
	case "windows":
		cmd = exec.CommandContext(ctx, "rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.CommandContext(ctx, "xdg-open", url)
	}
	return cmd.Start()
}

func newLoginCommand(e *env, g *globalFlags) *cobra.Command {
	var noBrowser bool
	cmd := &cobra.Command{
		Use:   "login SERVER",
		Short: "Log in to a remote server that requires OAuth, and keep the tokens",
		Long: `Log in to a remote MCP server that requires OAuth 2.1: toolwire discovers
its authorization server, registers a client when it must, opens the
authorization page in the browser (the URL is printed too) and receives the
answer on http://127.0.0.1:PORT/callback. The tokens, refresh token
included, and the registration are kept encrypted in the token store, so
later commands, restarts and other toolwire processes refresh without
asking again. --no-browser prints the URL and reads the address the browser
was sent to (or the code) from stdin, for a machine without a browser.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file, err := loadConfig(e, g)
			if err != nil {
				return err
			}
			srv, err := remoteServer(file, args[0])
			if err != nil {
				return err
			}
			// The server's timeout bounds each request, and the first one
			// now waits for a person at a browser: allow the loopback's own
			// wait and a minute more, so that its message ends an
			// abandoned login rather than a bare deadline.
			srv.Timeout = max(srv.Timeout, oauth.DefaultLoginTimeout+time.Minute)
			store, err := tokenStore(e)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			lb := &oauth.Loopback{Out: e.stderr, Open: e.openBrowser}
			if noBrowser {
				lb.Open, lb.In = nil, e.stdin
			}
			// The server's own OAuth client, through the same client stack:
			// connecting makes the first request, whose 401 starts the flow.
			file.Servers = []config.Server{srv}
			w, err := open(cmd.Context(), e, g, openOptions{confirmer: refuseAll{}, file: file, oauth: oauthHandlers(e, store, lb)})
			if err != nil {
				return err
			}
			defer w.close()
			entry, err := store.Get(srv.Name)
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			if entry == nil || entry.Token == nil {
				fmt.Fprintf(e.stdout, "%s: connected; it did not ask for authorization\n", srv.Name)
				return nil
			}
			fmt.Fprintf(e.stdout, "%s: logged in; %d tools; tokens kept in %s\n", srv.Name, len(w.registry.List()), store.Path())
			return nil
		},
	}
	cmd.Flags().BoolVar(&noBrowser, "no-browser", false, "print the URL and read the redirect address or code from stdin")
	return cmd
}

func newLogoutCommand(e *env, g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "logout SERVER",
		Short: "Revoke a server's OAuth tokens where it can, and forget them and the registration",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := tokenStore(e)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			entry, err := store.Get(args[0])
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			if entry == nil {
				return &exitError{exitUsage, fmt.Errorf("server %q: not logged in (nothing in %s)", args[0], store.Path())}
			}
			// Revoke first (RFC 7009), so that a copy of the tokens is
			// worthless too; forget them whatever the answer.
			ctx, cancel := context.WithTimeout(cmd.Context(), oauth.DefaultRefreshTimeout)
			rerr := oauth.Revoke(ctx, netpolicy.NewClient(nil), entry, configuredSecret(e, g, entry))
			cancel()
			if err := store.Delete(cmd.Context(), args[0]); err != nil {
				return &exitError{exitToolErr, err}
			}
			switch {
			case entry.Token == nil:
				fmt.Fprintf(e.stdout, "%s: logged out; the next connection asks again\n", args[0])
			case rerr == nil:
				fmt.Fprintf(e.stdout, "%s: logged out; the authorization server revoked the tokens; the next connection asks again\n", args[0])
			case errors.Is(rerr, oauth.ErrNoRevocation):
				fmt.Fprintf(e.stdout, "%s: logged out; the authorization server offers no revocation, so the forgotten tokens stay valid until they expire\n", args[0])
			default:
				fmt.Fprintf(e.stderr, "warning: %v\n", rerr)
				fmt.Fprintf(e.stdout, "%s: logged out; revoking the tokens failed (see above), they stay valid until they expire\n", args[0])
			}
			return nil
		},
	}
}

func newAuthCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{Use: "auth", Short: "OAuth tokens of remote servers"}
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "List servers with their OAuth state and token expiry (never a token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := tokenStore(e)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			entries, err := store.List()
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			if len(entries) == 0 {
				fmt.Fprintf(e.stdout, "no server has logged in (store %s)\n", store.Path())
				return nil
			}
			now := time.Now()
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SERVER\tSTATE\tEXPIRES\tISSUER\tCLIENT")
			for _, en := range entries {
				expires, issuer, client := "-", "-", "-"
				if en.Token != nil && !en.Token.Expiry.IsZero() {
					expires = en.Token.Expiry.Local().Format(time.RFC3339)
				}
				if en.Client != nil {
					issuer = firstNonEmpty(en.Client.Issuer, "-")
					client = firstNonEmpty(en.Client.ID, "-")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termSafe(en.Server), en.State(now), expires, termSafe(issuer), termSafe(client))
			}
			return tw.Flush()
		},
	})
	return cmd
}

// remoteServer finds the named Streamable HTTP server in the configuration.
func remoteServer(file *config.File, name string) (config.Server, error) {
	var names []string
	for _, s := range file.Servers {
		if s.Name == name {
			if s.Transport != config.TransportHTTP {
				return config.Server{}, &exitError{exitUsage, fmt.Errorf("server %q: OAuth login is for Streamable HTTP servers (url:); this one is %s", name, s.Transport)}
			}
			return s, nil
		}
		names = append(names, s.Name)
	}
	return config.Server{}, &exitError{exitUsage, fmt.Errorf("no server %q in the configuration (servers: %v)", name, names)}
}

// configuredSecret is the secret of the client the configuration names for
// the entry's server, for revocation: only when the entry holds that very
// client (not a registration of its own) obtained for the server's URL, so
// that a secret never goes to another authorization server than its own.
// "" when there is none or the configuration does not load (logout must
// work without it).
func configuredSecret(e *env, g *globalFlags, entry *oauth.Entry) string {
	file, err := loadConfig(e, g)
	if err != nil || entry.Client == nil || entry.Client.Dynamic {
		return ""
	}
	for _, s := range file.Servers {
		if s.Name == entry.Server && s.OAuth != nil && s.OAuth.ClientSecretEnv != "" &&
			s.OAuth.ClientID == entry.Client.ID && entry.BoundTo(s.URL) {
			v, _ := e.lookupEnv(s.OAuth.ClientSecretEnv)
			return v
		}
	}
	return ""
}
