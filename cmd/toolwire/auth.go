package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/netpolicy"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/store"
	"github.com/toolwire/toolwire/workspace"
)

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
asking again. With a PostgreSQL store (--store) they go to the database,
sealed with TOOLWIRE_PASSPHRASE, for every replica of a fleet: log in once. --no-browser prints the URL and reads the address the browser
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
			lb := &oauth.Loopback{Out: e.stderr, Open: e.openBrowser}
			if noBrowser {
				lb.Open, lb.In = nil, e.stdin
			}
			// The server's own OAuth client, through the same client stack,
			// with the store's tokens: connecting makes the first request,
			// whose 401 starts the flow.
			file.Servers = []config.Server{srv}
			w, err := open(cmd.Context(), e, g, file, &workspace.Options{Confirmer: refuseAll{}, OAuthFetcher: lb})
			if err != nil {
				return err
			}
			defer w.Close()
			store := w.Store().Tokens()
			entry, err := store.GetContext(cmd.Context(), srv.Name)
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			if entry == nil || entry.Token == nil {
				fmt.Fprintf(e.stdout, "%s: connected; it did not ask for authorization\n", srv.Name)
				return nil
			}
			fmt.Fprintf(e.stdout, "%s: logged in; %d tools; tokens kept in %s\n", srv.Name, len(w.Registry().List()), tokensPlace(w.Store()))
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
			st, err := tokenStore(cmd.Context(), e, g)
			if err != nil {
				return err
			}
			defer st.Close()
			store := st.Tokens()
			entry, err := store.GetContext(cmd.Context(), args[0])
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			if entry == nil {
				return &exitError{exitUsage, fmt.Errorf("server %q: not logged in (nothing in %s)", args[0], tokensPlace(st))}
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

func newAuthCommand(e *env, g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "auth", Short: "OAuth tokens of remote servers"}
	var asJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "List servers with their OAuth state and token expiry (never a token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := tokenStore(cmd.Context(), e, g)
			if err != nil {
				return err
			}
			defer st.Close()
			entries, err := st.Tokens().ListContext(cmd.Context())
			if err != nil {
				return &exitError{exitToolErr, err}
			}
			now := time.Now()
			if asJSON {
				return printJSON(e, authStatusJSON(entries, now))
			}
			if len(entries) == 0 {
				fmt.Fprintf(e.stdout, "no server has logged in (store %s)\n", tokensPlace(st))
				return nil
			}
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
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print the servers as a JSON array of {server, state, expires, issuer, client} (never a token)")
	cmd.AddCommand(status)
	return cmd
}

// authStatusEntry is the --json shape of one server of auth status; empty
// fields are left out.
type authStatusEntry struct {
	Server  string `json:"server"`
	State   string `json:"state"`
	Expires string `json:"expires,omitempty"` // RFC 3339, UTC
	Issuer  string `json:"issuer,omitempty"`
	Client  string `json:"client,omitempty"`
}

func authStatusJSON(entries []*oauth.Entry, now time.Time) []authStatusEntry {
	out := []authStatusEntry{}
	for _, en := range entries {
		j := authStatusEntry{Server: en.Server, State: string(en.State(now))}
		if en.Token != nil && !en.Token.Expiry.IsZero() {
			j.Expires = en.Token.Expiry.UTC().Format(time.RFC3339)
		}
		if en.Client != nil {
			j.Issuer, j.Client = en.Client.Issuer, en.Client.ID
		}
		out = append(out, j)
	}
	return out
}

// tokenStore opens the store for the commands that only read or remove
// tokens (auth status, logout): they work without a configuration file
// (see optionalConfig).
func tokenStore(ctx context.Context, e *env, g *globalFlags) (*store.Store, error) {
	file, err := optionalConfig(e, g)
	if err != nil {
		return nil, err
	}
	st, _, err := openStore(ctx, e, g, file, false)
	return st, err
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
	if len(names) == 0 {
		return config.Server{}, &exitError{exitUsage, fmt.Errorf("no server %q in the configuration (it configures none)", name)}
	}
	return config.Server{}, &exitError{exitUsage, fmt.Errorf("no server %q in the configuration (its servers: %s)", name, strings.Join(names, ", "))}
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
