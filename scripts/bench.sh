#!/usr/bin/env bash
# Runs toolwire's benchmarks (tool/bench_test.go, mcpclient/bench_test.go)
# and prints medians with benchstat.
#
#   scripts/bench.sh [OUTFILE]           # default /tmp/toolwire-bench.txt
#   COUNT=3 BENCHTIME=0.5s BENCH=Call scripts/bench.sh
#
# benchstat is installed into a temporary GOBIN, never into go.mod.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-/tmp/toolwire-bench.txt}
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
