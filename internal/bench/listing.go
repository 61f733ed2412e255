//go:build unix

package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/toolwire/toolwire/internal/bench/childhttp"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/config"
	"github.com/toolwire/toolwire/internal/benchkit"
	"github.com/toolwire/toolwire/mcpclient"
	"github.com/toolwire/toolwire/tool"
)

// A large listing: a child MCP server ("child tools-http") with -list-tools
// generated tools, different for every salt, so that a connect can be made
// to schemas this process has never compiled (cold) or to the ones it has
// just seen (warm).

// Property templates; every generated schema takes 3 to 6 of them.
var listingProps = []string{
	`"limit":{"type":"integer","minimum":1,"maximum":100,"default":20,"description":"Maximum number of results to return."}`,
	`"since":{"type":"string","format":"date-time","description":"Only records changed at or after this time (RFC 3339)."}`,
	`"labels":{"type":"array","items":{"type":"string","minLength":1},"maxItems":20,"uniqueItems":true,"description":"Labels that every result carries."}`,
	`"project":{"type":"string","pattern":"^[A-Z][A-Z0-9]{1,9}$","description":"Project key, such as OPS or WEB2."}`,
	`"archived":{"type":"boolean","default":false,"description":"Whether archived records are included."}`,
	`"score":{"type":"number","minimum":0,"maximum":1,"description":"Lowest relevance score, from 0 to 1."}`,
}

var (
	listingVerbs = []string{"Search", "List", "Update", "Archive", "Export", "Count", "Tag"}
	listingNouns = []string{"issues", "pull requests", "deployments", "invoices", "calendar events", "support tickets", "wiki pages"}
)

const listingFilter = `{"type":"object","properties":{"field":{"type":"string","description":"Field to filter on."},` +
	`"op":{"type":"string","enum":["eq","ne","lt","gt","contains"]},"value":{"type":["string","number","boolean"]}},` +
	`"required":["field","value"],"additionalProperties":false}`

// listingTool returns tool i of the listing for salt: a name, a title, a
// description of about 130 characters and an input schema of its own (a
// required query, an enum, a filter object, declared in $defs and used by
// $ref in every tenth tool, then 0 to 3 more properties), with a "$comment"
// holding the salt. About 1 KB on the wire.
func listingTool(i int, salt string) *mcp.Tool {
	verb, noun := listingVerbs[i%len(listingVerbs)], listingNouns[(i/len(listingVerbs))%len(listingNouns)]
	props := []string{
		fmt.Sprintf(`"query":{"type":"string","minLength":1,"maxLength":256,"description":"Free-text query matched against the %s (set %04d)."}`, noun, i),
		`"order":{"type":"string","enum":["asc","desc","relevance"],"default":"desc","description":"Sort order of the results."}`,
	}
	defs := ""
	if i%10 == 0 {
		defs = `,"$defs":{"filter":` + listingFilter + `}`
		props = append(props, `"filter":{"type":"array","items":{"$ref":"#/$defs/filter"},"maxItems":10,"description":"Filters that must all hold."}`)
	} else {
		props = append(props, `"filter":`+listingFilter)
	}
	for k := range i % 4 {
		props = append(props, listingProps[(i+k)%len(listingProps)])
	}
	required := `["query"]`
	if i%2 == 1 {
		required = `["query","order"]`
	}
	schema := fmt.Sprintf(`{"$comment":%q,"type":"object","properties":{%s},"required":%s,"additionalProperties":false%s}`,
		salt, strings.Join(props, ","), required, defs)
	return &mcp.Tool{
		Name:        fmt.Sprintf("op_%04d", i),
		Title:       fmt.Sprintf("%s %s (%04d)", verb, noun, i),
		Description: fmt.Sprintf("%s the %s of the workspace that match a query and filters. Results are paginated, newest first (variant %04d).", verb, noun, i),
		InputSchema: json.RawMessage(schema),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: verb == "Search" || verb == "List" || verb == "Count"},
	}
}

// toolsServer serves the generated listings: MCP at /mcp?salt=S, the raw
// tools/list response at /raw?salt=S, and /prepare?salt=S, which builds a
// salt's server ahead of a measured connect. It keeps a few salts' servers.
type toolsServer struct {
	n int

	mu     sync.Mutex
	bySalt map[string]*saltServer
	order  []string // oldest first
}

type saltServer struct {
	srv *mcp.Server
	raw []byte // the JSON-RPC response to tools/list (one page), for the floor
}

// keptSalts bounds the servers a toolsServer keeps.
const keptSalts = 4

func (ts *toolsServer) get(salt string) (*saltServer, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if s, ok := ts.bySalt[salt]; ok {
		return s, nil
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-tools", Version: "0"}, nil)
	listed := make([]*mcp.Tool, ts.n)
	ok := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	for i := range ts.n {
		listed[i] = listingTool(i, salt)
		srv.AddTool(listed[i], ok)
	}
	raw, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"tools": listed}})
	if err != nil {
		return nil, err
	}
	s := &saltServer{srv: srv, raw: raw}
	ts.bySalt[salt] = s
	ts.order = append(ts.order, salt)
	if len(ts.order) > keptSalts {
		// The warm listing ("warm") stays: it is used every iteration.
		for i, old := range ts.order {
			if old != "warm" {
				delete(ts.bySalt, old)
				ts.order = slices.Delete(ts.order, i, i+1)
				break
			}
		}
	}
	return s, nil
}

func serveTools(args []string) error {
	n := 1000
	if err := childFlags("tools-http", args, func(fs *flag.FlagSet) {
		fs.IntVar(&n, "tools", n, "tools per listing")
	}); err != nil {
		return err
	}
	ts := &toolsServer{n: n, bySalt: map[string]*saltServer{}}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		s, err := ts.get(r.URL.Query().Get("salt"))
		if err != nil {
			return nil
		}
		return s.srv
	}, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpHandler)
	mux.HandleFunc("/prepare", func(w http.ResponseWriter, r *http.Request) {
		if _, err := ts.get(r.URL.Query().Get("salt")); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /raw", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		s, err := ts.get(r.URL.Query().Get("salt"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.raw)
	})
	return childhttp.Serve(mux)
}

// listTarget is an open listing row. Each iteration, prepare runs first,
// untimed, then op is measured. Both get the iteration number.
type listTarget struct {
	prepare func(ctx context.Context, iter int) error
	op      func(ctx context.Context, iter int) error
}

// listRun is a listing row's target and what was measured of it.
type listRun struct {
	row *row
	t   *listTarget
	err error

	wall           []time.Duration
	cpu            time.Duration
	cpuKnown       bool
	bytes, mallocs uint64
	ops            int
}

// toolsChild starts the listing server once, on first use.
func (b *bench) toolsChild(ctx context.Context) (string, []int, error) {
	if b.tools.url != "" || b.tools.err != nil {
		return b.tools.url, b.tools.pids, b.tools.err
	}
	url, p, err := startHTTPChild(ctx, b, "tools-http", "tools-http", "-tools", strconv.Itoa(b.opts.ListTools))
	if err != nil {
		b.tools.err = err
		return "", nil, err
	}
	b.tools.url, b.tools.pids = url, []int{p.pid()}
	return url, b.tools.pids, nil
}

// prepareSalt asks the listing server to build salt's listing now.
func (b *bench) prepareSalt(ctx context.Context, base, salt string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/mcp")+"/prepare?salt="+url.QueryEscape(salt), nil)
	if err != nil {
		return err
	}
	resp, err := b.httpClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("prepare %q: %s", salt, resp.Status)
	}
	return nil
}

func saltURL(base, salt string) string { return base + "?salt=" + url.QueryEscape(salt) }

func openListFloor(ctx context.Context, b *bench) (*listTarget, error) {
	base, _, err := b.toolsChild(ctx)
	if err != nil {
		return nil, err
	}
	raw := strings.TrimSuffix(base, "/mcp") + "/raw?salt=warm"
	want := b.opts.ListTools
	return &listTarget{
		prepare: func(ctx context.Context, _ int) error { return b.prepareSalt(ctx, base, "warm") },
		op: func(ctx context.Context, _ int) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, raw,
				strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := b.httpClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			// The least a client keeps of a listing: names, descriptions
			// and the schemas as raw bytes.
			var list struct {
				Result struct {
					Tools []struct {
						Name        string          `json:"name"`
						Title       string          `json:"title"`
						Description string          `json:"description"`
						InputSchema json.RawMessage `json:"inputSchema"`
						Annotations json.RawMessage `json:"annotations"`
					} `json:"tools"`
				} `json:"result"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
				return fmt.Errorf("decoding the listing: %w", err)
			}
			if n := len(list.Result.Tools); n != want {
				return fmt.Errorf("listed %d tools, want %d", n, want)
			}
			return nil
		},
	}, nil
}

func openListSDK(ctx context.Context, b *bench) (*listTarget, error) {
	base, _, err := b.toolsChild(ctx)
	if err != nil {
		return nil, err
	}
	want := b.opts.ListTools
	return &listTarget{
		prepare: func(ctx context.Context, _ int) error { return b.prepareSalt(ctx, base, "warm") },
		op: func(ctx context.Context, _ int) error {
			cs, err := b.sdkHTTPSession(ctx, saltURL(base, "warm"))
			if err != nil {
				return err
			}
			n := 0
			for _, err := range cs.Tools(ctx, nil) {
				if err != nil {
					_ = cs.Close()
					return err
				}
				n++
			}
			if n != want {
				_ = cs.Close()
				return fmt.Errorf("listed %d tools, want %d", n, want)
			}
			return cs.Close()
		},
	}, nil
}

// openListToolwire returns the opener of a toolwire listing row: a whole
// mcpclient.Connect into a fresh registry and Close. Cold connects to a
// listing whose schemas this process has never seen; warm connects to the
// "warm" listing right after an unmeasured connect to it, so that its
// schemas are in the compiled-schema cache, as on a reconnect.
func openListToolwire(warmCache bool) func(context.Context, *bench) (*listTarget, error) {
	return func(ctx context.Context, b *bench) (*listTarget, error) {
		base, _, err := b.toolsChild(ctx)
		if err != nil {
			return nil, err
		}
		name := "list-tw-cold"
		if warmCache {
			name = "list-tw-warm"
		}
		alog, secrets, err := b.auditLog(name)
		if err != nil {
			return nil, err
		}
		salt := func(iter int) string {
			if warmCache {
				return "warm"
			}
			return "cold-" + strconv.Itoa(iter)
		}
		want := b.opts.ListTools
		connect := func(ctx context.Context, iter int) error {
			reg := tool.NewRegistry(&tool.RegistryOptions{Confirmer: denyAll})
			cfg := config.Server{Name: "big", Transport: "http", URL: saltURL(base, salt(iter)), DefaultTier: "read"}
			s, err := mcpclient.Connect(ctx, cfg, reg, &mcpclient.Options{
				Logger: b.quiet, Secrets: secrets, Audit: alog, HTTPClient: b.httpClient,
			})
			if err != nil {
				return err
			}
			if n := len(s.Tools()); n != want {
				_ = s.Close()
				return fmt.Errorf("registered %d tools, want %d (skipped: %v)", n, want, s.Skipped())
			}
			return s.Close()
		}
		return &listTarget{
			prepare: func(ctx context.Context, iter int) error {
				if err := b.prepareSalt(ctx, base, salt(iter)); err != nil {
					return err
				}
				if warmCache {
					return connect(ctx, iter)
				}
				return nil
			},
			op: connect,
		}, nil
	}
}

// listings opens the listing rows and runs -list-iters iterations (the
// first unmeasured), each row once per iteration, the order reversed every
// iteration, within -list-time. The heap is collected before each measured
// operation, so that one row's garbage is not collected on another's time.
func (b *bench) listings(ctx context.Context, sel []*row) []*listRun {
	var runs []*listRun
	for _, rw := range sel {
		if rw.list == nil {
			continue
		}
		r := &listRun{row: rw, cpuKnown: true}
		runs = append(runs, r)
		if ctx.Err() != nil {
			r.err = context.Cause(ctx)
			continue
		}
		if r.t, r.err = rw.list(ctx, b); r.err != nil {
			b.logf("%s: %v", rw.name, r.err)
		}
	}
	lctx, cancel := context.WithTimeout(ctx, b.opts.ListTime)
	defer cancel()
	for iter := range b.opts.ListIters {
		order := slices.DeleteFunc(slices.Clone(runs), func(r *listRun) bool { return r.err != nil })
		if len(order) == 0 || lctx.Err() != nil {
			break
		}
		if iter%2 == 1 {
			slices.Reverse(order)
		}
		for _, r := range order {
			if err := b.listOnce(lctx, r, iter, iter > 0); err != nil && lctx.Err() == nil {
				r.err = fmt.Errorf("iteration %d: %w", iter, err)
				b.logf("%s: %v", r.row.name, r.err)
			}
		}
		b.logf("listing: iteration %d/%d done", iter+1, b.opts.ListIters)
	}
	return runs
}

func (b *bench) listOnce(ctx context.Context, r *listRun, iter int, measured bool) error {
	octx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := r.t.prepare(octx, iter); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	_, pids, _ := b.toolsChild(octx)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	bytes0, mallocs0 := ms.TotalAlloc, ms.Mallocs
	cpu0, cpuErr := cpuOf(pids)
	t0 := time.Now()
	err := r.t.op(octx, iter)
	wall := time.Since(t0)
	cpu1, cpuErr2 := cpuOf(pids)
	runtime.ReadMemStats(&ms)
	if err != nil || !measured {
		return err
	}
	r.wall = append(r.wall, wall)
	r.ops++
	r.bytes += ms.TotalAlloc - bytes0
	r.mallocs += ms.Mallocs - mallocs0
	if err := errors.Join(cpuErr, cpuErr2); err != nil {
		r.cpuKnown = false
	}
	r.cpu += cpu1 - cpu0
	return nil
}

// median returns the median of ds (the lower one of an even count).
func median(ds []time.Duration) time.Duration {
	return benchkit.Percentile(slices.Clone(ds), 0.5)
}
