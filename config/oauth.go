package config

import "net/url"

var oauthFields = []string{"clientId", "clientSecretEnv", "privateKeyFile", "privateKeyEnv", "clientMetadataUrl", "scopes", "grant", "authMethod", "idp"}

var idpFields = []string{"issuer", "tokenEndpoint", "clientId", "clientSecretEnv", "idTokenEnv", "idTokenFile"}

// OAuth says how toolwire authorizes with a remote server that requires
// OAuth 2.1 (its "oauth" field). Without one, a server that answers 401
// with an OAuth challenge is still authorized interactively ("toolwire
// login SERVER"), registering a client dynamically when it must.
type OAuth struct {
	// ClientID is a client registered with the authorization server in
	// advance; empty means dynamic registration (RFC 7591) or a client ID
	// metadata document, remembered in the token store.
	ClientID string
	// ClientSecretEnv names the environment variable holding the client's
	// secret, read each time it is needed; the secret never goes in a file.
	ClientSecretEnv string
	// PrivateKeyFile is a PEM file holding the client's private key, for
	// private_key_jwt client authentication (RFC 7523); PrivateKeyEnv
	// names an environment variable holding the PEM text instead. At most
	// one of them, and not with ClientSecretEnv.
	PrivateKeyFile string
	PrivateKeyEnv  string
	// ClientMetadataURL is the https URL where the operator publishes
	// toolwire's client metadata (a Client ID Metadata Document, printed by
	// `toolwire oauth metadata`): the client_id at authorization servers
	// that support such documents, instead of a registration. Not with
	// ClientID.
	ClientMetadataURL string
	// Scopes to ask for; empty means those the server advertises.
	Scopes []string
	// Grant is "authorization_code" (the default: a person logs in),
	// "client_credentials" (machine to machine; needs ClientID and
	// ClientSecretEnv or a private key) or "enterprise" (enterprise-managed
	// authorization, cross-app access: the user's ID token from the IdP is
	// exchanged there for an identity assertion, presented to the server's
	// authorization server with the JWT bearer grant; needs IdP, and
	// ClientID with a secret or key, the client at that authorization
	// server).
	Grant string
	// IdP is the enterprise identity provider of grant "enterprise".
	IdP *IdP
	// AuthMethod is how the client authenticates at the token endpoint:
	// "client_secret_basic" or "client_secret_post" with a secret,
	// "private_key_jwt" with a private key; empty means private_key_jwt
	// with a key, else what the authorization server lists, post first.
	AuthMethod string
}

// IdP is the identity provider of enterprise-managed authorization.
type IdP struct {
	// Issuer is the IdP's issuer URL.
	Issuer string
	// TokenEndpoint, if set, is its token endpoint; else its metadata's.
	TokenEndpoint string
	// ClientID is toolwire's client at the IdP; ClientSecretEnv, if set,
	// names the variable holding its secret.
	ClientID        string
	ClientSecretEnv string
	// IDTokenEnv names the variable holding the user's ID token from the
	// IdP; IDTokenFile is a file holding it instead. One of them.
	IDTokenEnv  string
	IDTokenFile string
}

func (d *decoder) idp(v *node, path string) *IdP {
	if !d.wantMap(v, path, "a map of identity provider settings") {
		return nil
	}
	c := &IdP{}
	for _, p := range d.entries(v, path) {
		fpath := joinPath(path, p.key)
		s, ok := d.nonEmpty(p.value, fpath)
		if !ok {
			continue
		}
		switch p.key {
		case "issuer", "tokenEndpoint":
			if u, err := url.Parse(s); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				d.errorf(p.value.line, fpath, "want an http(s) URL, got %q", s)
				continue
			}
			if p.key == "issuer" {
				c.Issuer = s
			} else {
				c.TokenEndpoint = s
			}
		case "clientId":
			c.ClientID = s
		case "clientSecretEnv", "idTokenEnv":
			if !isEnvName(s) {
				// Not quoted: a secret pasted here by mistake stays out of the message.
				d.errorf(p.value.line, fpath, "must name an environment variable (letters, digits and _); never put the secret or token in the file")
				continue
			}
			if p.key == "clientSecretEnv" {
				c.ClientSecretEnv = s
			} else {
				c.IDTokenEnv = s
			}
		case "idTokenFile":
			c.IDTokenFile = d.resolvePath(p.value.line, fpath, s, false)
		default:
			d.unknownField(p, path, idpFields)
		}
	}
	switch {
	case c.Issuer == "" || c.ClientID == "":
		d.errorf(v.line, path, "needs issuer and clientId")
	case (c.IDTokenEnv == "") == (c.IDTokenFile == ""):
		d.errorf(v.line, path, "needs one of idTokenEnv and idTokenFile (where the user's ID token from the IdP is)")
	}
	return c
}

func (d *decoder) oauth(v *node, path string) *OAuth {
	if !d.wantMap(v, path, "a map of OAuth settings") {
		return nil
	}
	o := &OAuth{}
	for _, p := range d.entries(v, path) {
		fpath := joinPath(path, p.key)
		switch p.key {
		case "clientId":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				o.ClientID = s
			}
		case "clientSecretEnv":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				if !isEnvName(s) {
					// Not quoted: a secret pasted here by mistake stays out of the message.
					d.errorf(p.value.line, fpath, "must name an environment variable (letters, digits and _); put the secret in that variable, never in the file")
					continue
				}
				o.ClientSecretEnv = s
			}
		case "privateKeyFile":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				o.PrivateKeyFile = d.resolvePath(p.value.line, fpath, s, false)
			}
		case "privateKeyEnv":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				if !isEnvName(s) {
					// Not quoted: a key pasted here by mistake stays out of the message.
					d.errorf(p.value.line, fpath, "must name an environment variable (letters, digits and _) holding the PEM key; never put the key in the file")
					continue
				}
				o.PrivateKeyEnv = s
			}
		case "clientMetadataUrl":
			if s, ok := d.metadataURL(p.value, fpath); ok {
				o.ClientMetadataURL = s
			}
		case "scopes":
			if list, ok := d.strList(p.value, fpath, true); ok {
				o.Scopes = list
			}
		case "grant":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				if s != "authorization_code" && s != "client_credentials" && s != "enterprise" {
					d.errorf(p.value.line, fpath, "unknown grant %q (want authorization_code, client_credentials or enterprise)", s)
					continue
				}
				o.Grant = s
			}
		case "authMethod":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				if s != "client_secret_basic" && s != "client_secret_post" && s != "private_key_jwt" {
					d.errorf(p.value.line, fpath, "unknown authMethod %q (want client_secret_basic, client_secret_post or private_key_jwt)", s)
					continue
				}
				o.AuthMethod = s
			}
		case "idp":
			o.IdP = d.idp(p.value, fpath)
		default:
			d.unknownField(p, path, oauthFields)
		}
	}
	keyed := o.PrivateKeyFile != "" || o.PrivateKeyEnv != ""
	switch {
	case o.ClientMetadataURL != "" && (o.ClientID != "" || o.Grant == "client_credentials" || o.Grant == "enterprise"):
		d.errorf(v.line, path, "clientMetadataUrl is the client ID of a login without a configured client: not with clientId or grant client_credentials or enterprise")
	case (o.IdP != nil) != (o.Grant == "enterprise"):
		d.errorf(v.line, path, "idp and grant enterprise go together (enterprise-managed authorization)")
	case o.PrivateKeyFile != "" && o.PrivateKeyEnv != "":
		d.errorf(v.line, path, "privateKeyFile and privateKeyEnv exclude each other (one private key)")
	case keyed && o.ClientSecretEnv != "":
		d.errorf(v.line, path, "a private key (privateKeyFile or privateKeyEnv) and clientSecretEnv exclude each other: the client authenticates with one")
	case keyed && o.ClientID == "":
		d.errorf(v.line, path, "a private key (privateKeyFile or privateKeyEnv) needs clientId, the client it authenticates")
	case keyed && o.AuthMethod != "" && o.AuthMethod != "private_key_jwt":
		d.errorf(v.line, path, "authMethod %s with a private key (want private_key_jwt, or no authMethod)", o.AuthMethod)
	case !keyed && o.AuthMethod == "private_key_jwt":
		d.errorf(v.line, path, "authMethod private_key_jwt needs privateKeyFile or privateKeyEnv")
	case (o.Grant == "client_credentials" || o.Grant == "enterprise") && (o.ClientID == "" || o.ClientSecretEnv == "" && !keyed):
		d.errorf(v.line, path, "grant %s needs clientId and clientSecretEnv (or privateKeyFile or privateKeyEnv)", o.Grant)
	}
	return o
}

// metadataURL decodes a client metadata document URL: https, with a path.
func (d *decoder) metadataURL(v *node, path string) (string, bool) {
	s, ok := d.nonEmpty(v, path)
	if !ok {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" || u.Fragment != "" || u.User != nil {
		d.errorf(v.line, path, "want an https URL with a path to the client metadata document (no fragment, no user info), got %q", s)
		return "", false
	}
	return s, true
}

var oauthDefaultFields = []string{"clientMetadataUrl"}

// oauthDefaults decodes the top-level "oauth" section of toolwire's file,
// the OAuth defaults of its remote servers, and applies them: a
// clientMetadataUrl goes to every remote server of the file whose own
// oauth settings name no client, no other grant and no URL of their own.
func (d *decoder) oauthDefaults(v *node, servers []Server) {
	const path = "oauth"
	if !d.wantMap(v, path, "a map of OAuth defaults") {
		return
	}
	metaURL := ""
	for _, p := range d.entries(v, path) {
		switch p.key {
		case "clientMetadataUrl":
			metaURL, _ = d.metadataURL(p.value, joinPath(path, p.key))
		default:
			d.unknownField(p, path, oauthDefaultFields)
		}
	}
	if metaURL == "" {
		return
	}
	for i := range servers {
		s := &servers[i]
		if s.Transport != TransportHTTP && s.Transport != TransportSSE {
			continue
		}
		if s.OAuth == nil {
			s.OAuth = &OAuth{}
		}
		if o := s.OAuth; o.ClientID == "" && (o.Grant == "" || o.Grant == "authorization_code") && o.ClientMetadataURL == "" {
			o.ClientMetadataURL = metaURL
		}
	}
}
