package main

import (
	"maps"
	"slices"

	"github.com/toolwire/toolwire/config"
)

// scenario is what the client does in one of the suite's scenarios.
type scenario struct {
	// oauth returns the server's OAuth settings, as an operator would
	// write them in toolwire.yaml given what the suite hands out; nil, or
	// a nil result, means the defaults: the authorization code flow with
	// a dynamically registered client, when the server asks for it.
	oauth func(*scenarioContext) *config.OAuth
	// tool, if set, is called once connected (listing is part of
	// connecting), with args (a JSON object).
	tool, args string
	// unsupported, if set, says why toolwire cannot do what the scenario
	// tests; the client then fails at once, saying so.
	unsupported string
}

// secretEnv is the variable through which the client secret the suite
// hands out reaches toolwire, which reads secrets only from the
// environment (config.OAuth.ClientSecretEnv).
const secretEnv = "TOOLWIRE_CONFORMANCE_CLIENT_SECRET"

// keyEnv is the variable through which the private key the suite hands
// out (PEM) reaches toolwire, as config.OAuth.PrivateKeyEnv names it.
const keyEnv = "TOOLWIRE_CONFORMANCE_PRIVATE_KEY"

// authTool is the tool every auth/* scenario's server offers.
const authTool = "test-tool"

// scenarios are the client scenarios of conformance 0.1.16 (conformance
// list --client), by name.
var scenarios = map[string]scenario{
	"initialize": {},
	"tools_call": {tool: "add_numbers", args: `{"a":5,"b":3}`},
	// The form is accepted as the server prefilled it: the defaults
	// (SEP-1034) are the answer.
	"elicitation-sep1034-client-defaults": {tool: "test_client_elicitation_defaults", args: `{}`},
	// The server ends the call's SSE stream early; the result arrives on
	// the GET stream the transport reopens after the retry interval.
	"sse-retry": {tool: "test_reconnection", args: `{}`},

	"auth/metadata-default":                     authCode,
	"auth/metadata-var1":                        authCode,
	"auth/metadata-var2":                        authCode,
	"auth/metadata-var3":                        authCode,
	"auth/basic-cimd":                           {oauth: cimd, tool: authTool, args: `{}`},
	"auth/scope-from-www-authenticate":          authCode,
	"auth/scope-from-scopes-supported":          authCode,
	"auth/scope-omitted-when-undefined":         authCode,
	"auth/scope-step-up":                        authCode,
	"auth/scope-retry-limit":                    authCode,
	"auth/token-endpoint-auth-basic":            authCode,
	"auth/token-endpoint-auth-post":             authCode,
	"auth/token-endpoint-auth-none":             authCode,
	"auth/pre-registration":                     authCode,
	"auth/2025-03-26-oauth-metadata-backcompat": authCode,
	"auth/2025-03-26-oauth-endpoint-fallback":   authCode,
	"auth/resource-mismatch":                    authCode,
	"auth/offline-access-scope":                 authCode,
	"auth/offline-access-not-supported":         authCode,

	"auth/client-credentials-basic":       {oauth: clientCredentials, tool: authTool, args: `{}`},
	"auth/client-credentials-jwt":         {oauth: clientCredentialsJWT, tool: authTool, args: `{}`},
	"auth/cross-app-access-complete-flow": {oauth: enterprise, tool: authTool, args: `{}`},
}

// authCode is an auth/* scenario of the authorization code flow: a client
// registered in advance when the suite hands one out, else the defaults.
var authCode = scenario{oauth: preregistered, tool: authTool, args: `{}`}

func preregistered(c *scenarioContext) *config.OAuth {
	if c.ClientID == "" {
		return nil
	}
	o := &config.OAuth{ClientID: c.ClientID}
	if c.ClientSecret != "" {
		o.ClientSecretEnv = secretEnv
	}
	return o
}

func clientCredentials(c *scenarioContext) *config.OAuth {
	return &config.OAuth{Grant: "client_credentials", ClientID: c.ClientID, ClientSecretEnv: secretEnv}
}

// cimdURL is where the suite's basic-cimd scenario expects toolwire's
// client metadata to be published: the client ID it must see.
const cimdURL = "https://conformance-test.local/client-metadata.json"

// cimd is the operator's setting for a published Client ID Metadata
// Document (config.OAuth.ClientMetadataURL).
func cimd(*scenarioContext) *config.OAuth { return &config.OAuth{ClientMetadataURL: cimdURL} }

// clientCredentialsJWT is client_credentials with private_key_jwt client
// authentication (RFC 7523), the key named by its variable.
func clientCredentialsJWT(c *scenarioContext) *config.OAuth {
	return &config.OAuth{Grant: "client_credentials", ClientID: c.ClientID, PrivateKeyEnv: keyEnv}
}

// idTokenEnv is the variable through which the user's ID token from the
// IdP reaches toolwire (config.IdP.IDTokenEnv).
const idTokenEnv = "TOOLWIRE_CONFORMANCE_ID_TOKEN"

// enterprise is enterprise-managed authorization (cross-app access): the
// client at the MCP server's authorization server, and the IdP.
func enterprise(c *scenarioContext) *config.OAuth {
	return &config.OAuth{Grant: "enterprise", ClientID: c.ClientID, ClientSecretEnv: secretEnv, IdP: &config.IdP{
		Issuer: c.IdPIssuer, TokenEndpoint: c.IdPTokenEndpoint, ClientID: c.IdPClientID, IDTokenEnv: idTokenEnv,
	}}
}

func scenarioNames() []string { return slices.Sorted(maps.Keys(scenarios)) }
