package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/audit"
	"github.com/toolwire/toolwire/pins"
	"github.com/toolwire/toolwire/tool"
)

// Issue 12.10: the registry's watchers and the catalog's run with none of
// the server's locks held, so a watcher that calls back into the server
// (Status, PID, Tools, as the docs invite) neither deadlocks a
// re-listing nor Close.
func TestWatchersMayCallBackIntoTheServer(t *testing.T) {
	t.Parallel()
	ctx := boundedCtx(t, waitTime)
	srv, url := notifyingServer(t)
	reg := confirmingRegistry()
	var server atomic.Pointer[Server]
	var mu sync.Mutex
	var seen []State // what the watchers saw, through the server
	look := func() {
		if s := server.Load(); s != nil {
			st := s.Status()
			_ = s.PID()
			_ = s.Tools()
			mu.Lock()
			seen = append(seen, st.State)
			mu.Unlock()
		}
	}
	stopReg := reg.Watch(look)
	defer stopReg()
	// Not connect(): its cleanup would Close again and, were Close
	// deadlocked, hang the test run instead of failing this test.
	s, err := Connect(ctx, httpConfig("srv", url), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	server.Store(s)
	stopCat := s.Catalog().Watch(look, nil)
	defer stopCat()

	// A re-listing changes the registry from the supervisor goroutine.
	srv.AddTool(&mcp.Tool{Name: "gamma", InputSchema: json.RawMessage(`{"type":"object"}`)}, answer("gamma"))
	waitFor(t, "srv__gamma registered", func() bool { return reg.Has("srv__gamma") })

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return: a watcher calling back into the server deadlocked it")
	}
	mu.Lock()
	defer mu.Unlock()
	// The re-listing's change, the registry's change at Close and the
	// catalog's at Close all reached a watcher that called back.
	if len(seen) < 3 || seen[len(seen)-1] != Stopped {
		t.Errorf("watchers saw states %v; want at least three calls, the last once stopped", seen)
	}
	if reg.Len() != 0 {
		t.Errorf("registry holds %v after Close", toolNames(reg))
	}
}

// A catalog watcher may stop itself from inside its call.
func TestCatalogWatcherMayStopItself(t *testing.T) {
	t.Parallel()
	var w watchers
	calls := 0
	var stop func()
	stop = w.add(watcher{changed: func() { calls++; stop() }})
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.each(func(x watcher) { x.changed() })
		w.each(func(x watcher) { x.changed() })
	}()
	select {
	case <-done:
	case <-time.After(waitTime):
		t.Fatal("a watcher stopping itself deadlocked")
	}
	if calls != 1 {
		t.Errorf("the watcher ran %d times, want once (it stopped itself)", calls)
	}
}

// Issue 12.1: a running server that sees a look-alike tool appear gives
// every tool the name a fresh start with the same listing gives it, so
// approvals and role globs that name a tool reach that tool in every run.
func TestNamesAgreeBetweenARelistingAndAFreshStart(t *testing.T) {
	t.Parallel()
	obj := json.RawMessage(`{"type":"object"}`)
	srv := mcp.NewServer(&mcp.Implementation{Name: "lookalike", Version: "0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "a_b", InputSchema: obj}, answer("a_b"))
	url := serveHTTP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	running := confirmingRegistry()
	connect(t, httpConfig("h", url), running, nil)
	holder := func() string {
		tl, _ := running.Lookup("h__a_b")
		if tl == nil {
			return ""
		}
		return tl.Origin.Name
	}
	if got := holder(); got != "a_b" {
		t.Fatalf("h__a_b is %q, want a_b", got)
	}

	srv.AddTool(&mcp.Tool{Name: "a.b", InputSchema: obj}, answer("a.b"))
	waitFor(t, "a.b registered", func() bool { return running.Len() == 2 })
	if got := holder(); got != "a_b" {
		t.Errorf("after the relisting h__a_b is %q: the name moved from a_b to another tool", got)
	}

	fresh := confirmingRegistry()
	connect(t, httpConfig("h", url), fresh, nil)
	origins := func(reg *tool.Registry) map[string]string {
		m := map[string]string{}
		for _, tl := range reg.List() {
			m[tl.Name] = tl.Origin.Name
		}
		return m
	}
	a, b := origins(running), origins(fresh)
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("running holds %v, fresh holds %v; want two tools each", a, b)
	}
	for name, orig := range a {
		if b[name] != orig {
			t.Errorf("%s is %q in the running server and %q after a fresh start", name, orig, b[name])
		}
	}
	if a["h__a_b"] != "a_b" {
		t.Errorf("h__a_b is %q, want a_b (the exact name keeps the plain name)", a["h__a_b"])
	}
	ex := tool.NewExecutor(running, nil)
	names := slices.Sorted(maps.Keys(a))
	for _, name := range names {
		if res := call(t, ex, name, `{}`); res.Text() != a[name] {
			t.Errorf("%s answered %q, want %q", name, res.Text(), a[name])
		}
	}
}

// Issue 12.14: a re-listing that Close cuts short, because toolwire is
// exiting, says nothing.
func TestRelistingCutShortByCloseSaysNothing(t *testing.T) {
	t.Parallel()
	ctx := boundedCtx(t, waitTime)
	srv := mcp.NewServer(&mcp.Implementation{Name: "slowlist", Version: "0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "alpha", InputSchema: json.RawMessage(`{"type":"object"}`)}, answer("alpha"))
	var lists atomic.Int32
	listing := make(chan struct{}) // closed when the second tools/list arrives
	release := make(chan struct{})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" && lists.Add(1) == 2 {
				close(listing)
				<-release // answers only once Close has begun
				return nil, errors.New("too late")
			}
			return next(ctx, method, req)
		}
	})
	url := serveHTTP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	logs := &logRecords{}
	s, err := Connect(ctx, httpConfig("srv", url), confirmingRegistry(), &Options{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	// The server's DELETE handling waits for the listing's handler, so it
	// must end: once Close has cancelled the re-listing.
	context.AfterFunc(s.sup.stopCtx, func() { close(release) })
	srv.AddTool(&mcp.Tool{Name: "beta", InputSchema: json.RawMessage(`{"type":"object"}`)}, answer("beta"))
	select {
	case <-listing:
	case <-ctx.Done():
		t.Fatal("the server never saw the re-listing")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	for _, l := range logs.lines() {
		if strings.HasPrefix(l, "WARN") || strings.HasPrefix(l, "ERROR") {
			t.Errorf("logged %q while closing; want nothing above info", l)
		}
	}
}

// A server whose tool stays left out (its name is another server's) does
// not report a change at each re-listing, and a real change is reported
// alone.
func TestRelistingWithAToolLeftOutReportsOnlyRealChanges(t *testing.T) {
	t.Parallel()
	ctx := boundedCtx(t, waitTime)
	reg := confirmingRegistry()
	_, url1 := toolServer(t, objTool("alpha", "first's"))
	srv2, url2 := toolServer(t, objTool("alpha", "second's"), objTool("beta", "b"))
	cfg1, cfg2 := httpConfig("first", url1), httpConfig("second", url2)
	cfg1.Prefix, cfg2.Prefix = "shared", "shared"
	connect(t, cfg1, reg, nil)
	watch, log := newAuditWatch()
	s2 := connect(t, cfg2, reg, &Options{Audit: log})
	if got := s2.Tools(); !slices.Equal(got, []string{"shared__beta"}) {
		t.Fatalf("second holds %v, want [shared__beta]", got)
	}

	// A change to the left-out tool only: nothing registered changes.
	srv2.AddTool(objTool("alpha", "second's, edited"), answer("alpha"))
	waitFor(t, "the re-listing with the edited alpha", func() bool {
		return slices.ContainsFunc(s2.Definitions(), func(d pins.Definition) bool { return d.Description == "second's, edited" })
	})
	// Then a real one, in a re-listing of its own (the supervisor handles
	// them in turn, so the first one's events come before it), which the
	// event must report alone.
	srv2.AddTool(objTool("gamma", "g"), answer("gamma"))
	evs := watch.waitFor(t, ctx, "gamma's tools.changed", func(evs []audit.Event) bool {
		return slices.ContainsFunc(evs, func(ev audit.Event) bool {
			return ev.Kind == audit.ToolsChanged && slices.Contains(ev.Added, "shared__gamma")
		})
	})
	for _, ev := range evs {
		if ev.Kind == audit.ToolsChanged && (len(ev.Added)+len(ev.Removed)+len(ev.Changed) == 0 || !slices.Equal(ev.Added, []string{"shared__gamma"})) {
			t.Errorf("tools.changed %+v; want only gamma added, never an empty change", ev)
		}
	}
	if tl, _ := reg.Lookup("shared__alpha"); tl == nil || tl.Origin.Source != "first" {
		t.Errorf("shared__alpha = %+v, want the first server's still", tl)
	}
}
