package oauth

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestPublicClientTokenRequestsCarryClientIDInTheForm: a token request with
// "Basic base64(id:)" (what x/oauth2 auto-detection sends for a client
// without a secret) reaches the token endpoint without the header and with
// client_id in the form; other requests pass unchanged.
func TestPublicClientTokenRequestsCarryClientIDInTheForm(t *testing.T) {
	type seen struct{ auth, clientID, code string }
	got := make(chan seen, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f, _ := url.ParseQuery(string(b))
		got <- seen{r.Header.Get("Authorization"), f.Get("client_id"), f.Get("code")}
	}))
	defer srv.Close()
	token := srv.URL + "/token"
	c := publicClientHTTP(srv.Client(), token)

	post := func(u, auth string) seen {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader("grant_type=authorization_code&code=abc"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-got
	}
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }

	if s := post(token, basic("my%20app:")); s.auth != "" || s.clientID != "my app" || s.code != "abc" {
		t.Errorf("public token request arrived as %+v; want no Authorization, client_id \"my app\", the form kept", s)
	}
	if s := post(token, basic("app:secret")); s.auth == "" || s.clientID != "" {
		t.Errorf("a request with a secret was changed: %+v", s)
	}
	if s := post(srv.URL+"/other", basic("app:")); s.auth == "" {
		t.Errorf("a request to another endpoint was changed: %+v", s)
	}
}
