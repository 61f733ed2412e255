//go:build unix

// Package bench is toolwire-bench's measurement machinery: it measures
// toolwire's hot paths against this machine's floors, in one run, and
// renders one markdown report. cmd/toolwire-bench turns flags into Options,
// calls Run and prints what it returns; the package doc there describes the
// rows and how they are measured.
//
// The floors and helper processes are the calling binary run again as
// "<binary> child MODE" (see children.go): its main hands those arguments
// to RunChild.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Options are what one run measures and how; cmd/toolwire-bench's flags
// set them, and its parseFlags checks their ranges.
type Options struct {
	Rows    string        // comma-separated rows and groups (RowNames; calls, list, mem, all)
	BinDir  string        // take demoserver and toolwire from here instead of building them
	Timeout time.Duration // stop measuring after this long and report what was measured; 0 means DefaultTimeout
	Verbose bool          // pass the children's stderr through
	Args    []string      // the command line, quoted in the report's "Run:" line

	Rounds     int           // sequential rounds
	BlockCalls int           // at most this many sequential calls per row per round
	BlockTime  time.Duration // at most this long per row per round
	Warmup     int           // calls on each session before it is measured

	Callers    []int         // concurrent callers for the throughput windows
	TputRounds int           // throughput rounds per caller count
	TputRamp   time.Duration // unmeasured start of each throughput window
	TputWindow time.Duration // measured length of each throughput window
	TputMax    int           // at most this many calls per throughput window

	ListTools int           // tools in the generated listing
	ListIters int           // listing iterations (the first is a warm-up)
	ListTime  time.Duration // at most this long for the listing iterations

	Sessions int // downstream sessions opened for the memory rows

	// FleetTest, if set, is cmd/toolwire's test binary (go test -c): its
	// BenchmarkFleetThroughput runs after the rows, FleetCalls calls per
	// replica count, and the report puts the fleet beside the single
	// gateway (see fleet.go).
	FleetTest  string
	FleetCalls int

	ProfileDir   string        // if set, write profiles and their breakdown here after measuring
	ProfileTime  time.Duration // with ProfileDir: how long each call row runs
	ProfileLists int           // with ProfileDir: listings per toolwire listing row
}

// RowNames are the rows Options.Rows can name, in report order.
func RowNames() []string { return rowNames() }

// CheckRows reports whether spec is a valid Options.Rows, so that a
// command can reject it before it starts.
func CheckRows(spec string) error {
	_, err := selectRows(spec)
	return err
}

// DefaultTimeout is how long Run measures when its options set no timeout.
const DefaultTimeout = 20 * time.Minute

// RunChild runs the child process that args ("MODE [flags]") name; see
// children.go.
func RunChild(args []string) error { return runChild(args) }

// ErrRowsFailed is wrapped by Run's error when a row failed: the report
// is still returned, with each failure in it, and a command should print it
// and then exit non-zero, so that a change that breaks a row (a default
// that refuses the load, a protocol change) cannot pass unseen.
var ErrRowsFailed = errors.New("rows failed")

// Run measures the rows o selects and returns the report as markdown.
// Progress goes to progress. When ctx ends or o.Timeout passes, Run stops
// measuring and reports what was measured, with a note saying so. If any
// row failed, the report comes with an error wrapping ErrRowsFailed that
// names each.
func Run(ctx context.Context, opts *Options, progress io.Writer) (string, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	selected, err := selectRows(o.Rows)
	if err != nil {
		return "", fmt.Errorf("rows %q: %w", o.Rows, err)
	}
	if o.ProfileDir != "" {
		if o.ProfileDir, err = filepath.Abs(o.ProfileDir); err == nil {
			err = os.MkdirAll(o.ProfileDir, 0o755)
		}
		if err != nil {
			return "", fmt.Errorf("-profile: %w", err)
		}
		// Passed on to every child, as GOGC is (passedEnv).
		os.Setenv(profileDirEnv, o.ProfileDir)
		defer os.Unsetenv(profileDirEnv)
	}

	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	b, err := newBench(ctx, &o, progress)
	if err != nil {
		return "", err
	}
	defer b.close()

	rep := b.measure(ctx, selected)
	if ctx.Err() != nil {
		rep.notes = append(rep.notes, "Stopped early ("+stopReason(ctx)+"): the figures cover what was measured until then.")
	}
	if stopReason(ctx) == "-timeout" && ctx.Err() != nil {
		return rep.markdown(), fmt.Errorf("-timeout %s passed before every row was measured", o.Timeout)
	}
	if failed := rep.failed(); len(failed) > 0 {
		return rep.markdown(), fmt.Errorf("%w: %s", ErrRowsFailed, strings.Join(failed, "; "))
	}
	return rep.markdown(), nil
}

func stopReason(ctx context.Context) string {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return "-timeout"
	}
	return "interrupted"
}
