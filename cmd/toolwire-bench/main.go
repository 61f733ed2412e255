//go:build unix

// Command toolwire-bench measures toolwire's hot paths against this
// machine's floors, in one run, and prints one markdown report: the machine
// on top, then a table of every row with its ratios to the same-run floor,
// the gateway's memory per open session, issue 8's targets, the gateways
// side by side with issue 26's targets, and what makes up the toolwire
// binary.
//
// Usage, from anywhere in the module:
//
//	go run ./cmd/toolwire-bench                     # everything, a few minutes
//	go run ./cmd/toolwire-bench -quick              # every row briefly (CI runs this), under a minute
//	go run ./cmd/toolwire-bench -rows tw-stdio,gw-serve -o /tmp/bench.md
//	GOGC=200 go run ./cmd/toolwire-bench            # GC settings apply to every process
//	go run ./cmd/toolwire-bench -rows calls -profile /tmp/prof   # and profiles
//
// Rows (-rows takes names and the groups calls, list, mem and all):
//
//	floor-pipe    newline JSON-RPC echo over a pipe to a child process
//	floor-http    HTTP/1.1 keep-alive JSON-RPC echo, child process
//	floor-relay   HTTP in, pipe out: floor-http forwarding to a floor-pipe grandchild
//	stock-stdio   bare go-sdk on both sides: mcp.CommandTransport to the demo
//	              server serving mcp.StdioTransport (demoserver -sdk-stdio)
//	sdk-stdio     the same client to the demo server as shipped (its stdio is
//	              toolwire's internal/stdioconn)
//	sdk-http      bare go-sdk client, demo server over Streamable HTTP (child)
//	tw-stdio      mcpclient.Connect + tool.Executor, file audit, stdio demo child
//	tw-http       the same over Streamable HTTP
//	peer-sdk      bare go-sdk client -> a bare go-sdk pass-through (child) -> stdio demo
//	peer-mcpgo    the same through a bare mark3labs/mcp-go pass-through answering
//	              POSTs with JSON: the fastest peer's stand-in (issue 26);
//	              peer-mcpgo-2026 with 2026-07-28 requests
//	gw-serve      bare go-sdk client -> toolwire serve --http (child) -> stdio demo,
//	              gateway.limits off (the peers it is compared with have none)
//	gw-serve-2026 the same with 2026-07-28 requests (no session)
//	gw-limits     the same with every limit on, set too high to refuse the load
//	list-floor, list-sdk, list-tw-cold, list-tw-warm
//	              a 1000-tool listing: raw HTTP + encoding/json, bare go-sdk
//	              connect+list, toolwire Connect (adapt + register) cold and warm
//	mem-gateway, mem-serve, mem-sdk-proxy, mem-mcpgo-proxy
//	              idle memory and memory per open downstream session on the
//	              gateway and on the two bare proxies
//
// Issue 8's targets compare tw-stdio's throughput with stock-stdio (go-sdk
// as released, both ends), and gw-serve's latency with sdk-stdio: the same
// client making the same call directly to the same upstream process.
//
// Call rows are measured in rounds: in every round each row makes a block
// of sequential calls (bounded by -block-calls and -block-time), the order
// reversed every round, so that load from elsewhere falls on all rows
// alike. Then, for each of -callers, rounds of time windows with that many
// concurrent callers on the row's one session. Listing rows run in
// iterations, each row once per iteration, the order reversed every time.
// Every loop is bounded in count and in time, and -timeout bounds the run.
//
// The command exits with status 1 when any row failed or -timeout cut the
// run short, after printing the report (which says why each row failed),
// so that CI's run of -quick catches a change that breaks a row.
//
// The demo server and toolwire are built into a temporary directory (or
// taken from -bin). Every process the command starts is ended by its PID
// when it exits, also on Ctrl-C: stdin closed, then SIGTERM where the
// program expects it, then SIGKILL after a grace period.
//
// With -profile DIR, CPU and allocation profiles of this process and of the
// servers are written after the measurements, and DIR/profiles.md breaks
// them down into time per call by component; see internal/bench's
// profile.go and breakdown.go.
//
// The measuring is internal/bench's (bench.Run); this command turns its
// flags into bench.Options and prints the report. The floors and helper
// processes are this binary run as "toolwire-bench child MODE"; see
// internal/bench's children.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolwire/toolwire/internal/bench"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		if err := bench.RunChild(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "toolwire-bench child %s: %v\n", strings.Join(os.Args[2:], " "), err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "toolwire-bench:", err)
		os.Exit(1)
	case interrupted:
		os.Exit(130)
	}
}

// errUsage marks command-line errors, already reported with the usage.
var errUsage = errors.New("usage error")

// options are the command's flags: the run's, and where the report goes.
type options struct {
	bench.Options
	out string
}

// quickDefaults replace the defaults of the flags not given, with -quick.
// They are small enough for CI (.ci/run runs -quick to catch a row that a
// change broke) and still run every row through every phase.
var quickDefaults = map[string]string{
	"rounds": "2", "block-calls": "50", "list-tools": "250", "block-time": "50ms", "warmup": "20",
	"tput-rounds": "1", "tput-ramp": "20ms", "tput-window": "100ms",
	"list-iters": "2", "sessions": "10", "timeout": "3m",
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	o.Args = args // for the report's "Run:" line
	fs := flag.NewFlagSet("toolwire-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: toolwire-bench [flags]\n\nrows: %s\ngroups: calls, list, mem, all\n\nflags:\n",
			strings.Join(bench.RowNames(), ", "))
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Rows, "rows", "all", "comma-separated `rows` and groups to run; the floors and direct rows they are compared with are added")
	fs.StringVar(&o.out, "o", "", "also write the report to `file`")
	fs.StringVar(&o.BinDir, "bin", "", "take demoserver and toolwire from `dir` instead of building them")
	fs.DurationVar(&o.Timeout, "timeout", bench.DefaultTimeout, "stop measuring after this long and report what was measured")
	fs.BoolVar(&o.Verbose, "v", false, "pass the children's stderr through")
	quick := fs.Bool("quick", false, "small counts and short windows: "+quickSummary())

	fs.IntVar(&o.Rounds, "rounds", 12, "sequential rounds")
	fs.IntVar(&o.BlockCalls, "block-calls", 250, "at most this many sequential calls per row per round")
	fs.DurationVar(&o.BlockTime, "block-time", 250*time.Millisecond, "at most this long per row per round")
	fs.IntVar(&o.Warmup, "warmup", 200, "calls on each session before it is measured")

	callers := fs.String("callers", "1,8,64", "concurrent callers for the throughput windows (comma-separated)")
	fs.IntVar(&o.TputRounds, "tput-rounds", 3, "throughput rounds per caller count")
	fs.DurationVar(&o.TputRamp, "tput-ramp", 100*time.Millisecond, "unmeasured start of each throughput window")
	fs.DurationVar(&o.TputWindow, "tput-window", 500*time.Millisecond, "measured length of each throughput window")
	fs.IntVar(&o.TputMax, "tput-max", 100000, "at most this many calls per throughput window")

	fs.IntVar(&o.ListTools, "list-tools", 1000, "tools in the generated listing")
	fs.IntVar(&o.ListIters, "list-iters", 8, "listing iterations (the first is a warm-up)")
	fs.DurationVar(&o.ListTime, "list-time", 2*time.Minute, "at most this long for the listing iterations")

	fs.IntVar(&o.Sessions, "sessions", 500, "downstream sessions opened for the memory rows")

	fs.StringVar(&o.FleetTest, "fleet-test", "", "after the rows, run BenchmarkFleetThroughput from cmd/toolwire's test `binary` (go test -c; needs PostgreSQL's initdb and haproxy) and put the fleet beside the single gateway (scripts/bench.sh does this in its full run)")
	fs.IntVar(&o.FleetCalls, "fleet-calls", 3000, "with -fleet-test: calls per replica count")
	fs.StringVar(&o.ProfileDir, "profile", "", "after measuring, write CPU and allocation profiles of this process and of the rows' servers to `dir`, with their breakdown in dir/profiles.md (see profile.go)")
	fs.DurationVar(&o.ProfileTime, "profile-time", 4*time.Second, "with -profile: how long each call row runs, sequentially and with 8 callers")
	fs.IntVar(&o.ProfileLists, "profile-lists", 3, "with -profile: listings per toolwire listing row")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "toolwire-bench: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return o, errUsage
	}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range quickDefaults {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					panic(err) // quickDefaults are valid
				}
			}
		}
	}
	var err error
	if o.Callers, err = parseCallers(*callers); err != nil {
		fmt.Fprintf(stderr, "toolwire-bench: -callers %q: %v\n", *callers, err)
		return o, errUsage
	}
	var bad []string
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"-rounds", o.Rounds >= 1}, {"-block-calls", o.BlockCalls >= 1}, {"-block-time", o.BlockTime > 0},
		{"-warmup", o.Warmup >= 0}, {"-tput-rounds", o.TputRounds >= 0}, {"-tput-window", o.TputWindow > 0},
		{"-tput-ramp", o.TputRamp >= 0}, {"-tput-max", o.TputMax >= 1}, {"-list-tools", o.ListTools >= 1},
		{"-list-iters", o.ListIters >= 2}, {"-list-time", o.ListTime > 0}, {"-sessions", o.Sessions >= 1},
		{"-timeout", o.Timeout > 0}, {"-profile-time", o.ProfileTime > 0}, {"-profile-lists", o.ProfileLists >= 1}, {"-fleet-calls", o.FleetCalls >= 1},
	} {
		if !c.ok {
			bad = append(bad, c.name)
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "toolwire-bench: out of range: %s (counts and durations are positive; -list-iters at least 2)\n", strings.Join(bad, ", "))
		return o, errUsage
	}
	if o.ProfileDir != "" && o.BinDir != "" {
		// The servers' profiles come from a hook the bench builds in.
		fmt.Fprintln(stderr, "toolwire-bench: -profile builds its own binaries; it does not go with -bin")
		return o, errUsage
	}
	return o, nil
}

func quickSummary() string {
	var parts []string
	for _, name := range []string{"rounds", "block-calls", "block-time", "warmup", "tput-rounds", "tput-ramp", "tput-window", "list-tools", "list-iters", "sessions", "timeout"} {
		parts = append(parts, "-"+name+" "+quickDefaults[name])
	}
	return strings.Join(parts, ", ")
}

func parseCallers(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return nil, fmt.Errorf("%q is not a caller count from 1 to 1024", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// run measures the selected rows and writes the report to stdout (and -o).
// Progress goes to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if err := bench.CheckRows(o.Rows); err != nil {
		fmt.Fprintf(stderr, "toolwire-bench: -rows: %v\n", err)
		return errUsage
	}
	var outFile *os.File
	if o.out != "" {
		// Opened first, so that a bad path fails before minutes of work.
		if outFile, err = os.Create(o.out); err != nil {
			return err
		}
		defer outFile.Close()
	}

	text, runErr := bench.Run(ctx, &o.Options, stderr)
	if text == "" {
		return runErr
	}
	// A report with failed rows is printed and written like any other;
	// the failure is returned after it, for the exit status.
	defer func() {
		if err == nil {
			err = runErr
		}
	}()
	if _, err := io.WriteString(stdout, text); err != nil {
		return err
	}
	if outFile != nil {
		if _, err := io.WriteString(outFile, text); err != nil {
			return err
		}
		if err := outFile.Close(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "toolwire-bench: report written to %s\n", o.out)
	}
	return nil
}
