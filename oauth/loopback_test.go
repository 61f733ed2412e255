package oauth

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// runLoopback prepares a Loopback and runs its fetch for an authorization
// URL with the given state, while user acts on the redirect URL. It
// returns what fetch returned.
func runLoopback(t *testing.T, l *Loopback, registered, state string, user func(redirect string)) (string, *auth.AuthorizationResult, error) {
	t.Helper()
	redirect, fetch, release, err := l.Prepare(context.Background(), registered)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	l.Open = func(_ context.Context, authURL string) error {
		if user != nil {
			user(redirect)
		}
		return nil
	}
	authURL := "https://as.example/authorize?client_id=c&state=" + url.QueryEscape(state)
	res, err := fetch(context.Background(), &auth.AuthorizationArgs{URL: authURL})
	return redirect, res, err
}

func get(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestLoopbackReceivesTheRedirect(t *testing.T) {
	var status int
	redirect, res, err := runLoopback(t, &Loopback{Out: io.Discard}, "", "st8", func(redirect string) {
		status = get(t, redirect+"?code=abc&state=st8&iss=https%3A%2F%2Fas.example")
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != "abc" || res.State != "st8" || res.Iss != "https://as.example" {
		t.Errorf("got %+v", res)
	}
	if status != http.StatusOK {
		t.Errorf("browser saw %d", status)
	}
	if !strings.HasPrefix(redirect, "http://127.0.0.1:") || !strings.HasSuffix(redirect, "/callback") {
		t.Errorf("redirect %q", redirect)
	}
}

func TestLoopbackRefusals(t *testing.T) {
	tests := []struct {
		name   string
		query  string
		status int
		want   error
	}{
		{"state mismatch", "?code=abc&state=forged", http.StatusBadRequest, ErrStateMismatch},
		{"no state", "?code=abc", http.StatusBadRequest, ErrStateMismatch},
		{"forged error response", "?error=access_denied&state=forged", http.StatusBadRequest, ErrStateMismatch},
		{"error response", "?error=access_denied&error_description=no+thanks&state=st8", http.StatusBadRequest, ErrAccessDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var status int
			_, _, err := runLoopback(t, &Loopback{Out: io.Discard}, "", "st8", func(redirect string) {
				status = get(t, redirect+tt.query)
			})
			if !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			if status != tt.status {
				t.Errorf("browser saw %d, want %d", status, tt.status)
			}
		})
	}
}

func TestLoopbackServesOnlyTheCallback(t *testing.T) {
	_, res, err := runLoopback(t, &Loopback{Out: io.Discard}, "", "st8", func(redirect string) {
		base := strings.TrimSuffix(redirect, "/callback")
		if s := get(t, base+"/other?code=x&state=st8"); s != http.StatusNotFound {
			t.Errorf("other path: %d", s)
		}
		resp, err := http.Post(redirect+"?code=x&state=st8", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST: %d", resp.StatusCode)
		}
		get(t, redirect+"?code=real&state=st8")
	})
	if err != nil || res.Code != "real" {
		t.Errorf("got %+v, %v", res, err)
	}
}

func TestLoopbackNoBrowserPaste(t *testing.T) {
	for _, tt := range []struct {
		name, paste string
		want        string
		err         error
	}{
		{"redirect URL", "\nhttp://127.0.0.1:1/callback?code=pasted&state=st8\n", "pasted", nil},
		{"bare code", "just-the-code\n", "just-the-code", nil},
		{"forged URL", "http://127.0.0.1:1/callback?code=pasted&state=other\n", "", ErrStateMismatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			l := &Loopback{Out: &out, In: strings.NewReader(tt.paste)}
			redirect, fetch, release, err := l.Prepare(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			res, err := fetch(context.Background(), &auth.AuthorizationArgs{URL: "https://as.example/a?state=st8"})
			if !errors.Is(err, tt.err) || (err == nil && res.Code != tt.want) {
				t.Errorf("got %+v, %v; want code %q, %v", res, err, tt.want, tt.err)
			}
			if !strings.Contains(out.String(), "https://as.example/a?state=st8") || !strings.Contains(out.String(), "paste") {
				t.Errorf("instructions %q", out.String())
			}
			_ = redirect
		})
	}
}

func TestLoopbackPort(t *testing.T) {
	// A free registered port is reused.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	free := "http://" + ln.Addr().String() + "/callback"
	ln.Close()
	l := &Loopback{Out: io.Discard}
	redirect, _, release, err := l.Prepare(context.Background(), free)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if redirect != free {
		t.Errorf("free registered port: got %s, want %s", redirect, free)
	}
	// A taken one is not: another port, and the handler registers again.
	taken, _ := net.Listen("tcp", "127.0.0.1:0")
	defer taken.Close()
	busy := "http://" + taken.Addr().String() + "/callback"
	redirect, _, release, err = l.Prepare(context.Background(), busy)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if redirect == busy || !strings.HasPrefix(redirect, "http://127.0.0.1:") {
		t.Errorf("taken port: got %s", redirect)
	}
	// After release the receiver is gone.
	if _, err := http.Get(redirect); err == nil {
		t.Error("receiver still answers after release")
	}
}

func TestLoopbackTimeout(t *testing.T) {
	_, _, err := runLoopback(t, &Loopback{Out: io.Discard, Timeout: 50 * time.Millisecond}, "", "st8", nil)
	if err == nil || !strings.Contains(err.Error(), "no authorization response within") {
		t.Errorf("got %v, want a timeout", err)
	}
}

// FuzzCheckRedirect: whatever the query, an accepted response has the
// expected state and a code, and a refusal is one of the documented kinds.
func FuzzCheckRedirect(f *testing.F) {
	f.Add("code=abc&state=st8", "st8")
	f.Add("error=access_denied&state=st8", "st8")
	f.Add("code=&state=st8&state=x", "st8")
	f.Add("state=%00&code=%zz", "")
	f.Fuzz(func(t *testing.T, raw, want string) {
		q, err := url.ParseQuery(raw)
		if err != nil || want == "" {
			return
		}
		o := check(q, want)
		if o.err == nil {
			if o.res.State != want || o.res.Code == "" {
				t.Fatalf("accepted %q for state %q: %+v", raw, want, o.res)
			}
			return
		}
		if !errors.Is(o.err, ErrStateMismatch) && !errors.Is(o.err, ErrAccessDenied) && !strings.Contains(o.err.Error(), "no code") {
			t.Fatalf("unexpected refusal %v", o.err)
		}
	})
}
