#!/usr/bin/env bash
# Runs toolwire's benchmarks.
#
# By default: cmd/toolwire-bench, which measures the floors, the bare go-sdk,
# toolwire's client stack, the gateway, a 1000-tool listing and memory per
# gateway session in one interleaved run, and prints the markdown report that
# docs/performance.md keeps (a few minutes on 2 cores). Flags are passed on;
# the report is also written to /tmp/toolwire-bench.md unless -o is given.
# The full run (without -quick, -rows or -bin) also builds cmd/toolwire's
# test binary and runs its fleet benchmark after the rows (PostgreSQL,
# HAProxy, 1 to 3 replicas): the report puts the fleet beside the single
# gateway (-fleet-test; FLEET_CALLS sets the calls per row, default 3000).
# The exit status is 1 when a row failed (the report says why) or -timeout
# cut the run short.
#
#   scripts/bench.sh                               # the full run
#   scripts/bench.sh -quick                        # every row briefly, under a minute; exits 1
#                                                  # if a row fails (CI runs this: .ci/run)
#   scripts/bench.sh -rows tw-stdio,gw-serve -o /tmp/x.md
#   GOGC=200 scripts/bench.sh                      # GC settings reach every process
#   scripts/bench.sh -profile /tmp/prof            # then CPU and allocation profiles of
#                                                  # every process, broken down by component
#                                                  # in /tmp/prof/profiles.md (in the full run,
#                                                  # also the fleet's replicas, profiled
#                                                  # during its measured calls)
#
# With --go-test: the go test benchmarks of tool/ and mcpclient/, medians
# with benchstat (installed into a temporary GOBIN, never into go.mod).
#
#   scripts/bench.sh --go-test [OUTFILE]           # default /tmp/toolwire-gotest-bench.txt
#   COUNT=3 BENCHTIME=0.5s BENCH=Call scripts/bench.sh --go-test
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--go-test" ]; then
	shift
	out=${1:-/tmp/toolwire-gotest-bench.txt}
	count=${COUNT:-6}
	benchtime=${BENCHTIME:-1s}
	bench=${BENCH:-.}

	go test -run='^$' -bench="$bench" -benchmem -count="$count" -benchtime="$benchtime" -timeout=20m \
		./tool/ ./mcpclient/ | tee "$out"

	gobin=${BENCHSTAT_GOBIN:-/tmp/toolwire-benchstat}
	if [ ! -x "$gobin/benchstat" ]; then
		GOBIN="$gobin" go install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
	fi
	echo
	"$gobin/benchstat" "$out"
	exit 0
fi

bin=$(mktemp -d "${TMPDIR:-/tmp}/toolwire-bench-bin.XXXXXX")
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/toolwire-bench" ./cmd/toolwire-bench

out=(-o /tmp/toolwire-bench.md)
fleet=1
for arg in "$@"; do
	case $arg in
	-o | --o | -o=* | --o=*) out=() ;;
	-quick | --quick | -quick=* | --quick=* | -rows | --rows | -rows=* | --rows=* | -bin | --bin | -bin=* | --bin=* | -fleet-test* | --fleet-test*) fleet= ;;
	esac
done
if [ -n "$fleet" ]; then
	go test -c -o "$bin/toolwire.test" ./cmd/toolwire
	out+=(-fleet-test "$bin/toolwire.test" -fleet-calls "${FLEET_CALLS:-3000}")
fi
# Not exec: the trap removes the binary afterwards. The command ends its
# own children on Ctrl-C, and its exit status is kept.
status=0
"$bin/toolwire-bench" "${out[@]}" "$@" || status=$?
exit "$status"
