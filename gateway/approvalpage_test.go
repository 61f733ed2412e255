package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/browsertest"
	"github.com/toolwire/toolwire/tool"
)

// pageRequest is a request to an approval page as the gateway answered it.
type pageRequest struct {
	method, host, origin string
	status               int
}

// pageRecorder passes every request to next and tells of those to the
// approval pages, with the status they got.
type pageRecorder struct {
	h    http.Handler
	seen chan pageRequest
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (p *pageRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, ApprovalPath) {
		p.h.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	p.h.ServeHTTP(sw, r)
	p.seen <- pageRequest{method: r.Method, host: r.Host, origin: strings.Join(r.Header.Values("Origin"), ","), status: sw.status}
}

// next returns the next request to a page the gateway answered.
func (p *pageRecorder) next(ctx context.Context) (pageRequest, error) {
	select {
	case r := <-p.seen:
		return r, nil
	case <-ctx.Done():
		return pageRequest{}, fmt.Errorf("no request reached the approval page: %w", ctx.Err())
	}
}

// TestApprovalInABrowser: in a real Chromium, the user opens the call's
// page, presses Allow, and the call completes. Before that, the forms
// other pages could send are refused at the gateway: another site's
// form, once with its origin withheld (Origin: null) and once named, and
// a DNS-rebinding page (a name of the attacker's resolving to the
// gateway's 127.0.0.1), which would be the page's own origin in the
// browser's eyes; none of them decides the call.
func TestApprovalInABrowser(t *testing.T) {
	t.Parallel()
	b := newBridge(t, bridgeOptions{noAuth: true})
	rec := &pageRecorder{h: b.h, seen: make(chan pageRequest, 16)}
	gw := httptest.NewServer(rec)
	t.Cleanup(func() { gw.CloseClientConnections(); gw.Close() })
	b.url = gw.URL
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(gw.URL, "http://"))

	// The other site's page: a form that posts an allow to the approval
	// page as soon as it loads.
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		meta := ""
		if r.URL.Query().Get("withhold") != "" {
			meta = `<meta name="referrer" content="no-referrer">`
		}
		fmt.Fprintf(w, `<!doctype html><html><head>%s</head><body><form method="post" action="%s"><input type="hidden" name="decision" value="allow"></form><script>document.forms[0].submit()</script></body></html>`,
			meta, html.EscapeString(r.URL.Query().Get("to")))
	}))
	defer hostile.Close()

	tab := browsertest.New(t, &browsertest.Options{Resolve: []string{"rebind.example"}})
	urlOnly := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	var link string
	cs := b.dial(t, "", Revision2026, &mcp.ClientOptions{
		Capabilities: urlOnly,
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			link = req.Params.URL
			if !strings.HasPrefix(link, gw.URL+ApprovalPath) {
				return nil, fmt.Errorf("asked %+v, want a link to an approval page", req.Params)
			}
			ctx, cancel := context.WithTimeout(tab, time.Minute)
			defer cancel()
			expect := func(what, method, origin string, status int) error {
				got, err := rec.next(ctx)
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				if got.method != method || got.origin != origin || got.status != status {
					return fmt.Errorf("%s: the gateway answered %+v, want %s from origin %q answered %d", what, got, method, origin, status)
				}
				return nil
			}

			// Another site's forms.
			for _, withhold := range []bool{true, false} {
				q := "?to=" + link
				origin := hostile.URL
				if withhold {
					q += "&withhold=1"
					origin = "null"
				}
				if err := chromedp.Do(ctx, chromedp.Navigate(hostile.URL+"/"+q)); err != nil {
					return nil, err
				}
				if err := expect("another site's form", http.MethodPost, origin, http.StatusForbidden); err != nil {
					return nil, err
				}
			}

			// A rebinding page: the page under the attacker's name is not
			// served, nor is a post from that name's origin.
			rebound := "http://rebind.example:" + port
			if err := chromedp.Do(ctx, chromedp.Navigate(rebound+strings.TrimPrefix(link, gw.URL))); err != nil {
				return nil, err
			}
			if err := expect("the page under a rebound name", http.MethodGet, "", http.StatusForbidden); err != nil {
				return nil, err
			}
			// The attacker's own script runs at that origin on a page
			// without the approval page's Content-Security-Policy.
			if err := chromedp.Do(ctx, chromedp.Navigate(rebound+"/elsewhere")); err != nil {
				return nil, err
			}
			status, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(
				`fetch(%q, {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "decision=allow"}).then(r => r.status)`,
				strings.TrimPrefix(link, gw.URL)), chromedp.EvalAwaitPromise))
			if err != nil {
				return nil, fmt.Errorf("the rebinding page's post: %w", err)
			}
			if status != http.StatusForbidden {
				return nil, fmt.Errorf("the rebinding page's post: %d, want 403", status)
			}
			if err := expect("the rebinding page's post", http.MethodPost, rebound, http.StatusForbidden); err != nil {
				return nil, err
			}

			// The user, at the page itself.
			if err := chromedp.Do(ctx, chromedp.Navigate(link)); err != nil {
				return nil, err
			}
			if err := expect("the page", http.MethodGet, "", http.StatusOK); err != nil {
				return nil, err
			}
			shown, err := chromedp.Run(ctx, chromedp.Text("pre"))
			if err != nil || !strings.Contains(shown, "up__deploy") || !strings.Contains(shown, `"env": "browser"`) {
				return nil, fmt.Errorf("the page shows %q (%v), want the call", shown, err)
			}
			if err := chromedp.Do(ctx, chromedp.Click(`button[value="allow"]`)); err != nil {
				return nil, err
			}
			if err := expect("the page's own Allow", http.MethodPost, gw.URL, http.StatusOK); err != nil {
				return nil, err
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	got, isErr := call(t, cs, "up__deploy", map[string]any{"env": "browser"})
	if isErr || got != `deployed {"env":"browser"}` {
		t.Errorf("the call allowed in the browser: %q (isError %v)", got, isErr)
	}
	if link == "" {
		t.Fatal("the client was not asked")
	}
}

// TestApprovalPageRefusesForgedHeaders: requests no browser page of the
// user's would send, each with a page open: a Host that is not a loopback
// name on the loopback listener (rebinding), shown or posted to, even with
// an Origin that matches it; a Host other than the one the page's link
// names, loopback or not; an opaque origin; two Origin headers whose
// first is the page's own; two Sec-Fetch-Site. None takes the decision,
// which the page's own post then still can.
func TestApprovalPageRefusesForgedHeaders(t *testing.T) {
	t.Parallel()
	pages := newApprovalPages(nil, time.Minute)
	ts := httptest.NewServer(&pageServer{pages: pages})
	defer ts.Close()
	token, page, err := pages.open(ctxT(t), tool.PendingCall{Name: "deploy", Tier: tool.Write, Args: []byte(`{}`)}, ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	link := ts.URL + ApprovalPath + token
	evil := "http://evil.example"
	// Another name of the same listener, loopback too: not the link's.
	otherName := "localhost:" + ts.URL[strings.LastIndex(ts.URL, ":")+1:]
	send := func(method, host string, header http.Header) int {
		var body *strings.Reader
		if method == http.MethodPost {
			body = strings.NewReader("decision=allow")
		} else {
			body = strings.NewReader("")
		}
		req, err := http.NewRequestWithContext(ctxT(t), method, link, body)
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range header {
			req.Header[k] = vs
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		name, method, host string
		header             http.Header
	}{
		{"shown under a rebound name", http.MethodGet, "evil.example", nil},
		{"posted under a rebound name, from its origin", http.MethodPost, "evil.example", http.Header{"Origin": {evil}}},
		{"posted under a rebound name, no origin", http.MethodPost, "evil.example:80", nil},
		{"shown under another name than its link's", http.MethodGet, otherName, nil},
		{"posted under another name than its link's, from its origin", http.MethodPost, otherName, http.Header{"Origin": {"http://" + otherName}}},
		{"posted from an opaque origin", http.MethodPost, "", http.Header{"Origin": {"null"}}},
		{"posted with two origins", http.MethodPost, "", http.Header{"Origin": {ts.URL, evil}}},
		{"posted with two Sec-Fetch-Site", http.MethodPost, "", http.Header{"Origin": {ts.URL}, "Sec-Fetch-Site": {"same-origin", "cross-site"}}},
		{"posted cross-site", http.MethodPost, "", http.Header{"Origin": {ts.URL}, "Sec-Fetch-Site": {"cross-site"}}},
	} {
		if got := send(c.method, c.host, c.header); got != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", c.name, got)
		}
	}
	select {
	case <-page.decided:
		t.Fatalf("a forged request decided the call (allowed %v)", page.allowed)
	default:
	}
	if got := send(http.MethodGet, "", nil); got != http.StatusOK {
		t.Errorf("the page: %d, want 200", got)
	}
	if got := send(http.MethodPost, "", http.Header{"Origin": {ts.URL}, "Sec-Fetch-Site": {"same-origin"}}); got != http.StatusOK {
		t.Errorf("the page's own post: %d, want 200", got)
	}
	if !page.allowed {
		t.Error("the page's own allow was not taken")
	}
}

// TestSignInIsConfirmedByTheCallersOwnClient: a call whose caller has
// signed in at an upstream but not given the code their browser was shown
// (tool.Authorization.AwaitsCode) asks the caller's own client for it: by
// a form where the client declares forms, by a link to the gateway's code
// page where it declares URL mode only, and otherwise in the result's
// text, naming the page; the call runs once the code confirms the
// sign-in. A wrong code is refused at the page, which stays open for the
// right one.
// signInCode is the code that confirms the sign-in of newSignInGateway's
// tool.
const signInCode = "ABCDE-FGHIJ"

// signInGateway is a gateway on 127.0.0.1 whose one tool, whoami, fails
// as a call of an upstream reached with the caller's identity does when
// the caller has signed in and not yet given the code (AwaitsCode), until
// signInCode is given to its Confirm.
type signInGateway struct {
	ts        *httptest.Server
	mu        sync.Mutex
	confirmed bool
	tried     []string // the codes given, in order
}

func newSignInGateway(t *testing.T) *signInGateway {
	t.Helper()
	f := &signInGateway{}
	reg := tool.NewRegistry(nil)
	if err := reg.Register(&tool.Tool{Name: "whoami", Tier: tool.Read, InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, json.RawMessage) (*tool.Result, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.confirmed {
				return tool.TextResult("the caller's own account"), nil
			}
			return nil, &tool.AuthorizationError{Err: errors.New("awaiting the code"), Authorization: tool.Authorization{
				Source: "up", ID: "a1", Expires: time.Now().Add(time.Minute), AwaitsCode: true,
				Confirm: func(_ context.Context, got string) error {
					f.mu.Lock()
					defer f.mu.Unlock()
					f.tried = append(f.tried, got)
					if got != signInCode {
						return errors.New("wrong code")
					}
					f.confirmed = true
					return nil
				}}}
		}}); err != nil {
		t.Fatal(err)
	}
	h := New(tool.NewExecutor(reg, nil), &Options{Logger: slog.New(slog.DiscardHandler)}).Handler(&HTTPOptions{})
	f.ts = httptest.NewServer(h)
	t.Cleanup(func() { f.ts.CloseClientConnections(); f.ts.Close(); h.Close() })
	return f
}

func (f *signInGateway) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.confirmed, f.tried = false, nil
}

// dial connects a client of revision rev.
func (f *signInGateway) dial(t *testing.T, rev string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	var so *mcp.ClientSessionOptions
	if rev != Revision2026 {
		so = &mcp.ClientSessionOptions{ProtocolVersion: rev}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, opts).Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: f.ts.URL + "/mcp", MaxRetries: -1}, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func TestSignInIsConfirmedByTheCallersOwnClient(t *testing.T) {
	t.Parallel()
	f := newSignInGateway(t)
	ts, code, reset := f.ts, signInCode, f.reset
	mu, tried := &f.mu, &f.tried
	post := func(page, code string) (int, string) {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, page, strings.NewReader(url.Values{"code": {code}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", ts.URL)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	dial := func(rev string, opts *mcp.ClientOptions) *mcp.ClientSession { return f.dial(t, rev, opts) }

	// A client with forms is asked for the code by a form.
	reset()
	cs := dial("2025-11-25", &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Mode != "form" || !strings.Contains(req.Params.Message, "code") {
				return nil, fmt.Errorf("asked %+v, want a form for the code", req.Params)
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"code": code}}, nil
		}})
	if got, isErr := call(t, cs, "whoami", nil); isErr || got != "the caller's own account" {
		t.Errorf("a client with forms: %q (isError %v)", got, isErr)
	}

	// A client with URL mode only is sent to the code page; a wrong code
	// there is refused, the right one confirms.
	reset()
	cs = dial(Revision2026, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Mode != "url" || !strings.HasPrefix(req.Params.URL, ts.URL+ApprovalPath) {
				return nil, fmt.Errorf("asked %+v, want a link to the code page", req.Params)
			}
			if status, body := post(req.Params.URL, "WRONG-CODE1"); status != http.StatusUnprocessableEntity || !strings.Contains(body, "wrong code") {
				return nil, fmt.Errorf("a wrong code: %d %s", status, body)
			}
			if status, body := post(req.Params.URL, code); status != http.StatusOK || !strings.Contains(body, "confirmed") {
				return nil, fmt.Errorf("the code: %d %s", status, body)
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		}})
	if got, isErr := call(t, cs, "whoami", nil); isErr || got != "the caller's own account" {
		t.Errorf("a client with URL mode: %q (isError %v)", got, isErr)
	}
	mu.Lock()
	if strings.Join(*tried, " ") != "WRONG-CODE1 "+code {
		t.Errorf("codes tried %q", *tried)
	}
	mu.Unlock()

	// A client that cannot be asked is told the page; it calls again once
	// the code is in.
	reset()
	cs = dial("2025-11-25", nil)
	got, isErr := call(t, cs, "whoami", nil)
	i := strings.Index(got, ts.URL+ApprovalPath)
	if !isErr || i < 0 {
		t.Fatalf("a plain client: %q (isError %v), want the code page named", got, isErr)
	}
	page := strings.Fields(got[i:])[0]
	if status, body := post(page, code); status != http.StatusOK {
		t.Fatalf("the code at the page: %d %s", status, body)
	}
	if got, isErr := call(t, cs, "whoami", nil); isErr || got != "the caller's own account" {
		t.Errorf("a plain client after entering the code: %q (isError %v)", got, isErr)
	}
}

// TestSignInCodePageInABrowser: a client with URL mode only is sent to the
// code page; in a real Chromium the user types a wrong code (refused, the
// page asks again), then the code their sign-in showed, presses Confirm,
// and the call runs.
func TestSignInCodePageInABrowser(t *testing.T) {
	t.Parallel()
	f := newSignInGateway(t)
	tab := browsertest.New(t, nil)
	cs := f.dial(t, Revision2026, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			ctx, cancel := context.WithTimeout(tab, time.Minute)
			defer cancel()
			// Each answer is a page of its own: a refusal (#refusal) or
			// the end (#done), which the page asked from has neither of.
			enter := func(code, answer string) (string, error) {
				if err := chromedp.Do(ctx,
					chromedp.SendKeys(`input[name="code"]`, code),
					chromedp.Click(`button[value="confirm"]`),
					chromedp.WaitVisible(answer),
				); err != nil {
					return "", err
				}
				return chromedp.Run(ctx, chromedp.Text(answer))
			}
			if err := chromedp.Do(ctx, chromedp.Navigate(req.Params.URL)); err != nil {
				return nil, err
			}
			if got, err := enter("WRONG-CODE1", "#refusal"); err != nil || !strings.Contains(got, "wrong code") {
				return nil, fmt.Errorf("a wrong code: the page says %q (%v)", got, err)
			}
			if got, err := enter(signInCode, "#done"); err != nil || !strings.Contains(got, "Your sign-in is confirmed") {
				return nil, fmt.Errorf("the code: the page says %q (%v)", got, err)
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		}})
	if got, isErr := call(t, cs, "whoami", nil); isErr || got != "the caller's own account" {
		t.Errorf("the call after the code was entered in the browser: %q (isError %v)", got, isErr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.Join(f.tried, " ") != "WRONG-CODE1 "+signInCode {
		t.Errorf("codes given %q, want the wrong one, then the right one", f.tried)
	}
}
