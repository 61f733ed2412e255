package oauth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/toolwire/toolwire/netpolicy"
)

// discovery is what toolwire learns about a protected server before it
// asks anyone anything: which authorization server protects it and what
// that server supports. Every URL in it has passed the remote-URL rule.
type discovery struct {
	// resource is the RFC 8707 resource indicator: the protected resource
	// metadata's resource, or the endpoint if there is none.
	resource string
	// scopes are the scopes the server asked for (WWW-Authenticate), else
	// those its metadata lists.
	scopes []string
	asm    *oauthex.AuthServerMeta
}

// maxMetadata bounds a metadata document.
const maxMetadata = 1 << 20

// discover finds the authorization server for endpoint, which answered
// with challenges. It follows MCP's authorization spec (2025-11-25):
// protected resource metadata (RFC 9728) from the challenge's
// resource_metadata, then at the well-known URL with the endpoint's path,
// then at the root; else, as in 2025-03-26, the endpoint's origin is the
// authorization server. Its metadata (RFC 8414, or OpenID Connect
// discovery) must exist, name itself with the issuer it was reached as,
// and advertise PKCE S256 when pkce is set.
func discover(ctx context.Context, client *http.Client, challenges []oauthex.Challenge, endpoint string, pkce bool) (_ *discovery, err error) {
	defer wrapf(&err, "discovery")
	eu, err := netpolicy.CheckURL(endpoint)
	if err != nil {
		return nil, err
	}
	d := &discovery{resource: endpoint}
	var issuer string
	prm, err := resourceMetadata(ctx, client, challenges, eu)
	if err != nil {
		return nil, err
	}
	if prm != nil {
		d.resource = prm.Resource
		d.scopes = prm.ScopesSupported
		issuer = prm.AuthorizationServers[0]
	} else {
		o := *eu
		o.Path, o.RawPath, o.RawQuery = "", "", ""
		issuer = o.String()
	}
	if s := challengeParam(challenges, "scope"); s != "" {
		d.scopes = strings.Fields(s)
	}
	d.asm, err = serverMetadata(ctx, client, issuer)
	if err != nil {
		return nil, err
	}
	if pkce && !slices.Contains(d.asm.CodeChallengeMethodsSupported, "S256") {
		return nil, fmt.Errorf("authorization server %s: %w (it lists %q)", issuer, ErrNoPKCE, d.asm.CodeChallengeMethodsSupported)
	}
	return d, nil
}

// resourceMetadata returns the protected resource metadata of endpoint,
// or nil if it publishes none.
func resourceMetadata(ctx context.Context, client *http.Client, challenges []oauthex.Challenge, endpoint *url.URL) (*oauthex.ProtectedResourceMetadata, error) {
	type candidate struct{ url, resource string }
	var cands []candidate
	if u := resourceMetadataURL(challenges); u != "" {
		// Chosen by the server: it must pass the rule like any URL.
		if _, err := netpolicy.CheckURL(u); err != nil {
			return nil, fmt.Errorf("resource_metadata from WWW-Authenticate: %w", err)
		}
		cands = append(cands, candidate{u, endpoint.String()})
	}
	wk := *endpoint
	wk.RawQuery, wk.RawPath = "", ""
	if p := strings.Trim(endpoint.Path, "/"); p != "" {
		wk.Path = "/.well-known/oauth-protected-resource/" + p
		cands = append(cands, candidate{wk.String(), endpoint.String()})
	}
	wk.Path = "/.well-known/oauth-protected-resource"
	root := *endpoint
	root.Path, root.RawPath, root.RawQuery = "", "", ""
	cands = append(cands, candidate{wk.String(), root.String()})

	for _, c := range cands {
		var prm oauthex.ProtectedResourceMetadata
		found, err := getJSON(ctx, client, c.url, &prm)
		if err != nil {
			return nil, fmt.Errorf("protected resource metadata: %w", err)
		}
		if !found {
			continue
		}
		// RFC 9728, section 3.3: the metadata must be for this resource.
		if prm.Resource != c.resource {
			return nil, fmt.Errorf("protected resource metadata at %s is for resource %q, want %q", c.url, prm.Resource, c.resource)
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, fmt.Errorf("protected resource metadata at %s names no authorization server", c.url)
		}
		if _, err := netpolicy.CheckURL(prm.AuthorizationServers[0]); err != nil {
			return nil, fmt.Errorf("authorization server in protected resource metadata: %w", err)
		}
		return &prm, nil
	}
	return nil, nil
}

// serverMetadata fetches and checks the metadata of the authorization
// server issuer, trying the RFC 8414 and OpenID Connect locations in the
// order MCP's spec gives.
func serverMetadata(ctx context.Context, client *http.Client, issuer string) (*oauthex.AuthServerMeta, error) {
	iu, err := netpolicy.CheckURL(issuer)
	if err != nil {
		return nil, fmt.Errorf("authorization server: %w", err)
	}
	var urls []string
	at := func(path string) {
		u := *iu
		u.Path, u.RawPath, u.RawQuery = path, "", ""
		urls = append(urls, u.String())
	}
	if p := strings.Trim(iu.Path, "/"); p == "" {
		at("/.well-known/oauth-authorization-server")
		at("/.well-known/openid-configuration")
	} else {
		at("/.well-known/oauth-authorization-server/" + p)
		at("/.well-known/openid-configuration/" + p)
		at("/" + p + "/.well-known/openid-configuration")
	}
	for _, u := range urls {
		var asm oauthex.AuthServerMeta
		found, err := getJSON(ctx, client, u, &asm)
		if err != nil {
			return nil, fmt.Errorf("authorization server metadata: %w", err)
		}
		if !found {
			continue
		}
		if !sameIssuer(asm.Issuer, issuer) {
			return nil, fmt.Errorf("metadata at %s: %w: it says %q, want %q", u, ErrIssuerMismatch, asm.Issuer, issuer)
		}
		for _, f := range []struct{ name, url string }{
			{"authorization_endpoint", asm.AuthorizationEndpoint},
			{"token_endpoint", asm.TokenEndpoint},
			{"registration_endpoint", asm.RegistrationEndpoint},
		} {
			if f.url == "" {
				if f.name == "token_endpoint" {
					return nil, fmt.Errorf("metadata at %s has no token_endpoint", u)
				}
				continue
			}
			if _, err := netpolicy.CheckURL(f.url); err != nil {
				return nil, fmt.Errorf("metadata at %s: %s: %w", u, f.name, err)
			}
		}
		return &asm, nil
	}
	return nil, fmt.Errorf("authorization server %s: %w (tried %s)", issuer, ErrNoMetadata, strings.Join(urls, ", "))
}

// getJSON fetches a metadata document into v. A 4xx answer means "not
// here" (found is false); anything else that is not a JSON 200 is an
// error.
func getJSON(ctx context.Context, client *http.Client, u string, v any) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	defer io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return false, nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return false, fmt.Errorf("GET %s: content type %q, want application/json", u, resp.Header.Get("Content-Type"))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadata+1))
	if err != nil {
		return false, fmt.Errorf("GET %s: %w", u, err)
	}
	if len(data) > maxMetadata {
		return false, fmt.Errorf("GET %s: document larger than %d bytes", u, maxMetadata)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("GET %s: %w", u, err)
	}
	return true, nil
}

// sameIssuer compares issuer identifiers, tolerating one trailing slash as
// go-sdk does.
func sameIssuer(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// challengeParam returns a parameter of the first Bearer challenge that
// has it.
func challengeParam(cs []oauthex.Challenge, name string) string {
	for _, c := range cs {
		if c.Scheme == "bearer" {
			if v := c.Params[name]; v != "" {
				return v
			}
		}
	}
	return ""
}

// challengeError returns the error parameter of the Bearer challenge.
func challengeError(cs []oauthex.Challenge) string { return challengeParam(cs, "error") }

// resourceMetadataURL returns the resource_metadata parameter of any
// challenge (RFC 9728, section 5.1 defines it for every scheme).
func resourceMetadataURL(cs []oauthex.Challenge) string {
	for _, c := range cs {
		if v := c.Params["resource_metadata"]; v != "" {
			return v
		}
	}
	return ""
}
