package config

var oauthFields = []string{"clientId", "clientSecretEnv", "scopes", "grant", "authMethod"}

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
	// Scopes to ask for; empty means those the server advertises.
	Scopes []string
	// Grant is "authorization_code" (the default: a person logs in) or
	// "client_credentials" (machine to machine; needs ClientID and
	// ClientSecretEnv).
	Grant string
	// AuthMethod is how the client authenticates at the token endpoint:
	// "client_secret_basic" or "client_secret_post"; empty means what the
	// authorization server lists, post first.
	AuthMethod string
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
		case "scopes":
			if list, ok := d.strList(p.value, fpath, true); ok {
				o.Scopes = list
			}
		case "grant":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				if s != "authorization_code" && s != "client_credentials" {
					d.errorf(p.value.line, fpath, "unknown grant %q (want authorization_code or client_credentials)", s)
					continue
				}
				o.Grant = s
			}
		case "authMethod":
			if s, ok := d.nonEmpty(p.value, fpath); ok {
				if s != "client_secret_basic" && s != "client_secret_post" {
					d.errorf(p.value.line, fpath, "unknown authMethod %q (want client_secret_basic or client_secret_post)", s)
					continue
				}
				o.AuthMethod = s
			}
		default:
			d.unknownField(p, path, oauthFields)
		}
	}
	if o.Grant == "client_credentials" && (o.ClientID == "" || o.ClientSecretEnv == "") {
		d.errorf(v.line, path, "grant client_credentials needs clientId and clientSecretEnv")
	}
	return o
}
