// Command client is toolwire's client under test for the client scenarios
// of the official MCP conformance suite (npm @modelcontextprotocol/conformance,
// run by scripts/conformance-client.sh). The suite starts a test server
// per scenario and runs
//
//	client URL
//
// with the scenario's name in MCP_CONFORMANCE_SCENARIO and, for some
// scenarios, a JSON object in MCP_CONFORMANCE_CONTEXT (a pre-registered
// client's id and secret, say). It judges what the client sends; the
// client exits 0 when it did what the scenario asks, 1 when something
// failed on the way, 2 when it cannot run the scenario at all.
//
// The client is toolwire's own stack, assembled by the workspace package
// as the CLI's is, not the SDK's example client: workspace.Open starts the
// server (handshake, listing, adaptation into the registry), its executor
// makes the calls, and the OAuth handlers are workspace.OAuthHandlers,
// those of toolwire login. Each scenario is described as a configured
// server would be (see scenarios.go): its OAuth settings are what an
// operator would write in toolwire.yaml for that server. The
// user's side is played without a person: the browser is an HTTP client
// that follows the authorization URL (the suite's authorization server
// redirects at once) to the loopback receiver of `toolwire login`, and
// every elicitation form is accepted as the server prefilled it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"
)

// timeout bounds a whole scenario: the suite gives a client 30 s by
// default, and a client that is still running then fails the scenario
// without saying why.
const timeout = 25 * time.Second

// exitUsage is the exit status for a scenario the client cannot run.
const exitUsage = 2

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintf(os.Stderr, "usage: %s URL (with MCP_CONFORMANCE_SCENARIO set)\n", os.Args[0])
		os.Exit(exitUsage)
	}
	name := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	sc, ok := scenarios[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "conformance client: unknown scenario %q (MCP_CONFORMANCE_SCENARIO); known: %v\n", name, scenarioNames())
		os.Exit(exitUsage)
	}
	cctx, err := parseContext(os.Getenv("MCP_CONFORMANCE_CONTEXT"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance client: MCP_CONFORMANCE_CONTEXT: %v\n", err)
		os.Exit(exitUsage)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err = run(ctx, &runner{url: os.Args[1], scenario: name, sc: sc, cctx: cctx, logger: logger, out: os.Stderr})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance client: scenario %s: %v\n", name, err)
		os.Exit(1)
	}
}

// logLevel is debug when TOOLWIRE_CONFORMANCE_DEBUG is set, else warn.
func logLevel() slog.Level {
	if os.Getenv("TOOLWIRE_CONFORMANCE_DEBUG") != "" {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// scenarioContext is what the suite passes in MCP_CONFORMANCE_CONTEXT.
// Only the fields the client uses are read.
type scenarioContext struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	// PrivateKeyPEM is the client's key for private_key_jwt.
	PrivateKeyPEM string `json:"private_key_pem"`
	// The identity provider of cross-app access, and the user's ID token
	// from it.
	IdPClientID      string `json:"idp_client_id"`
	IdPIDToken       string `json:"idp_id_token"`
	IdPIssuer        string `json:"idp_issuer"`
	IdPTokenEndpoint string `json:"idp_token_endpoint"`
}

func parseContext(raw string) (*scenarioContext, error) {
	c := &scenarioContext{}
	if raw == "" {
		return c, nil
	}
	if err := json.Unmarshal([]byte(raw), c); err != nil {
		return nil, errors.New("not a JSON object")
	}
	return c, nil
}

// runner is one scenario's run.
type runner struct {
	url      string
	scenario string
	sc       scenario
	cctx     *scenarioContext
	logger   *slog.Logger
	out      io.Writer // the login's instructions
}
