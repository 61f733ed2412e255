package oauth

import (
	"net/url"
	"strings"
)

// An entry of the store is bound to the MCP server it was obtained for:
// its Resource is that server's URL, and its issuer is its registration's
// (Client.Issuer), to which its token, refresh token and pending
// authorization belong. The store is keyed by the configured server name,
// and a name can come to stand for another server (an edited file, a
// second file reusing the name, an imported host config); an entry bound
// to another URL, or to another authorization server than the configured
// client's, is never used: no token of it is sent and no refresh token
// redeemed, and the server needs a login, which replaces the entry.
//
// An entry written before entries were bound has no Resource. Nothing
// says which URL its token was obtained for, so it is not trusted either
// (fail closed): such a server needs one new login.

// binding is what an entry must be bound to, to be used.
type binding struct {
	// resource is the canonical URL of the server (see canonicalResource);
	// empty matches no entry.
	resource string
	// issuer and clientID, if set, are the configured client's: an entry
	// whose registration is another's is not used. For a caller's entry
	// the issuer is the one discovery found for the server.
	issuer, clientID string
	// caller, set for a gateway caller's entry, is that caller: an entry
	// of another caller, or a server's own entry, is not used. Nil (a
	// server's own binding) holds no caller's entry.
	caller *Caller
}

// holds reports whether e is bound to b. A nil entry holds nothing and is
// reported as bound: there is nothing in it to misuse.
func (b binding) holds(e *Entry) bool {
	if e == nil || e.empty() {
		return true
	}
	switch {
	case b.resource == "" || e.Resource != b.resource:
		return false
	case (b.caller == nil) != (e.Caller == nil), b.caller != nil && *b.caller != *e.Caller:
		return false
	case e.Client == nil:
		// A token or pending authorization without its registration
		// names no issuer.
		return false
	case b.issuer != "" && !sameIssuer(e.Client.Issuer, b.issuer):
		return false
	case b.clientID != "" && !e.Client.Dynamic && e.Client.ID != b.clientID:
		return false
	}
	return true
}

// rebind makes e an entry of b: an entry bound elsewhere is emptied first,
// so that nothing of it survives into the new one.
func (b binding) rebind(e *Entry) {
	if !b.holds(e) || e.Resource != b.resource {
		*e = Entry{Server: e.Server}
	}
	e.Resource = b.resource
	if b.caller != nil {
		c := *b.caller
		e.Caller = &c
	}
}

// mismatch says why e is not used, without any URL (a URL may carry a
// credential in its query).
func (b binding) mismatch(e *Entry) string {
	switch {
	case e.Resource == "":
		return "the stored authorization predates toolwire's binding of tokens to a server URL"
	case e.Resource != b.resource:
		return "the stored authorization was obtained for another server URL"
	case (b.caller == nil) != (e.Caller == nil), b.caller != nil && *b.caller != *e.Caller:
		return "the stored authorization belongs to another caller"
	}
	return "the stored authorization belongs to another client or authorization server"
}

// canonicalResource returns raw in the form entries are compared in: the
// scheme and host lowercased, a default port dropped, an empty path made
// "/", the fragment removed (RFC 3986, section 6.2.3). An unparsable or
// relative URL gives "", which no entry is bound to.
func canonicalResource(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if u.Scheme == "https" && port == "443" || u.Scheme == "http" && port == "80" {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	u.Host = host
	if u.Path == "" {
		u.Path, u.RawPath = "/", ""
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// BoundTo reports whether the entry was obtained for the MCP server at
// resource: what the configuration says of a server (its client's secret,
// say) applies to an entry only then.
func (e *Entry) BoundTo(resource string) bool {
	return e != nil && e.Resource != "" && e.Resource == canonicalResource(resource)
}
