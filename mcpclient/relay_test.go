package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/tool"
)

// namedCaller is a tool.Caller that is neither a LogReceiver nor an Asker.
type namedCaller struct{ name string }

func (*namedCaller) Progress(context.Context, tool.Progress) {}

// askingCaller is a tool.Caller and tool.Asker that answers every request
// with answer and remembers what it was asked.
type askingCaller struct {
	answer string
	mu     sync.Mutex
	asked  []tool.RequestKind
}

func (*askingCaller) Progress(context.Context, tool.Progress) {}

func (c *askingCaller) Ask(_ context.Context, kind tool.RequestKind, _ json.RawMessage) (json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, kind)
	return json.RawMessage(c.answer), nil
}

func TestInflightRoute(t *testing.T) {
	a, b, c := &namedCaller{"a"}, &namedCaller{"b"}, &namedCaller{"c"}
	bg := context.Background()
	ctxA, ctxB := tool.WithCaller(bg, a), tool.WithCaller(bg, b)
	cases := []struct {
		name string
		// calls begins and ends calls; it returns the context of the
		// message to route (bg when nil).
		calls      func(f *inflight) context.Context
		afterwards bool
		want       tool.Caller
	}{
		{"no call in flight, log", func(*inflight) context.Context { return nil }, true, nil},
		{"no call in flight, request", func(*inflight) context.Context { return nil }, false, nil},
		{"one call alone, log", func(f *inflight) context.Context { f.begin(ctxA); return nil }, true, a},
		{"one call alone, request", func(f *inflight) context.Context { f.begin(ctxA); return nil }, false, a},
		{"one call alone without a caller", func(f *inflight) context.Context { f.begin(bg); return nil }, false, nil},
		{"a call overlapped by a tracked request without a caller", func(f *inflight) context.Context {
			f.begin(ctxA)
			f.begin(bg) // Server.Track: a resource read, a prompt get
			return nil
		}, false, nil},
		{"a call that a tracked request overlapped", func(f *inflight) context.Context {
			f.begin(ctxA)
			f.end(f.begin(bg))
			return nil
		}, true, nil},
		{"two overlapping, log", func(f *inflight) context.Context { f.begin(ctxA); f.begin(ctxB); return nil }, true, nil},
		{"two overlapping, request", func(f *inflight) context.Context { f.begin(ctxA); f.begin(ctxB); return nil }, false, nil},
		{"the survivor of an overlap, log", func(f *inflight) context.Context {
			ra := f.begin(ctxA)
			f.begin(ctxB)
			f.end(ra)
			return nil
		}, true, nil},
		// A request cannot come from a call that has ended (the server
		// would still be waiting for its answer), so it is the survivor's.
		{"the survivor of an overlap, request", func(f *inflight) context.Context {
			ra := f.begin(ctxA)
			f.begin(ctxB)
			f.end(ra)
			return nil
		}, false, b},
		{"both overlapping ended, log", func(f *inflight) context.Context {
			ra, rb := f.begin(ctxA), f.begin(ctxB)
			f.end(ra)
			f.end(rb)
			return nil
		}, true, nil},
		{"a lone call just ended, log", func(f *inflight) context.Context { f.end(f.begin(ctxA)); return nil }, true, a},
		{"a lone call just ended, request", func(f *inflight) context.Context { f.end(f.begin(ctxA)); return nil }, false, nil},
		{"a new call began after a lone one ended", func(f *inflight) context.Context {
			f.end(f.begin(ctxA))
			f.begin(bg) // this one could have caused the log line
			return nil
		}, true, nil},
		{"a new call began and ended after a lone one ended", func(f *inflight) context.Context {
			f.end(f.begin(ctxA))
			f.end(f.begin(ctxB))
			return nil
		}, true, b},
		{"a lone call then an overlapped pair", func(f *inflight) context.Context {
			f.end(f.begin(ctxA))
			rb := f.begin(ctxB)
			f.end(f.begin(bg))
			f.end(rb)
			return nil
		}, true, nil},
		{"the message's context carries a caller, overlapping calls", func(f *inflight) context.Context {
			f.begin(ctxA)
			f.begin(ctxB)
			return tool.WithCaller(bg, c)
		}, false, c},
		{"the message's context carries a caller, a lone call", func(f *inflight) context.Context {
			f.begin(ctxA)
			return tool.WithCaller(bg, c)
		}, true, c},
		{"the message's context carries a caller, no call", func(*inflight) context.Context {
			return tool.WithCaller(bg, c)
		}, false, c},
		// The SDK asks a 2026-07-28 server's input requests with the
		// context the call was made with, which names the call.
		{"the message's context names a call, overlapping calls", func(f *inflight) context.Context {
			ra := f.begin(ctxA)
			f.begin(ctxB)
			return context.WithValue(ctxA, callRefKey{}, ra)
		}, false, a},
		{"the message's context names a call without a caller, another call alone", func(f *inflight) context.Context {
			rb := f.begin(bg)
			f.end(rb)
			f.begin(ctxA)
			return context.WithValue(bg, callRefKey{}, rb)
		}, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f inflight
			ctx := tc.calls(&f)
			if ctx == nil {
				ctx = bg
			}
			got, gotCtx := f.route(ctx, tc.afterwards)
			if got != tc.want {
				t.Fatalf("route(afterwards=%v) = %v, want %v", tc.afterwards, got, tc.want)
			}
			if got == nil {
				if gotCtx != nil {
					t.Errorf("route gave no caller but a context")
				}
				return
			}
			// The context returned reaches the same caller (it carries
			// the call's values, such as the gateway's session).
			if tool.CallerFrom(gotCtx) != tc.want {
				t.Errorf("the context returned carries %v, want %v", tool.CallerFrom(gotCtx), tc.want)
			}
		})
	}
}

// A log line that arrives after its lone call ended reaches the caller
// with a context that is no longer cancelled with the call's.
func TestInflightRouteAfterwardsOutlivesTheCallsContext(t *testing.T) {
	a := &namedCaller{"a"}
	ctx, cancel := context.WithCancel(tool.WithCaller(context.Background(), a))
	var f inflight
	ref := f.begin(ctx)
	cancel()
	f.end(ref)
	got, gotCtx := f.route(context.Background(), true)
	if got != a {
		t.Fatalf("route = %v, want the caller of the call that just ended", got)
	}
	if err := gotCtx.Err(); err != nil {
		t.Errorf("the context to reach the caller with has ended: %v", err)
	}
	if tool.CallerFrom(gotCtx) != a {
		t.Errorf("the context lost the call's values")
	}
}

func TestAskSaysWhyARequestIsDeclined(t *testing.T) {
	asker := &askingCaller{answer: `{"action":"accept","content":{"x":"y"}}`}
	cases := []struct {
		name    string
		calls   func(f *inflight)
		wantErr string // "" means answered
	}{
		{"no call in flight", func(*inflight) {}, "cannot be matched to a single call in flight"},
		{"two calls in flight", func(f *inflight) {
			f.begin(tool.WithCaller(context.Background(), asker))
			f.begin(tool.WithCaller(context.Background(), asker))
		}, "cannot be matched to a single call in flight"},
		{"the lone call's caller cannot answer", func(f *inflight) {
			f.begin(tool.WithCaller(context.Background(), &namedCaller{"plain"}))
		}, "no call in flight can take it"},
		{"the lone call's caller answers", func(f *inflight) {
			f.begin(tool.WithCaller(context.Background(), asker))
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &router{set: &settings{cfg: config.Server{Name: "up"}}}
			tc.calls(&r.calls)
			var out struct {
				Action  string            `json:"action"`
				Content map[string]string `json:"content"`
			}
			err := r.ask(context.Background(), tool.Elicitation, map[string]string{"message": "hi"}, &out)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ask: %v", err)
				}
				if out.Action != "accept" || out.Content["x"] != "y" {
					t.Errorf("answer decoded as %+v", out)
				}
				asker.mu.Lock()
				defer asker.mu.Unlock()
				if len(asker.asked) != 1 || asker.asked[0] != tool.Elicitation {
					t.Errorf("the caller was asked %v, want one %s", asker.asked, tool.Elicitation)
				}
				return
			}
			if err == nil {
				t.Fatalf("ask answered %+v, want it declined", out)
			}
			if !errors.Is(err, errNoCaller) {
				t.Errorf("ask error %v does not wrap errNoCaller", err)
			}
			for _, want := range []string{tc.wantErr, `"up"`, string(tool.Elicitation)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ask error %q does not say %q", err, want)
				}
			}
		})
	}
}

// The server sends every report of a burst (progress and log lines) just
// before its result: the call returns only once all of them reached the
// caller, over every transport (the SDK hands the result over before its
// queued notifications; arrivals holds it back).
func TestReportsSentBeforeTheResultReachTheCallerFirst(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "sse", "http", "http-2026"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			cfg := stdioConfig("custom", "custom")
			switch transport {
			case "http-2026":
				// Each request carries the log level, and each call's
				// reports come on its own stream.
				cfg = httpConfig("custom", serveHTTP(t, statelessHandler(newCustomServer())))
			case "sse":
				srv := newCustomServer()
				cfg = config.Server{Name: "custom", Transport: "sse", DefaultTier: "read",
					URL: serveHTTP(t, mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil))}
			case "http":
				srv := newCustomServer()
				cfg = httpConfig("custom", serveHTTP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))
			}
			reg := confirmingRegistry()
			s := connect(t, cfg, reg, nil)
			if err := s.Catalog().SetLogLevel(boundedCtx(t, waitTime), "debug"); err != nil {
				t.Fatalf("SetLogLevel: %v", err)
			}
			ex := tool.NewExecutor(reg, nil)
			const n = 10
			for i := range 30 {
				rec := &logRecorder{}
				res := ex.Call(tool.WithCaller(boundedCtx(t, waitTime), rec), "custom__burst", json.RawMessage(fmt.Sprintf(`{"n":%d,"return":true,"logs":true}`, n)))
				if res.IsError || res.Text() != "done" {
					t.Fatalf("burst = %+v", res)
				}
				reports, lines := rec.got(), rec.lines()
				if len(reports) != n || len(lines) != n {
					t.Fatalf("call %d returned with %d of its %d progress reports and %d of its %d log lines relayed: %+v %q",
						i, len(reports), n, len(lines), n, reports, lines)
				}
				if last := reports[n-1]; last.Progress != n {
					t.Fatalf("call %d: the last report relayed is %+v, want progress %d", i, last, n)
				}
			}
		})
	}
}

// logRecorder is a recorder that also takes log lines.
type logRecorder struct {
	recorder
	mu  sync.Mutex
	log []string
}

func (r *logRecorder) Log(_ context.Context, m tool.LogMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, string(m.Data))
}

func (r *logRecorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

// waitFor polls cond until it holds or the test's bound passes. The
// conditions it is used with change within microseconds of the step that
// causes them.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTime)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waiting reports whether a catchUp is parked on the arrivals' condition.
func (a *arrivals) waiting() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.moved != nil
}

func (a *arrivals) counts() (read, handled uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.read, a.handled
}

// doneCtx records whether Done was asked for: catchUp asks only when it
// has to wait.
type doneCtx struct {
	context.Context
	asked atomic.Bool
}

func (c *doneCtx) Done() <-chan struct{} {
	c.asked.Store(true)
	return c.Context.Done()
}

func TestArrivalsCatchUpWaitsUntilHandledCatchesUp(t *testing.T) {
	var a arrivals
	for range 3 {
		a.noteRead()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.catchUp(context.Background())
	}()
	for i := 1; i <= 3; i++ {
		// Parked on the condition: it has not returned with i-1 of 3 handled.
		waitFor(t, "catchUp waits", func() bool {
			select {
			case <-done:
				t.Fatalf("catchUp returned with %d of 3 reports handled", i-1)
			default:
			}
			return a.waiting()
		})
		handled := make(chan struct{})
		go func() {
			defer close(handled)
			a.noteHandled()
		}()
		<-handled
	}
	select {
	case <-done:
	case <-time.After(waitTime):
		t.Fatal("catchUp did not return once every report was handled")
	}
	if read, handled := a.counts(); read != 3 || handled != 3 {
		t.Errorf("read %d, handled %d; want 3 and 3", read, handled)
	}
}

func TestArrivalsCatchUpReturnsAtOnceWhenNothingIsOutstanding(t *testing.T) {
	var a arrivals
	a.noteRead()
	a.noteHandled()
	ctx := &doneCtx{Context: context.Background()}
	a.catchUp(ctx)
	if ctx.asked.Load() {
		t.Error("catchUp waited although every report read was handled")
	}
}

func TestArrivalsCatchUpReturnsWhenTheContextEnds(t *testing.T) {
	var a arrivals
	a.noteRead()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.catchUp(ctx)
	}()
	waitFor(t, "catchUp waits", a.waiting)
	cancel()
	select {
	case <-done:
	case <-time.After(waitTime):
		t.Fatal("catchUp did not return when its context ended")
	}
}

func TestArrivalsGraceWritesOffReportsNeverHandled(t *testing.T) {
	var a arrivals
	a.noteRead()
	a.noteRead()
	a.noteHandled()
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.catchUp(context.Background()) // one report is never handled
	}()
	select {
	case <-done:
	case <-time.After(waitTime):
		t.Fatal("catchUp did not give up on a report that is never handled")
	}
	if read, handled := a.counts(); handled != read {
		t.Fatalf("after the grace: read %d, handled %d; want the missing one written off", read, handled)
	}
	// The next call does not pay the grace again.
	ctx := &doneCtx{Context: context.Background()}
	a.catchUp(ctx)
	if ctx.asked.Load() {
		t.Error("catchUp waited again for a report already written off")
	}
}

// A report written off after the grace may still be handled later (its
// handler was only slow): that late handling must not count for a report
// read afterwards, or the barrier lets that one be overtaken.
func TestArrivalsLateHandlingOfAWrittenOffReportCountsForNothing(t *testing.T) {
	var a arrivals
	a.noteRead()
	a.catchUp(context.Background()) // its handler is slow: written off after the grace
	a.noteHandled()                 // ... and then it is handled
	a.noteRead()                    // the next call's report, not handled yet
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	probe := &doneCtx{Context: ctx}
	a.catchUp(probe)
	if !probe.asked.Load() {
		read, handled := a.counts()
		t.Errorf("catchUp did not wait for a report read but not handled (read %d, handled %d)", read, handled)
	}
}
