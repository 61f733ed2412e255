package workspace

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/config"
)

// A server reached with each gateway caller's identity gets no handler of
// a shared credential: the connection fails, naming why, until a caller's
// own session serves it.
func TestPerCallerServerGetsNoSharedHandler(t *testing.T) {
	t.Parallel()
	lookup := func(string) (string, bool) { return "s3cret", true }
	for _, o := range []*config.OAuth{
		{Identity: config.IdentityCaller, RedirectURL: "https://gw.example.com/oauth/callback"},
		{Identity: config.IdentityCaller, Grant: "token_exchange", Issuer: "https://as.example.com", ClientID: "gw", ClientSecretEnv: "GW_SECRET"},
	} {
		srv := config.Server{Name: "wiki", URL: "https://wiki.example.com/mcp", OAuth: o}
		h, err := OAuthHandlers(nil, &OAuthOptions{LookupEnv: lookup})(srv, http.DefaultClient)
		if h != nil || err == nil || !strings.Contains(err.Error(), `server "wiki": oauth.identity is caller`) {
			t.Errorf("grant %q: handler %v, error %v; want no handler and an error naming identity caller", o.Grant, h, err)
		}
	}
}
