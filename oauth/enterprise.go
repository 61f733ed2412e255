package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/toolwire/toolwire/netpolicy"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Enterprise-managed authorization (SEP-990, cross-app access): the
// grant and token types of its two requests.
const (
	// GrantJWTBearer is the JWT bearer authorization grant (RFC 7523,
	// section 2.1), with which the ID-JAG is presented.
	GrantJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	// GrantTokenExchange is RFC 8693's token exchange grant.
	GrantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	// TokenTypeIDToken is the subject token's type: an OpenID Connect ID
	// token.
	TokenTypeIDToken = "urn:ietf:params:oauth:token-type:id_token"
	// TokenTypeIDJAG is the identity assertion JWT authorization grant.
	TokenTypeIDJAG = "urn:ietf:params:oauth:token-type:id-jag"
)

// IdPConfig is the enterprise identity provider of enterprise-managed
// authorization: where toolwire exchanges the user's ID token for an
// identity assertion (ID-JAG) for the MCP server's authorization server.
type IdPConfig struct {
	// Issuer is the IdP's issuer URL. Required.
	Issuer string
	// TokenEndpoint is the IdP's token endpoint; empty means the one its
	// metadata (RFC 8414 or OpenID discovery at Issuer) names.
	TokenEndpoint string
	// ClientID is toolwire's client at the IdP. Required.
	ClientID string
	// SecretEnv, if set, names the variable holding that client's secret
	// (sent with client_secret_post); empty means a public client.
	SecretEnv string
	// IDTokenEnv names the variable holding the user's ID token from the
	// IdP, IDTokenFile a file holding it (as an SSO agent keeps it
	// fresh); exactly one is set. It is read at each exchange, never
	// stored.
	IDTokenEnv, IDTokenFile string
}

func (c *IdPConfig) check() error {
	switch {
	case c.Issuer == "":
		return errors.New("identity provider without an issuer")
	case c.ClientID == "":
		return errors.New("identity provider without a client ID")
	case (c.IDTokenEnv == "") == (c.IDTokenFile == ""):
		return errors.New("identity provider: want exactly one of an ID token variable and an ID token file")
	}
	for _, u := range []string{c.Issuer, c.TokenEndpoint} {
		if u == "" {
			continue
		}
		if _, err := netpolicy.CheckURL(u); err != nil {
			return fmt.Errorf("identity provider: %w", err)
		}
	}
	return nil
}

// idToken reads the user's ID token.
func (c *IdPConfig) idToken() (string, error) {
	if c.IDTokenFile != "" {
		b, err := readPrivateFile(c.IDTokenFile)
		if err != nil {
			return "", fmt.Errorf("read the ID token: %w", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("ID token file %s is empty", c.IDTokenFile)
	}
	if t, _ := os.LookupEnv(c.IDTokenEnv); strings.TrimSpace(t) != "" {
		return strings.TrimSpace(t), nil
	}
	return "", fmt.Errorf("environment variable %s (the ID token) is not set", c.IDTokenEnv)
}

// grant returns the JWT bearer grant's parameters for a token of the MCP
// server at resource, from the authorization server issuer: each time, a
// new ID-JAG from the IdP (they live minutes), for the token request that
// presents it.
func (c *IdPConfig) grant(client *http.Client, issuer, resource string, scopes []string) func(context.Context) (url.Values, []string, error) {
	return func(ctx context.Context) (url.Values, []string, error) {
		jag, idt, err := c.exchange(ctx, client, issuer, resource, scopes)
		if err != nil {
			return nil, nil, err
		}
		return url.Values{"grant_type": {GrantJWTBearer}, "assertion": {jag}}, []string{jag, idt}, nil
	}
}

// exchange exchanges the user's ID token at the IdP for an ID-JAG whose
// audience is the authorization server issuer and whose resource is the
// MCP server (RFC 8693; SEP-990). It returns the ID-JAG and the ID token
// (to keep out of errors).
func (c *IdPConfig) exchange(ctx context.Context, client *http.Client, issuer, resource string, scopes []string) (jag, idt string, err error) {
	defer wrapf(&err, "identity provider %s", c.Issuer)
	if idt, err = c.idToken(); err != nil {
		return "", "", err
	}
	endpoint := c.TokenEndpoint
	if endpoint == "" {
		// The rules of any authorization server's metadata: its issuer,
		// and every endpoint passing the remote-URL rule.
		meta, err := serverMetadata(ctx, client, c.Issuer)
		if err != nil {
			return "", "", err
		}
		endpoint = meta.TokenEndpoint
	}
	secret := ""
	if c.SecretEnv != "" {
		if secret, _ = os.LookupEnv(c.SecretEnv); secret == "" {
			return "", "", fmt.Errorf("environment variable %s (the IdP client secret) is not set", c.SecretEnv)
		}
	}
	cfg := clientcredentials.Config{
		ClientID:     c.ClientID,
		ClientSecret: secret,
		TokenURL:     endpoint,
		Scopes:       scopes,
		AuthStyle:    oauth2.AuthStyleInParams,
		EndpointParams: url.Values{
			"grant_type":           {GrantTokenExchange},
			"requested_token_type": {TokenTypeIDJAG},
			"subject_token":        {idt},
			"subject_token_type":   {TokenTypeIDToken},
			"audience":             {issuer},
			"resource":             {resource},
		},
	}
	t, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, client))
	if err != nil {
		return "", "", endpointError("token exchange", err, idt, secret)
	}
	if typ, _ := t.Extra("issued_token_type").(string); typ != TokenTypeIDJAG {
		return "", "", fmt.Errorf("token exchange issued a token of type %q, want %s", typ, TokenTypeIDJAG)
	}
	return t.AccessToken, idt, nil
}
