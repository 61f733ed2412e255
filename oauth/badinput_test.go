package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/netpolicy"
)

// TestLoginRefusesBadAuthorizationServers drives `toolwire login` against
// authorization servers and resource servers that break a rule. Each must
// fail with a clear error before any user interaction, and register
// nothing.
func TestLoginRefusesBadAuthorizationServers(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(map[string]any)
		rs     *oauthtest.ResourceOptions
		want   error  // errors.Is target, or nil
		url    bool   // want a *netpolicy.URLError
		text   string // in the message
	}{
		{
			name:   "metadata names another issuer",
			mutate: func(d map[string]any) { d["issuer"] = "http://127.0.0.1:1" },
			want:   ErrIssuerMismatch,
			text:   "http://127.0.0.1:1",
		},
		{
			name:   "PKCE plain only",
			mutate: func(d map[string]any) { d["code_challenge_methods_supported"] = []string{"plain"} },
			want:   ErrNoPKCE,
		},
		{
			name:   "PKCE not advertised",
			mutate: func(d map[string]any) { delete(d, "code_challenge_methods_supported") },
			want:   ErrNoPKCE,
		},
		{
			name:   "token endpoint over plain http elsewhere",
			mutate: func(d map[string]any) { d["token_endpoint"] = "http://as.example/token" },
			url:    true,
			text:   "token_endpoint",
		},
		{
			name: "resource metadata URL over plain http elsewhere",
			rs:   &oauthtest.ResourceOptions{ResourceMetadataURL: "http://rs.example/.well-known/oauth-protected-resource"},
			url:  true,
			text: "resource_metadata",
		},
		{
			name: "authorization server over plain http elsewhere",
			rs: &oauthtest.ResourceOptions{PRM: func(p *oauthex.ProtectedResourceMetadata) {
				p.AuthorizationServers = []string{"http://as.example"}
			}},
			url:  true,
			text: "http://as.example",
		},
		{
			name: "no authorization server metadata",
			rs: &oauthtest.ResourceOptions{PRM: func(p *oauthex.ProtectedResourceMetadata) {
				// The resource server itself, which publishes no metadata.
				u, _ := url.Parse(p.Resource)
				u.Path = ""
				p.AuthorizationServers = []string{u.String()}
			}},
			want: ErrNoMetadata,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			if tt.rs != nil {
				f.rs = oauthtest.NewResourceServer(t, f.op, tt.rs)
			}
			f.op.SetMutate(tt.mutate)
			err := f.handler("login").Login(ctx, f.rs.URL)
			if err == nil {
				t.Fatal("login succeeded")
			}
			t.Log(err)
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			var ue *netpolicy.URLError
			if tt.url && !errors.As(err, &ue) {
				t.Errorf("got %v, want a URL rule refusal", err)
			}
			if !strings.Contains(err.Error(), tt.text) || !strings.Contains(err.Error(), `server "demo"`) {
				t.Errorf("message %q should name the server and contain %q", err, tt.text)
			}
			if f.browser.Opened() != 0 || f.op.Registrations() != 0 {
				t.Errorf("browser opened %d times, %d registrations; want none", f.browser.Opened(), f.op.Registrations())
			}
		})
	}
}

func TestLoopbackStateMismatch(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.browser.Tamper(func(u *url.URL) {
		q := u.Query()
		q.Set("state", "forged")
		u.RawQuery = q.Encode()
	})
	err := f.handler("login").Login(ctx, f.rs.URL)
	t.Log(err)
	if !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("login with a forged state: %v, want ErrStateMismatch", err)
	}
	if f.browser.LastStatus() != http.StatusBadRequest {
		t.Errorf("loopback answered the forged redirect with %d, want 400", f.browser.LastStatus())
	}
	if n := f.op.Exchanges(); n != 0 {
		t.Errorf("%d code exchanges after a forged state, want 0", n)
	}
	if e := f.entry(); e.Token != nil {
		t.Error("a token was stored")
	}
}

// echo is a token endpoint fault that repeats the request, secrets and
// all, in its answer: what a careless or hostile server might do.
func echo(status int, withCode bool, seen *url.Values, mu *sync.Mutex) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*seen = r.PostForm
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		desc := r.PostForm.Encode() + " " + r.Header.Get("Authorization")
		if withCode {
			fmt.Fprintf(w, `{"error":"invalid_request","error_description":%q}`, desc)
		} else {
			fmt.Fprintf(w, `{"oops":%q}`, desc)
		}
	}
}

func TestTokenEndpointErrorsRevealNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	f.expire()
	before := f.entry()
	var mu sync.Mutex
	var seen url.Values
	for _, tt := range []struct {
		name     string
		status   int
		withCode bool
	}{
		{"500 without an error code", http.StatusInternalServerError, false},
		{"400 echoing in error_description", http.StatusBadRequest, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f.op.SetTokenFault(echo(tt.status, tt.withCode, &seen, &mu))
			_, err := f.handler("none").src.Token()
			if err == nil {
				t.Fatal("refresh succeeded")
			}
			t.Log(err)
			if errors.Is(err, ErrLoginRequired) {
				t.Errorf("a transient failure means login required: %v", err)
			}
			mu.Lock()
			rt := seen.Get("refresh_token")
			mu.Unlock()
			if rt != before.Token.RefreshToken {
				t.Fatalf("the fault did not see the refresh token")
			}
			noSecrets(t, err.Error(), rt, before.Token.AccessToken)
			if !strings.Contains(err.Error(), fmt.Sprint(tt.status)) || !strings.Contains(err.Error(), `server "demo"`) {
				t.Errorf("message %q should name the server and the status", err)
			}
			if after := f.entry(); after.Token == nil || after.Token.RefreshToken != before.Token.RefreshToken {
				t.Error("a failed refresh changed the stored token")
			}
		})
	}
	f.op.SetTokenFault(nil)

	// The code exchange of a login, with the code and verifier echoed.
	f.op.SetTokenFault(func(w http.ResponseWriter, r *http.Request) {
		if r.PostForm.Get("grant_type") == "authorization_code" {
			echo(http.StatusBadRequest, true, &seen, &mu)(w, r)
			return
		}
		http.Error(w, "unexpected", 500)
	})
	err := f.handler("login").Login(ctx, f.rs.URL)
	t.Log(err)
	var ee *EndpointError
	if !errors.As(err, &ee) || ee.Code != "invalid_request" {
		t.Fatalf("login with a failing exchange: %v, want the token endpoint's invalid_request", err)
	}
	mu.Lock()
	code, verifier := seen.Get("code"), seen.Get("code_verifier")
	mu.Unlock()
	if code == "" || verifier == "" {
		t.Fatal("the fault did not see the code and verifier")
	}
	noSecrets(t, err.Error(), code, verifier)
}

func TestHungTokenEndpointIsBounded(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	if err := f.handler("login").Login(ctx, f.rs.URL); err != nil {
		t.Fatal(err)
	}
	f.expire()
	f.op.SetTokenFault(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // hangs until the client gives up
	})
	src := NewTokenSource(newTestStore(t, f.path), "demo", f.rs.URL, f.hc, &SourceOptions{RefreshTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := src.Token()
	t.Log(err)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("refresh against a hung server: %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refresh took %v", d)
	}
	if e := f.entry(); e.Token == nil {
		t.Error("a timed-out refresh dropped the token")
	}
}

func TestRegistrationRefusal(t *testing.T) {
	for _, tt := range []struct {
		path   string
		status int
		code   string
	}{
		{"/register?refuse=1", http.StatusBadRequest, "invalid_redirect_uri"}, // RFC 7591 error
		{"/register-closed", http.StatusNotFound, ""},                         // no such endpoint
	} {
		t.Run(tt.path, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			f.op.SetMutate(func(d map[string]any) { d["registration_endpoint"] = f.op.Issuer + tt.path })
			err := f.handler("login").Login(ctx, f.rs.URL)
			t.Log(err)
			var ee *EndpointError
			if !errors.As(err, &ee) || ee.Endpoint != "registration" || ee.Status != tt.status || ee.Code != tt.code {
				t.Fatalf("login with a refusing registration endpoint: %v (%+v), want HTTP %d %q", err, ee, tt.status, tt.code)
			}
			if f.browser.Opened() != 0 {
				t.Error("browser opened")
			}
		})
	}
}
