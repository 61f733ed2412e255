package oauth

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// DefaultLoginTimeout bounds the wait for the user's authorization.
const DefaultLoginTimeout = 5 * time.Minute

// callbackPath is where the loopback receiver expects the redirect.
const callbackPath = "/callback"

// Loopback is the [Fetcher] of the interactive login (RFC 8252, section
// 7.3): it receives the redirect on http://127.0.0.1:PORT/callback, on the
// port of the registered redirect URI when it is free (so the registration
// stays valid), else on a new ephemeral port. It prints the authorization
// URL, opens it with Open if set, and waits for the redirect, a pasted
// redirect URL or code on In if set, the timeout, or the context.
//
// The receiver answers GET /callback only, checks the state (a mismatch
// ends the login with an error wrapping [ErrStateMismatch]), and has short
// timeouts.
type Loopback struct {
	// Open opens a URL in the user's browser. Nil: the URL is only
	// printed (with In, the no-browser mode).
	Open func(ctx context.Context, url string) error
	// Out receives the instructions and the URL. Nil means os.Stderr.
	Out io.Writer
	// In, if set, is read for a pasted redirect URL (preferred: it carries
	// state and iss) or a bare code, for a browser on another machine. It
	// is read in a goroutine that ends when In yields a line or an error;
	// a login that ends first leaves it blocked until then (with os.Stdin,
	// until the process exits).
	In io.Reader
	// Timeout bounds the wait for the response; zero means
	// DefaultLoginTimeout.
	Timeout time.Duration
}

var _ Fetcher = (*Loopback)(nil)

// Prepare starts the receiver. release stops it and waits for it.
func (l *Loopback) Prepare(ctx context.Context, registered string) (string, auth.AuthorizationCodeFetcher, func(), error) {
	ln, err := listenLoopback(registered)
	if err != nil {
		return "", nil, nil, err
	}
	r := &receiver{l: l, results: make(chan outcome, 1)}
	srv := &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       10 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln) // returns when release closes the server
	}()
	release := func() {
		srv.Close()
		<-served
	}
	return "http://" + ln.Addr().String() + callbackPath, r.fetch, release, nil
}

// listenLoopback listens on the port of registered if it is a loopback
// redirect of ours and the port is free, else on an ephemeral port.
func listenLoopback(registered string) (net.Listener, error) {
	if u, err := url.Parse(registered); err == nil && u.Scheme == "http" && u.Hostname() == "127.0.0.1" && u.Path == callbackPath && u.Port() != "" {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+u.Port()); err == nil {
			return ln, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loopback listener: %w", err)
	}
	return ln, nil
}

// outcome is what the redirect (or the paste) brought.
type outcome struct {
	res *auth.AuthorizationResult
	err error
}

// receiver serves the redirect for one login attempt.
type receiver struct {
	l       *Loopback
	mu      sync.Mutex
	state   string // expected; empty until fetch has the URL
	results chan outcome
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != callbackPath {
		http.NotFound(w, req)
		return
	}
	if req.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	r.mu.Lock()
	want := r.state
	r.mu.Unlock()
	if want == "" {
		http.Error(w, "toolwire is not waiting for an authorization", http.StatusBadRequest)
		return
	}
	o := check(req.URL.Query(), want)
	if o.err != nil {
		http.Error(w, "toolwire: "+o.err.Error(), http.StatusBadRequest)
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "toolwire received the authorization. You can close this window.\n")
	}
	r.deliver(o)
}

// deliver passes on the first outcome; later ones are dropped.
func (r *receiver) deliver(o outcome) {
	select {
	case r.results <- o:
	default:
	}
}

// check reads an authorization response and checks its state. The state
// comes first, so that a forged error response is reported as forged.
func check(q url.Values, want string) outcome {
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(want)) != 1 {
		return outcome{err: ErrStateMismatch}
	}
	res, err := resultFrom(q)
	return outcome{res: res, err: err}
}

func (r *receiver) fetch(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(args.URL)
	if err != nil {
		return nil, errors.New("authorization URL does not parse")
	}
	state := u.Query().Get("state")
	if state == "" {
		return nil, errors.New("authorization URL has no state")
	}
	r.mu.Lock()
	r.state = state
	r.mu.Unlock()

	out := r.l.Out
	if out == nil {
		out = os.Stderr
	}
	fmt.Fprintf(out, "To authorize toolwire, open this URL in a browser:\n\n  %s\n\n", args.URL)
	if r.l.Open != nil {
		if err := r.l.Open(ctx, args.URL); err != nil {
			fmt.Fprintf(out, "Could not open a browser (%v); open the URL yourself.\n", err)
		}
	}
	if r.l.In != nil {
		fmt.Fprintf(out, "If the browser runs on another machine, paste the address it was redirected to (or the code) here and press Enter.\n")
		go r.readPasted(state)
	}
	timeout := r.l.Timeout
	if timeout <= 0 {
		timeout = DefaultLoginTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case o := <-r.results:
		return o.res, o.err
	case <-t.C:
		return nil, fmt.Errorf("no authorization response within %v", timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readPasted reads one non-empty line from In: a redirect URL, or a bare
// code (then the state cannot be checked; PKCE still binds the code to
// this login).
func (r *receiver) readPasted(state string) {
	sc := bufio.NewScanner(r.l.In)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if strings.Contains(line, "?") {
			u, err := url.Parse(line)
			if err != nil {
				r.deliver(outcome{err: errors.New("the pasted address does not parse")})
				return
			}
			r.deliver(check(u.Query(), state))
			return
		}
		r.deliver(outcome{res: &auth.AuthorizationResult{Code: line, State: state}})
		return
	}
	if err := sc.Err(); err != nil {
		r.deliver(outcome{err: fmt.Errorf("reading the pasted response: %w", err)})
	}
}
