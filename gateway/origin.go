package gateway

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/toolwire/toolwire/netpolicy"
)

// checkOrigin refuses, with 403, a request whose Origin header is not one
// of allowed: the MCP transport requires servers to validate it, since a
// web page the user visits can otherwise reach a gateway on localhost
// (through DNS rebinding, or as a simple cross-origin POST). A request
// without Origin is not from a browser and passes; "null" (an opaque
// origin) passes only if listed. Origins compare as scheme://host[:port],
// case-insensitively, the default port being the same as none. The
// gateway's own origin on a loopback host (Origin http://localhost:PORT to
// Host localhost:PORT) also passes, as the transport's conformance suite
// expects: no other page can send it, since the gateway serves none and a
// rebinding page's origin carries its own host name.
func checkOrigin(allowed []string, next http.Handler) http.Handler {
	set := map[string]bool{}
	for _, o := range allowed {
		set[normalOrigin(o)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origins := r.Header.Values("Origin")
		if len(origins) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		if len(origins) > 1 || !(set[normalOrigin(origins[0])] || ownLoopbackOrigin(r, origins[0])) {
			http.Error(w, fmt.Sprintf("Forbidden: origin %q is not allowed (the gateway's allowed origins: gateway.allowedOrigins)", origins[0]), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ownLoopbackOrigin reports whether origin is r's own origin on a
// loopback host.
func ownLoopbackOrigin(r *http.Request, origin string) bool {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	host = strings.Trim(host, "[]")
	return netpolicy.IsLoopbackHost(host) && normalOrigin(origin) == normalOrigin(requestOrigin(r))
}

// normalOrigin returns o as compared: lower-case scheme and host, the
// scheme's default port dropped. What does not parse as an origin is kept
// as it is (lower-cased), so it matches only itself.
func normalOrigin(o string) string {
	o = strings.ToLower(strings.TrimSpace(o))
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return o
	}
	host := u.Host
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		host = u.Hostname()
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	return u.Scheme + "://" + host
}

// ValidateOrigin checks an entry of the allowed origins, for configuration.
func ValidateOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("origin %q: want scheme://host[:port], such as https://app.example.com", o)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("origin %q: an origin is only scheme://host[:port], without path, query or user", o)
	}
	return nil
}
