//go:build unix

package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Breakdowns of the profiles (-profile): each CPU sample goes to the first
// component below that names a function of its stack, the rest to "other",
// and the sums are divided by the calls (or listings) the profile covers.
// The order matters: a component placed first takes the samples of the
// code it calls, so the toolwire parts come before the go-sdk code above
// them, and the go-sdk client session before mcpclient, which calls it.

// A component is a part of a process's work, named by the functions whose
// samples it takes: those re matches, except those not matches (if set).
type component struct {
	name string
	re   *regexp.Regexp
	not  *regexp.Regexp
}

func comp(name, re string) component { return component{name: name, re: regexp.MustCompile(re)} }

// takes reports whether f is one of c's functions.
func (c component) takes(f string) bool {
	return c.re.MatchString(f) && (c.not == nil || !c.not.MatchString(f))
}

var (
	gcBackground = comp("GC in the background (mark workers, sweeper, scavenger)", `^runtime\.(gcBgMarkWorker|bgsweep|bgscavenge)$`)
	stackGrowth  = comp("goroutine stack growth (copystack), wherever it happens", `^runtime\.newstack$`)
	auditWrites  = comp("toolwire audit: 3 events a call (encode, hash, and the file's flock, seek and write, or the store's statement)", `toolwire/audit\.`)
	// storeWork is a replica's store on PostgreSQL but for its audit
	// appends (under auditWrites): the rate checks and session touches,
	// batched, the relay, the listener and the driver.
	storeWork  = comp("toolwire store on PostgreSQL: rate checks, session touches, relay, listener (pgx)", `toolwire/store\.|jackc/pgx|jackc/puddle`)
	validation = comp("toolwire schema validation", `santhosh-tekuri/jsonschema`)
	stdioConn  = comp("toolwire stdioconn (framing, decoding, writing, its reading goroutine)", `toolwire/internal/stdioconn\.`)
	// benchLoop is the bench's own code: its main and this package, whose
	// path is under toolwire/ but which is not a part of toolwire measured.
	benchLoop = comp("the bench's own loop", `^main\.|^github\.com/toolwire/toolwire/internal/bench\.`)
	// sessionTransport is the gateway's own Streamable HTTP layer at work
	// on a request: reading, decoding and checking it, and writing the
	// answer.
	sessionTransport = `toolwire/gateway\.(\(\*sessionTransport\)\.(servePOST|serveGET|check|hold|release|publish)|sessionConn\.Write|\(\*postAnswer\)\.|\(\*eventStream\)\.|writeEventTo|marshalResult|\(\*modernCalls\)\.take|\(\*served\)\.modernResult|decodeImplementation|\(\*stateful\)\.directCalls\.func1$)|toolwire/internal/stdioconn\.(DecodeBody|Unmarshal|UnmarshalDecoded|AppendMessage)$`
	sdkHTTP          = comp("go-sdk Streamable HTTP transport + net/http", `^net/http\.|go-sdk/mcp\.\(\*(StreamableHTTPHandler|streamableServerConn|streamableClientConn|stream)\)|go-sdk/mcp\.(writeEvent|scanEvents)`)
)

// components by the role of the profiled process.
var components = map[string][]component{
	// The caller's process: the bench. For toolwire rows it holds
	// mcpclient and the executor.
	"bench": {gcBackground, stackGrowth, auditWrites, validation, stdioConn, sdkHTTP,
		comp("go-sdk client session (calls, response and result decodes)", `modelcontextprotocol/go-sdk/`),
		comp("toolwire mcpclient", `toolwire/mcpclient\.`),
		comp("toolwire executor, the rest (lookup, parse, re-encode, ordering)", `toolwire/tool\.`),
		benchLoop},
	// toolwire serve: the gateway in front of a stdio upstream.
	"serve": {gcBackground, stackGrowth, auditWrites, storeWork, validation,
		// Before the upstream leg, whose codec it shares: the functions
		// of the session transport's own decoding and answering only
		// (the call it starts runs below functions it does not name).
		comp("toolwire session transport: decode, check, answer (gateway/sessionconn.go, modernconn.go)", sessionTransport),
		comp("upstream leg: toolwire stdioconn", `toolwire/internal/stdioconn\.`),
		comp("upstream leg: go-sdk client session (CallTool, response and result decodes)", `go-sdk/mcp\.\(\*ClientSession\)|jsonrpc2\.\(\*AsyncCall\)`),
		comp("upstream leg: toolwire mcpclient", `toolwire/mcpclient\.`),
		comp("toolwire executor, the rest (lookup, parse, re-encode, ordering)", `toolwire/tool\.`),
		comp("toolwire gateway handler and result conversion", `toolwire/gateway\.(\(\*Gateway\)\.handler|toMCP|rewriteContent)`),
		comp("net/http, and go-sdk's Streamable HTTP for what the transport leaves to it", sdkHTTP.re.String()),
		comp("go-sdk server session (dispatch, params and _meta decodes, response encoding; the ephemeral session of a 2026 call)", `modelcontextprotocol/go-sdk/`)},
	// A bare pass-through of the peer rows: mcp-go's or go-sdk's.
	"proxy": {gcBackground, stackGrowth,
		comp("upstream leg: the proxy's stdio client (mcp-go's client, or go-sdk's client session)", `mark3labs/mcp-go/client|go-sdk/mcp\.\(\*ClientSession\)|jsonrpc2\.\(\*AsyncCall\)|go-sdk/mcp\.\(\*ioConn\)`),
		comp("HTTP server: net/http and go-sdk's Streamable HTTP handler", sdkHTTP.re.String()),
		comp("the SDK's server (mcp-go's server and its Streamable HTTP, or go-sdk's server session)", `mark3labs/mcp-go/|modelcontextprotocol/go-sdk/`),
		comp("encoding/json", `^encoding/json\.`)},
	// The demo server, alone or behind serve, or behind a proxy.
	"demo": {gcBackground, stackGrowth, stdioConn, sdkHTTP,
		comp("the demo's echo tool", `toolwire/internal/demo\.`),
		comp("go-sdk server session (and, for stock-stdio, its stdio transport)", `modelcontextprotocol/go-sdk/`)},
	// A toolwire listing: connect, list, adapt and register 1000 tools.
	"list": {gcBackground,
		comp("schema compilation: checking each schema against its metaschema", `jsonschema/v6\.\(\*roots\)\.validate`),
		comp("schema compilation: the rest (parse, resolve, compile)", `santhosh-tekuri/jsonschema|toolwire/tool\.compile`),
		comp("go-sdk connect and tools/list (Streamable HTTP, decodes)", `modelcontextprotocol/go-sdk/|^net/http\.`),
		component{name: "toolwire adaptation and registration, the rest (names, tiers, pins, registry)", re: regexp.MustCompile(`toolwire/`), not: benchLoop.re},
		benchLoop},
}

// sdkDecodes matches go-sdk's JSON decoding, whose fresh 32 KiB buffer per
// decode is most of what the SDK allocates.
var sdkDecodes = regexp.MustCompile(`go-sdk/internal/json\.`)

// rawProfile is a profile as go tool pprof -raw prints it: each sample's
// value (the second value column: CPU nanoseconds, or bytes allocated) and
// the functions of its stack, leaf first.
type rawProfile struct {
	samples []rawSample
}

type rawSample struct {
	value int64
	funcs []string
}

var (
	rawSampleRE   = regexp.MustCompile(`^\s+(-?\d+)\s+(-?\d+)(?:\s+-?\d+)*:\s+([\d ]+?)\s*$`)
	rawLocationRE = regexp.MustCompile(`^\s+(\d+): 0x[0-9a-f]+ M=\d+ (\S+)`)
	rawInlinedRE  = regexp.MustCompile(`^\s+(\S+) \S+:\d+`)
)

// readRaw runs go tool pprof -raw with args and parses its output.
func readRaw(ctx context.Context, args ...string) (*rawProfile, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", append([]string{"tool", "pprof", "-raw"}, args...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool pprof -raw %s: %w", strings.Join(args, " "), err)
	}
	return parseRaw(out), nil
}

// parseRaw parses the output of go tool pprof -raw. Lines it does not
// know are skipped.
func parseRaw(out []byte) *rawProfile {
	var (
		stacks  [][]int
		values  []int64
		locs    = map[int][]string{}
		section string
		last    = -1
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Samples:"):
			section = "samples"
			continue
		case strings.HasPrefix(line, "Locations"):
			section = "locations"
			continue
		case strings.HasPrefix(line, "Mappings"):
			section = ""
			continue
		}
		switch section {
		case "samples":
			m := rawSampleRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			v, _ := strconv.ParseInt(m[2], 10, 64)
			var ids []int
			for f := range strings.FieldsSeq(m[3]) {
				id, _ := strconv.Atoi(f)
				ids = append(ids, id)
			}
			stacks, values = append(stacks, ids), append(values, v)
		case "locations":
			if m := rawLocationRE.FindStringSubmatch(line); m != nil {
				last, _ = strconv.Atoi(m[1])
				locs[last] = []string{m[2]}
			} else if m := rawInlinedRE.FindStringSubmatch(line); m != nil && last >= 0 {
				locs[last] = append(locs[last], m[1])
			}
		}
	}
	p := &rawProfile{}
	for i, ids := range stacks {
		s := rawSample{value: values[i]}
		for _, id := range ids {
			s.funcs = append(s.funcs, locs[id]...)
		}
		p.samples = append(p.samples, s)
	}
	return p
}

func (s rawSample) has(re *regexp.Regexp) bool {
	for _, f := range s.funcs {
		if re.MatchString(f) {
			return true
		}
	}
	return false
}

// share is one component's part of a profile.
type share struct {
	name  string
	value int64
}

// split assigns p's samples to comps in order; the last share is "other".
func (p *rawProfile) split(comps []component) (shares []share, total int64) {
	shares = make([]share, len(comps)+1)
	for i, c := range comps {
		shares[i].name = c.name
	}
	shares[len(comps)].name = "other: the Go scheduler (waking and parking goroutines, idle spinning), syscalls and runtime work outside the parts above"
	for _, s := range p.samples {
		total += s.value
		i := len(comps)
		for j, c := range comps {
			if slices.ContainsFunc(s.funcs, c.takes) {
				i = j
				break
			}
		}
		shares[i].value += s.value
	}
	return shares, total
}

// breakdowns writes, for each profile in ps, the time per operation of
// each component of each process, and what each process allocated per
// operation. Failures are reported in place: the index stays useful.
func (b *bench) breakdowns(ctx context.Context, sb *strings.Builder, ps []profiled) {
	dir := b.opts.ProfileDir
	w := func(format string, args ...any) { fmt.Fprintf(sb, format, args...) }
	w("\n## Where the time goes\n\n")
	w("CPU per operation by component, from each profile (see breakdown.go for the parts and their order); " +
		"allocation per operation from the allocation profiles. Figures of a profile with few samples are rough: " +
		"a sample is 10 ms of CPU.\n")
	for _, p := range ps {
		if p.err != nil || p.calls == 0 {
			continue
		}
		unit := "call"
		if p.phase == "list" {
			unit = "listing"
		}
		w("\n### %s, %s: %d %ss in %s\n\n", p.row, p.phase, p.calls, unit, p.wall.Round(time.Millisecond))
		table := [][]string{{"process", "part", "CPU per " + unit, "share"}}
		var allocs []string
		for _, f := range p.files {
			base := strings.TrimSuffix(f, ".pprof")
			role := base[strings.LastIndex(base, "-")+1:]
			comps, ok := components[componentSet(role, p.phase)]
			if !ok {
				continue
			}
			cpu, err := readRaw(ctx, filepath.Join(dir, f))
			if err != nil {
				table = append(table, []string{role, "(failed: " + oneLine(err) + ")", "", ""})
				continue
			}
			shares, total := cpu.split(comps)
			table = append(table, []string{"**" + role + "**", "**all**", "**" + fmtPerOp(total, p.calls) + "**", "100 %"})
			for _, s := range shares {
				if s.value == 0 {
					continue
				}
				table = append(table, []string{"", s.name, fmtPerOp(s.value, p.calls), fmt.Sprintf("%.0f %%", 100*float64(s.value)/float64(total))})
			}
			mem, err := readRaw(ctx, "-sample_index=alloc_space",
				"-base", filepath.Join(dir, base+".allocs-start.pb.gz"), filepath.Join(dir, base+".allocs.pb.gz"))
			if err != nil {
				allocs = append(allocs, fmt.Sprintf("%s: failed (%s)", role, oneLine(err)))
				continue
			}
			var all, sdk int64
			for _, s := range mem.samples {
				all += s.value
				if s.has(sdkDecodes) {
					sdk += s.value
				}
			}
			if all == 0 {
				// The allocation profile counts up to the last completed
				// collection: none completed while this one ran.
				allocs = append(allocs, role+" not known (no garbage collection completed while it was profiled)")
				continue
			}
			per := func(v int64) string { return fmtBytes(float64(v) / float64(p.calls)) }
			allocs = append(allocs, fmt.Sprintf("%s %s, %s of it in go-sdk's JSON decodes", role, per(all), per(sdk)))
		}
		writeTable(sb, table)
		if len(allocs) > 0 {
			w("\nAllocated per %s (sampled): %s.\n", unit, strings.Join(allocs, "; "))
		}
	}
}

// componentSet names the components that break down the profile of a
// process of role in phase: a listing's, the demo's behind a gateway or
// proxy (role upstream), a fleet's replicas (serve1, serve2, … as serve),
// or the role's own.
func componentSet(role, phase string) string {
	switch {
	case phase == "list":
		return "list"
	case role == "upstream":
		return "demo"
	}
	if set := strings.TrimRight(role, "0123456789"); set != role && set != "" {
		if _, ok := components[set]; ok {
			return set
		}
	}
	return role
}

// fmtPerOp formats ns nanoseconds of CPU divided by ops.
func fmtPerOp(ns int64, ops int) string {
	return fmtDur(time.Duration(ns/int64(ops)), true)
}
