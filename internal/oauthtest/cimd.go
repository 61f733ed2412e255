package oauthtest

import (
	"encoding/json"
	"fmt"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// AddMetadataClient makes the OP advertise Client ID Metadata Document
// support (client_id_metadata_document_supported) and know the client
// that doc, a Client ID Metadata Document, describes, as if it had
// fetched doc from its client_id URL (which a test cannot serve: it is
// https on a public host). The client is public, with doc's redirect URIs.
func (o *OP) AddMetadataClient(doc []byte) error {
	var meta struct {
		ClientID     string   `json:"client_id"`
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	if err := json.Unmarshal(doc, &meta); err != nil {
		return fmt.Errorf("client metadata document: %w", err)
	}
	if meta.ClientID == "" || len(meta.RedirectURIs) == 0 || meta.AuthMethod != "none" {
		return fmt.Errorf("client metadata document: want client_id, redirect_uris and token_endpoint_auth_method none: %s", doc)
	}
	o.st.add(&client{id: meta.ClientID, redirects: meta.RedirectURIs, method: oidc.AuthMethodNone,
		grants: []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}, appType: op.ApplicationTypeNative})
	o.mu.Lock()
	o.cimd = true
	o.mu.Unlock()
	return nil
}
