//go:build unix

package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// A row is one configuration the benchmark measures: exactly one of call,
// list and mem is set, which says in which phase it runs and how.
//
// To measure another client stack or connection, add a row to rows: a name,
// its floor, and an opener (usually one of the open* functions below with
// another transport or option). Everything else (interleaving, ratios,
// targets) follows from the fields.
type row struct {
	name string
	// what is the row's one-line description in the report's legend.
	what string
	// floor names the row whose figures divide this row's in the ratio
	// columns; "" for a floor itself.
	floor string
	// stack and transport classify the row for issue 8's targets: stack
	// is "floor", "sdk" (bare go-sdk), "tw" (toolwire's client stack),
	// "gw" (through the gateway) or "peer" (through another gateway);
	// transport is "stdio" or "http".
	stack, transport string
	// bare names the bare go-sdk row that a "tw" row's throughput is
	// compared with (go-sdk's stock transports on both sides), or the
	// direct call a "gw" row's added latency is measured against (the
	// same client and the same upstream process, without the gateway).
	bare string
	// peer names the row of the fastest peer's stand-in that a "gw" row is
	// held against (issue 26), for the same protocol revision.
	peer string

	call func(ctx context.Context, b *bench) (*target, error)
	list func(ctx context.Context, b *bench) (*listTarget, error)
	mem  func(ctx context.Context, b *bench) (*memResult, error)
}

// A target is an open call row: one session (or connection) to its server,
// warmed up.
type target struct {
	// call makes one echo call and checks its answer. It is safe for
	// concurrent use: the throughput windows share one target among
	// their callers.
	call func(ctx context.Context) error
	// pids are the server-side processes whose CPU the row's CPU per call
	// includes, besides this process; roles name them in profile files
	// ("demo", "serve", "upstream"), in the same order.
	pids  []int
	roles []string
	// close ends the session; the processes themselves are ended by the
	// bench's procSet.
	close func()
}

// rows in report order. Floors come first within each group.
var rows = []*row{
	{name: "floor-pipe", stack: "floor", transport: "stdio", call: openFloorPipe,
		what: "newline JSON-RPC echo (tools/call-shaped, encoding/json both ways) over a pipe to a child process"},
	{name: "floor-http", stack: "floor", transport: "http", call: openFloorHTTP,
		what: "the same JSON-RPC echo as one HTTP/1.1 keep-alive POST with a JSON response, child process"},
	{name: "floor-relay", stack: "floor", transport: "http", call: openFloorRelay,
		what: "HTTP in, pipe out: a child answering floor-http's POSTs by forwarding each call to a floor-pipe grandchild"},
	{name: "stock-stdio", floor: "floor-pipe", stack: "sdk", transport: "stdio", call: openSDKStdio("-sdk-stdio"),
		what: "bare go-sdk on both sides: ClientSession.CallTool over mcp.CommandTransport to the demo server as a stdio child serving with mcp.StdioTransport (demoserver -sdk-stdio)"},
	{name: "sdk-stdio", floor: "floor-pipe", stack: "sdk", transport: "stdio", call: openSDKStdio(),
		what: "the same go-sdk client (mcp.CommandTransport) to the demo server as shipped, which serves stdio over toolwire's connection (internal/stdioconn)"},
	{name: "tw-stdio", floor: "floor-pipe", stack: "tw", transport: "stdio", bare: "stock-stdio", call: openToolwireStdio(nil),
		what: "mcpclient.Connect (internal/stdioconn) + tool.Executor.Call, audit to a JSON Lines file, demo child as shipped"},
	{name: "sdk-http", floor: "floor-http", stack: "sdk", transport: "http", call: openSDKHTTP,
		what: "bare go-sdk client over Streamable HTTP to the demo server (demoserver -http, child)"},
	{name: "tw-http", floor: "floor-http", stack: "tw", transport: "http", bare: "sdk-http", call: openToolwireHTTP,
		what: "mcpclient.Connect + tool.Executor.Call over Streamable HTTP, file audit, same demo child"},
	{name: "peer-sdk", floor: "floor-relay", stack: "peer", transport: "http", call: openProxy("sdk", protocolVersion),
		what: "bare go-sdk client over Streamable HTTP (2025-11-25 session) to a bare go-sdk v1.8.0 pass-through (benchproxy; mcp.CommandTransport to the demo, mcp.StreamableHTTPHandler with default options: SSE answers)"},
	{name: "peer-mcpgo", floor: "floor-relay", stack: "peer", transport: "http", call: openProxy("mcpgo", protocolVersion),
		what: "the fastest peer's stand-in: bare go-sdk client over Streamable HTTP (2025-11-25 session) to a bare mark3labs/mcp-go v1.2.1 pass-through (benchproxy, a binary of its own; mcp-go's stdio client to the demo, its Streamable HTTP server answering POSTs with JSON), no policy, validation or audit"},
	{name: "peer-mcpgo-2026", floor: "floor-relay", stack: "peer", transport: "http", call: openProxy("mcpgo", modernVersion),
		what: "the same peer called with 2026-07-28 requests (no session)"},
	{name: "gw-serve", floor: "floor-relay", stack: "gw", transport: "http", bare: "sdk-stdio", peer: "peer-mcpgo", call: openGatewayServe("gw-serve", limitsOff, protocolVersion, false),
		what: "bare go-sdk client over Streamable HTTP (2025-11-25 session) to `toolwire serve --http` (built binary, child) in front of a stdio demo, audit to a file, gateway.limits all off (0)"},
	{name: "gw-serve-2026", floor: "floor-relay", stack: "gw", transport: "http", bare: "sdk-stdio", peer: "peer-mcpgo-2026", call: openGatewayServe("gw-serve-2026", limitsOff, modernVersion, false),
		what: "the same gateway called with 2026-07-28 requests (no session), audit to a file"},
	{name: "gw-limits", floor: "floor-relay", stack: "gw", transport: "http", bare: "gw-serve", call: openGatewayServe("gw-limits", limitsOn, protocolVersion, false),
		what: "gw-serve with every gateway.limits count and rate on, each set too high to refuse the bench's load: what checking the limits costs"},
	{name: "gw-telemetry", floor: "floor-relay", stack: "gw", transport: "http", bare: "gw-serve", call: openGatewayServe("gw-telemetry", limitsOff, protocolVersion, true),
		what: "gw-serve with telemetry on: --metrics-listen (Prometheus) and OTLP/HTTP traces and metrics to a sink child that drops them: what telemetry adds"},

	{name: "list-floor", stack: "floor", list: openListFloor,
		what: "the 1000-tool tools/list response over HTTP/1.1, decoded by encoding/json into names and raw schemas"},
	{name: "list-sdk", floor: "list-floor", stack: "sdk", list: openListSDK,
		what: "bare go-sdk: connect (initialize) + tools/list of 1000 tools (all pages) + close, Streamable HTTP"},
	{name: "list-tw-cold", floor: "list-floor", stack: "tw", bare: "list-sdk", list: openListToolwire(false),
		what: "mcpclient.Connect (initialize, list, adapt: names, tiers, schema compilation; register) + Close, schemas never seen"},
	{name: "list-tw-warm", floor: "list-floor", stack: "tw", bare: "list-sdk", list: openListToolwire(true),
		what: "the same right after a connect to the same listing: compiled schemas cached, as on a reconnect"},

	{name: "mem-gateway", stack: "gw", mem: memGateway,
		what: "gateway.Handler in this process on 127.0.0.1 (as serve assembles it); sessions opened by a child process"},
	{name: "mem-serve", stack: "gw", mem: memServe,
		what: "`toolwire serve --http` (built binary, gateway.limits off, audit to a file); its resident set size, no forced GC"},
	{name: "mem-sdk-proxy", stack: "peer", mem: memProxy("sdk"),
		what: "the bare go-sdk pass-through of `peer-sdk`; measured as `mem-serve`"},
	{name: "mem-mcpgo-proxy", stack: "peer", mem: memProxy("mcpgo"),
		what: "the bare mcp-go pass-through of `peer-mcpgo`; measured as `mem-serve`"},
}

func rowByName(name string) *row {
	for _, r := range rows {
		if r.name == name {
			return r
		}
	}
	return nil
}

func rowNames() []string {
	var names []string
	for _, r := range rows {
		names = append(names, r.name)
	}
	return names
}

// selectRows resolves -rows: names and the groups all, calls, list and
// mem. It adds the rows that the selected ones are compared with (floors,
// bare and direct rows), and returns them in report order.
func selectRows(spec string) ([]*row, error) {
	want := map[string]bool{}
	for f := range strings.SplitSeq(spec, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "":
		case "all":
			for _, r := range rows {
				want[r.name] = true
			}
		case "calls", "list", "mem":
			for _, r := range rows {
				if (f == "calls" && r.call != nil) || (f == "list" && r.list != nil) || (f == "mem" && r.mem != nil) {
					want[r.name] = true
				}
			}
		default:
			if rowByName(f) == nil {
				return nil, fmt.Errorf("unknown row %q (rows: %s; groups: all, calls, list, mem)", f, strings.Join(rowNames(), ", "))
			}
			want[f] = true
		}
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("no rows selected")
	}
	for changed := true; changed; {
		changed = false
		for name := range want {
			r := rowByName(name)
			for _, dep := range []string{r.floor, r.bare, r.peer} {
				if dep != "" && !want[dep] {
					want[dep], changed = true, true
				}
			}
		}
	}
	return slices.DeleteFunc(slices.Clone(rows), func(r *row) bool { return !want[r.name] }), nil
}
