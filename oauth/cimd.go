package oauth

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/toolwire/toolwire/netpolicy"
)

// LoopbackRedirectURI is the redirect URI a Client ID Metadata Document
// lists for `toolwire login`: the loopback receiver, whose port changes
// from one login to the next, which authorization servers allow for
// loopback redirects (RFC 8252, section 7.3).
const LoopbackRedirectURI = "http://127.0.0.1" + callbackPath

// CheckClientMetadataURL checks a client metadata URL: https, with a path
// (the draft's client ID rules; a bare origin is not a document), no
// fragment, no credentials, and a host the remote-URL rule allows.
func CheckClientMetadataURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("client metadata URL %q: %w", raw, err)
	case u.Scheme != "https":
		return fmt.Errorf("client metadata URL %q: want an https URL", raw)
	case u.Path == "" || u.Path == "/":
		return fmt.Errorf("client metadata URL %q: want a path to the document, not the bare origin", raw)
	case u.Fragment != "" || u.User != nil:
		return fmt.Errorf("client metadata URL %q: no fragment or user info allowed", raw)
	case u.Hostname() == "" || netpolicy.IsLoopbackHost(u.Hostname()):
		return fmt.Errorf("client metadata URL %q: want a public host the authorization server can fetch", raw)
	}
	return nil
}

// ClientMetadataDocument returns the Client ID Metadata Document to
// publish at metadataURL (draft-ietf-oauth-client-id-metadata-document):
// toolwire as a public native client, with the given redirect URIs
// (nil means [LoopbackRedirectURI]), the authorization_code and
// refresh_token grants, and name as client_name ("" means "toolwire").
func ClientMetadataDocument(metadataURL, name string, redirects []string) ([]byte, error) {
	if err := CheckClientMetadataURL(metadataURL); err != nil {
		return nil, err
	}
	if len(redirects) == 0 {
		redirects = []string{LoopbackRedirectURI}
	}
	for _, r := range redirects {
		if err := checkRedirect(r); err != nil {
			return nil, fmt.Errorf("redirect URI: %w", err)
		}
	}
	if name == "" {
		name = "toolwire"
	}
	doc := struct {
		ClientID                string   `json:"client_id"`
		ClientName              string   `json:"client_name"`
		RedirectURIs            []string `json:"redirect_uris"`
		GrantTypes              []string `json:"grant_types"`
		ResponseTypes           []string `json:"response_types"`
		TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
		ApplicationType         string   `json:"application_type"`
	}{
		ClientID:                metadataURL,
		ClientName:              name,
		RedirectURIs:            redirects,
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		TokenEndpointAuthMethod: "none",
		ApplicationType:         applicationType(redirects[0]),
	}
	return json.MarshalIndent(doc, "", "  ")
}
