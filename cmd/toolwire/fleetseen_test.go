package main

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/oauthtest"
	"github.com/toolwire/toolwire/oauth"
	"github.com/toolwire/toolwire/workspace"
)

// direct sends every request to the replica pick names for it (by its
// body), with a bearer token.
type direct struct {
	c     *cluster
	token string
	pick  func(body string) int
	// streams, when set, is told the replica of each event stream (GET)
	// that a replica answered with 200.
	streams chan int
}

func (d *direct) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	i := d.pick(string(body))
	target := d.c.replicas[i].addr
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(strings.NewReader(string(body)))
	req.URL.Host, req.Host = target, target
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK && d.streams != nil {
		select {
		case d.streams <- i:
		default:
		}
	}
	return resp, err
}

// dialDirect connects a go-sdk client to the replicas as pick sends its
// requests.
func dialDirect(t *testing.T, c *cluster, token, rev string, pick func(string) int, opts *mcp.ClientOptions) *mcp.ClientSession {
	return dialDirectStreams(t, c, token, rev, pick, nil, opts)
}

// dialDirectStreams is dialDirect telling streams of each event stream
// opened.
func dialDirectStreams(t *testing.T, c *cluster, token, rev string, pick func(string) int, streams chan int, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	var so *mcp.ClientSessionOptions
	if rev != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: rev}
	}
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fleet-seen", Version: "1"}, opts).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + c.replicas[0].addr + "/mcp", HTTPClient: &http.Client{Transport: &direct{c: c, token: token, pick: pick, streams: streams}}}, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// retries sends a tools/call that answers a parked call (it carries
// requestState) to replica 1, anything else to replica 0.
func retries(body string) int {
	if strings.Contains(body, `"requestState"`) {
		return 1
	}
	return 0
}

// to sends every request to replica i.
func to(i int) func(string) int { return func(string) int { return i } }

func approveIt(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
}

// Issue 17: what is done on one replica is seen on the others, with real
// replica processes on one PostgreSQL store:
//   - a 2026-07-28 client's approval: its call starts on r0 and asks; its
//     retry with the answer goes to r1, which passes it to r0;
//   - a 2025 client's approval: a session opened on r0 makes its call on
//     r1, which asks it there (elicitation/create on the call's stream);
//   - a pin quarantined by "toolwire pins forget" and approved again by
//     "toolwire pins approve", run once against the store: every replica
//     drops the tool and takes it back, and tells its clients;
//   - a token refresh: the access token expires; a call through r0
//     refreshes it, and r1 and r2 use the new token without refreshing;
//   - a 2025 client's event stream on r2, which is killed: the client
//     opens it again, on r0, which serves the session from its record, and
//     the next change of the tools reaches the client on it.
func TestFleetSeenOnEveryReplica(t *testing.T) {
	t.Parallel()
	op := oauthtest.NewOP(t, &oauthtest.OPOptions{AccessTokenLifetime: tokenLifetime})
	rs := oauthtest.NewResourceServer(t, op, nil)
	const pass = "the fleet's passphrase, the same on every replica"
	c := startCluster(t, fleetOptions{
		replicas: 3, callers: 2, security: "  pins: enforce\n",
		extra: "  remote:\n    url: " + quoteYAML(rs.URL) + "\n",
		before: func(c *cluster) {
			// One login for the fleet, before the replicas start.
			o := runIn(t, map[string]string{storeEnv: c.dbURL, oauth.PassphraseEnv: pass}, oauthtest.NewBrowser().Open,
				"--config", c.config, "login", "remote")
			o.expect(t, exitOK)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), fleetWait)
	defer cancel()
	writeNote := func(cs *mcp.ClientSession, title string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo__write_note", Arguments: map[string]any{"title": title, "body": "seen"}})
		if err != nil || res.IsError {
			t.Fatalf("write_note %q: %v %+v", title, err, res)
		}
	}

	// Approvals.
	asked26 := 0
	cs26 := dialDirect(t, c, c.tokens[0], "", retries, &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked26++
		return approveIt(ctx, req)
	}})
	writeNote(cs26, "mrtr")
	if asked26 != 1 {
		t.Errorf("the 2026-07-28 client was asked %d times, want once", asked26)
	}
	asked25 := 0
	cs25 := dialDirect(t, c, c.tokens[1], "2025-11-25", func(body string) int {
		if strings.Contains(body, `"tools/call"`) {
			return 1
		}
		return 0
	}, &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked25++
		return approveIt(ctx, req)
	}})
	writeNote(cs25, "session")
	if asked25 != 1 {
		t.Errorf("the 2025 client was asked %d times on the other replica, want once", asked25)
	}

	// Pins: every replica has a session open on it, told of list changes.
	type watcher struct {
		cs      *mcp.ClientSession
		changed chan struct{}
	}
	var watchers []watcher
	for i := range c.replicas {
		changed := make(chan struct{}, 1)
		cs := dialDirect(t, c, c.tokens[0], "2025-11-25", to(i), &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}})
		watchers = append(watchers, watcher{cs, changed})
	}
	awaitEcho := func(want bool) {
		t.Helper()
		for i, w := range watchers {
			for {
				res, err := w.cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if slices.ContainsFunc(res.Tools, func(tl *mcp.Tool) bool { return tl.Name == "demo__echo" }) == want {
					break
				}
				select {
				case <-w.changed:
				case <-ctx.Done():
					t.Fatalf("replica r%d: demo__echo listed %v, want %v", i, !want, want)
				}
			}
		}
	}
	awaitEcho(true)
	runBinary(t, c.bin, c.env, "--config", c.config, "pins", "forget", "demo/echo").expect(t, exitOK)
	awaitEcho(false)
	runBinary(t, c.bin, c.env, "--config", c.config, "pins", "approve", "demo/echo").expect(t, exitOK)
	awaitEcho(true)

	// The token: expired everywhere at once; refreshed once, by r0.
	file, err := config.Load(c.config)
	if err != nil {
		t.Fatal(err)
	}
	st, err := workspace.OpenStore(ctx, file, &workspace.Options{StoreURL: c.dbURL, LookupEnv: lookupIn(map[string]string{oauth.PassphraseEnv: pass})})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	whoami := func(i int) {
		t.Helper()
		cs := dialDirect(t, c, c.tokens[0], "", to(i), nil)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "remote__whoami"})
		if err != nil || res.IsError {
			t.Fatalf("whoami on r%d: %v %+v", i, err, res)
		}
	}
	for i := range c.replicas {
		whoami(i)
	}
	entry, err := st.Tokens().Get("remote")
	if err != nil || entry == nil || entry.Token == nil {
		t.Fatalf("the fleet's token: %v, %v", entry, err)
	}
	time.Sleep(time.Until(entry.Token.Expiry) + 200*time.Millisecond) // the token's lifetime passes
	before := op.Refreshes()
	whoami(0)
	if got := op.Refreshes(); got != before+1 {
		t.Fatalf("refreshes after r0's call with an expired token: %d, want %d", got, before+1)
	}
	whoami(1)
	whoami(2)
	if got := op.Refreshes(); got != before+1 {
		t.Errorf("r1 and r2 refreshed again (%d refreshes, want %d): they did not use r0's token", got, before+1)
	}

	// The event stream of a lost replica, opened again on another.
	var target atomic.Int32
	target.Store(2)
	changed := make(chan struct{}, 1)
	streams := make(chan int, 4)
	streamed := dialDirectStreams(t, c, c.tokens[1], "2025-11-25", func(string) int { return int(target.Load()) }, streams, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	awaitStream := func(want int) {
		t.Helper()
		for {
			select {
			case i := <-streams:
				if i == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("the client's event stream was not opened on r%d", want)
			}
		}
	}
	awaitStream(2)
	c.kill(2)
	target.Store(0) // where the client's requests, and its stream, go now
	// Notifications sent before the client opens its stream again are
	// lost (docs/fleet.md): the change comes once it has.
	awaitStream(0)
	runBinary(t, c.bin, c.env, "--config", c.config, "pins", "forget", "demo/echo").expect(t, exitOK)
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the tools' change did not reach the client whose event stream was on the killed replica")
	}
	if err := streamed.Ping(ctx, nil); err != nil {
		t.Errorf("the session after its stream moved: %v", err)
	}
}
