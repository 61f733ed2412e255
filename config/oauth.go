package config

import (
	"net/url"
	"strings"

	"github.com/toolwire/toolwire/netpolicy"
)

var oauthFields = []string{"clientId", "clientSecretEnv", "privateKeyFile", "privateKeyEnv", "clientMetadataUrl", "scopes", "grant", "authMethod", "idp",
	"identity", "issuer", "redirectUrl", "subjectTokenType", "audience"}

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

	// Identity says whose identity calls reach the server with:
	// IdentityShared (the default, "" when not set: one authorization for
	// every call, the operator's) or IdentityCaller (each gateway caller's
	// own: Grant "authorization_code", a login per caller through the
	// gateway's RedirectURL, or "token_exchange", the caller's own token
	// exchanged at Issuer, RFC 8693). The caller's own token is never sent
	// to the server.
	Identity string
	// Issuer is the server's authorization server. With grant
	// "token_exchange" it is required: callers' tokens are sent to it and
	// nowhere else. With identity "caller" and a login it pins the
	// authorization server. Only with identity "caller".
	Issuer string
	// RedirectURL is where callers' browsers come back to the gateway
	// after a per-caller login (identity "caller", grant
	// "authorization_code"): https, or http to loopback. The file's OAuth
	// defaults may give it for every such server.
	RedirectURL string
	// SubjectTokenType is what a caller's token is presented as in a
	// token exchange: "access_token" (the default) or "jwt".
	SubjectTokenType string
	// Audience, if set, is sent as the token exchange's audience, for
	// authorization servers that name their resources so.
	Audience string
}

// The values of OAuth.Identity.
const (
	IdentityShared = "shared"
	IdentityCaller = "caller"
)

// PerCaller reports whether calls reach the server with each gateway
// caller's own identity.
func (o *OAuth) PerCaller() bool { return o != nil && o.Identity == IdentityCaller }

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
			if s, ok := d.choice(p.value, fpath, "grant", "authorization_code, client_credentials, enterprise or token_exchange", "authorization_code", "client_credentials", "enterprise", "token_exchange"); ok {
				o.Grant = s
			}
		case "identity":
			if s, ok := d.choice(p.value, fpath, "identity", "shared, one authorization for every call, or caller, each gateway caller's own", IdentityShared, IdentityCaller); ok {
				o.Identity = s
			}
		case "issuer":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				if msg := urlProblem(s, true); msg != "" {
					d.errorf(p.value.line, fpath, "%s", msg)
					continue
				}
				o.Issuer = s
			}
		case "redirectUrl":
			if s, ok := d.redirectURL(p.value, fpath); ok {
				o.RedirectURL = s
			}
		case "subjectTokenType":
			if s, ok := d.choice(p.value, fpath, "subjectTokenType", "access_token or jwt", "access_token", "jwt"); ok {
				o.SubjectTokenType = s
			}
		case "audience":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				o.Audience = s
			}
		case "authMethod":
			if s, ok := d.choice(p.value, fpath, "authMethod", "client_secret_basic, client_secret_post or private_key_jwt", "client_secret_basic", "client_secret_post", "private_key_jwt"); ok {
				o.AuthMethod = s
			}
		case "idp":
			o.IdP = d.idp(p.value, fpath)
		default:
			d.unknownField(p, path, oauthFields)
		}
	}
	keyed := o.PrivateKeyFile != "" || o.PrivateKeyEnv != ""
	caller, exchange := o.Identity == IdentityCaller, o.Grant == "token_exchange"
	switch {
	case exchange && !caller:
		d.errorf(v.line, path, "grant token_exchange exchanges a gateway caller's own token: it needs identity: caller")
	case caller && o.Grant != "" && o.Grant != "authorization_code" && !exchange:
		d.errorf(v.line, path, "identity caller obtains each caller's own token: with grant authorization_code (a login per caller) or token_exchange, not %s", o.Grant)
	case !caller && (o.Issuer != "" || o.RedirectURL != ""):
		d.errorf(v.line, path, "issuer and redirectUrl are settings of identity: caller")
	case !exchange && (o.SubjectTokenType != "" || o.Audience != ""):
		d.errorf(v.line, path, "subjectTokenType and audience are settings of grant token_exchange")
	case exchange && (o.ClientID == "" || o.ClientSecretEnv == "" && !keyed || o.Issuer == ""):
		d.errorf(v.line, path, "grant token_exchange needs issuer (the authorization server callers' tokens are exchanged at, and sent to alone) and clientId with clientSecretEnv or a private key (the gateway's client there)")
	case exchange && o.RedirectURL != "":
		d.errorf(v.line, path, "redirectUrl is for a login per caller, not grant token_exchange")
	case caller && !exchange && (o.ClientSecretEnv != "" || keyed) && o.Issuer == "":
		d.errorf(v.line, path, "a login per caller with clientSecretEnv or a private key needs issuer (the authorization server the client is registered at): the client's secret is sent there and nowhere else, whatever the server's metadata names")
	}
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

// redirectURL decodes the gateway's redirect URL of per-caller logins:
// https, or http to a loopback host, with no fragment and no user info.
func (d *decoder) redirectURL(v *node, path string) (string, bool) {
	s, ok := d.nonEmpty(v, path)
	if !ok {
		return "", false
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		d.errorf(v.line, path, "want the https URL browsers reach the gateway's OAuth callback at, got %q", s)
	case u.Scheme == "http" && !netpolicy.IsLoopbackHost(u.Hostname()):
		d.errorf(v.line, path, "plain http is for a loopback host only: want https, got %q", s)
	case u.Fragment != "" || u.User != nil:
		d.errorf(v.line, path, "no fragment or user info allowed, got %q", s)
	default:
		return s, true
	}
	return "", false
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

var oauthDefaultFields = []string{"clientMetadataUrl", "redirectUrl"}

// oauthDefaults decodes the top-level "oauth" section of toolwire's file,
// the OAuth defaults of its remote servers, and applies them: a
// clientMetadataUrl goes to every remote server of the file whose own
// oauth settings name no client, no other grant and no URL of their own; a
// redirectUrl to every server with a login per caller (identity caller,
// grant authorization_code) that names none of its own.
func (d *decoder) oauthDefaults(v *node, servers []Server) {
	const path = "oauth"
	if !d.wantMap(v, path, "a map of OAuth defaults") {
		return
	}
	metaURL, redirect := "", ""
	for _, p := range d.entries(v, path) {
		switch p.key {
		case "clientMetadataUrl":
			metaURL, _ = d.metadataURL(p.value, joinPath(path, p.key))
		case "redirectUrl":
			redirect, _ = d.redirectURL(p.value, joinPath(path, p.key))
		default:
			d.unknownField(p, path, oauthDefaultFields)
		}
	}
	if redirect != "" {
		for i := range servers {
			if o := servers[i].OAuth; o.PerCaller() && (o.Grant == "" || o.Grant == "authorization_code") && o.RedirectURL == "" {
				o.RedirectURL = redirect
			}
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

// callerIdentity checks, once the file is decoded, what the servers with
// identity caller need of the rest of it: a login per caller needs the
// redirect URL of the gateway's callback (its own or the OAuth defaults');
// every one needs the gateway to authenticate its callers, and token
// exchange needs callers with JWTs (gateway.jwt), the only caller tokens an
// authorization server can verify.
func (d *decoder) callerIdentity(servers pair, f *File) {
	for _, s := range f.Servers {
		o := s.OAuth
		if !o.PerCaller() {
			continue
		}
		path, line := joinPath(joinPath("servers", s.Name), "oauth"), s.Line
		if sp, ok := lookup(servers.value, s.Name); ok {
			if op, ok := lookup(sp.value, "oauth"); ok {
				line = op.value.line
			}
		}
		g := f.Gateway
		authHeader := s.BearerToken != ""
		for k := range s.Headers {
			authHeader = authHeader || strings.EqualFold(k, "Authorization")
		}
		switch {
		case authHeader:
			d.errorf(line, path, "identity caller: bearerToken or an Authorization header would send one credential for every caller; remove it")
		case o.Grant != "token_exchange" && o.RedirectURL == "":
			d.errorf(line, path, "identity caller with a login per caller needs redirectUrl (or the file's oauth.redirectUrl): the gateway's URL callers' browsers come back to, e.g. https://gateway.example.com/oauth/callback")
		case g == nil || g.JWT == nil && len(g.Tokens) == 0:
			d.errorf(line, path, "identity caller reaches the server with each gateway caller's identity: it needs gateway.tokens or gateway.jwt, which authenticate the callers")
		case o.Grant == "token_exchange" && g.JWT == nil:
			d.errorf(line, path, "grant token_exchange exchanges the caller's JWT: it needs gateway.jwt (static gateway tokens mean nothing to an authorization server)")
		}
	}
}
