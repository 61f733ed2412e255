#!/usr/bin/env bash
# Run the official MCP conformance suite's CLIENT scenarios against a client
# program. The suite starts a test server (and, for auth/*, a test
# authorization server) per scenario, all bound to 127.0.0.1, and runs the
# client against it. Every scenario runs in one process of the suite, all
# at once (its "--suite all": seconds, where a process per scenario took
# most of a minute), which counts for the auth/* scenarios; the others, and
# scenarios named with --scenario, run a process each (named ones --jobs at
# a time), each under a timeout.
#
# usage: scripts/conformance-client.sh [options]
#   --client CMD      the client under test, as shell text without spaces in
#                     its words (the suite splits it on spaces). The suite runs
#                     `CMD URL` with the scenario name in MCP_CONFORMANCE_SCENARIO
#                     and, for some scenarios, JSON in MCP_CONFORMANCE_CONTEXT.
#                     Default: toolwire's ./conformance/client, built into the
#                     results directory.
#   --scenario NAME   run only NAME (repeatable); default: every client scenario
#                     that "conformance list --client" prints
#   --spec-version V  only scenarios for V (2025-03-26, 2025-06-18, 2025-11-25,
#                     draft, extension)
#   --expected-failures FILE
#                     scenarios expected to fail: a YAML "client:" list, as in
#                     conformance/client-expected-failures.yml; the run then
#                     succeeds when exactly those fail
#   --timeout SECS    the suite stops the client after SECS (default 30); the
#                     scenario run as a whole is killed SECS+15 s after it starts
#   --jobs N          run N named scenarios at a time (default 1); each has
#                     its own servers on ports of its own, so they do not meet
#   -o DIR            results directory (default: a new directory under ${TMPDIR:-/tmp})
#   --list            print the scenario names and exit
#   --install-only    install the npm packages and exit
# env: TOOLWIRE_NPM_DIR   where the pinned npm packages are installed, shared
#                         with scripts/conformance.sh (default $HOME/.cache/toolwire-npm)
#
# Output: a table (scenario, verdict, pass/fail/warn checks, seconds, note), then
#   scenarios: P passed, F failed, S skipped
#   N passed, M failed       <- checks (SUCCESS / FAILURE), plus one failure per
#                               failed scenario that recorded no FAILURE check
# and, with --expected-failures, the failures that were not expected and the
# expected ones that did not fail.
# Exit: 0 when no scenario failed (with --expected-failures: exactly the listed
# ones failed), 1 otherwise, 2 on a usage or setup error.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NPM_DIR="${TOOLWIRE_NPM_DIR:-${HOME:-/tmp}/.cache/toolwire-npm}"
CLI="$NPM_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"

die() { echo "conformance-client.sh: $*" >&2; exit 2; }
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}" >&2; exit 2; }

CLIENT="" SPEC="" TMO=30 OUT="" LIST=0 INSTALL_ONLY=0 EXPECTED="" JOBS=1
SCENARIOS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --client) [ $# -ge 2 ] || usage; CLIENT="$2"; shift 2 ;;
    --scenario) [ $# -ge 2 ] || usage; SCENARIOS+=("$2"); shift 2 ;;
    --spec-version) [ $# -ge 2 ] || usage; SPEC="$2"; shift 2 ;;
    --expected-failures) [ $# -ge 2 ] || usage; EXPECTED="$2"; shift 2 ;;
    --timeout) [ $# -ge 2 ] || usage; TMO="$2"; shift 2 ;;
    --jobs) [ $# -ge 2 ] || usage; JOBS="$2"; shift 2 ;;
    -o) [ $# -ge 2 ] || usage; OUT="$2"; shift 2 ;;
    --list) LIST=1; shift ;;
    --install-only) INSTALL_ONLY=1; shift ;;
    -h|--help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
done
[[ "$TMO" =~ ^[1-9][0-9]*$ ]] || die "--timeout wants a number of seconds"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs wants a number of scenarios, 1 or more"
[ -z "$EXPECTED" ] || [ -r "$EXPECTED" ] || die "cannot read $EXPECTED"

# The same pinned packages in the same directory as the server scenarios:
# scripts/conformance.sh installs them (under its lock) when one is missing.
TOOLWIRE_NPM_DIR="$NPM_DIR" "$ROOT/scripts/conformance.sh" --install-only >&2 || exit 2
[ "$INSTALL_ONLY" = 1 ] && exit 0

# The suite's CLI with two preloads: Node 20 compatibility, and test servers
# bound to 127.0.0.1 rather than every interface.
SUITE=(node --import "$ROOT/conformance/suite/preload.mjs" --import "$ROOT/conformance/client/loopback.mjs" "$CLI")

LISTED=("${SCENARIOS[@]}")  # named with --scenario
if [ ${#SCENARIOS[@]} -eq 0 ]; then
  list_args=(list --client); [ -n "$SPEC" ] && list_args+=(--spec-version "$SPEC")
  listing="$(timeout 60 "${SUITE[@]}" "${list_args[@]}")" || die "conformance list failed"
  mapfile -t SCENARIOS < <(sed -n 's/^  - \([^ ]*\).*/\1/p' <<<"$listing")
  [ ${#SCENARIOS[@]} -gt 0 ] || die "the suite listed no client scenarios${SPEC:+ for $SPEC}"
fi
if [ "$LIST" = 1 ]; then printf '%s\n' "${SCENARIOS[@]}"; exit 0; fi

if [ -z "$OUT" ]; then
  OUT="$(mktemp -d "${TMPDIR:-/tmp}/toolwire-conformance-client.XXXXXX")" || die "mktemp failed"
fi
mkdir -p "$OUT/scenarios" "$OUT/logs" || die "cannot create $OUT"
: > "$OUT/manifest.tsv"

if [ -z "$CLIENT" ]; then
  command -v go >/dev/null || die "go not found (needed to build ./conformance/client; or pass --client)"
  ( cd "$ROOT" && go build -o "$OUT/bin/toolwire-conformance-client" ./conformance/client ) || die "go build ./conformance/client failed"
  CLIENT="$OUT/bin/toolwire-conformance-client"
fi

echo "conformance 0.1.16: ${#SCENARIOS[@]} client scenario(s), client: $CLIENT, ${TMO}s each"

extra=(); [ -n "$SPEC" ] && extra+=(--spec-version "$SPEC")

# scenario_dir NAME: the results' subdirectory of a scenario (auth/x: auth_x).
scenario_dir() { printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_'; }

# The scenarios of suite 0.1.16 in which the client is expected to end with
# an error (the suite's allowClientError): its exit code fails no other.
ALLOW_CLIENT_ERROR=(auth/scope-retry-limit auth/resource-mismatch)

# Unless scenarios were named, every scenario runs at once in one process
# of the suite ("--suite all"), whose results count for the auth/*
# scenarios; the others, whose checks time the client (sse-retry warns of a
# reconnection late by a few hundred ms, which 26 scenarios at once on two
# cores can make it), run again a process each, one at a time, and those
# results count. (The suite has no set of exactly the auth/* scenarios.)
TOGETHER=() ALONE=("${SCENARIOS[@]}")
if [ ${#LISTED[@]} -eq 0 ]; then
  TOGETHER=() ALONE=() JOBS=1
  for s in "${SCENARIOS[@]}"; do
    case "$s" in auth/*) TOGETHER+=("$s") ;; *) ALONE+=("$s") ;; esac
  done
fi

if [ ${#TOGETHER[@]} -gt 0 ]; then
  # In one process the suite judges a scenario by its checks alone, so the
  # client runs under a wrapper that records its exit code and time, and a
  # scenario fails here as it would alone: a FAILURE or WARNING check, no
  # exit recorded (it timed out, or never ran), or an exit code other than
  # 0 where the scenario does not allow one.
  mkdir -p "$OUT/bin" "$OUT/run" || die "cannot create $OUT"
  exits="$OUT/client-exits.tsv"
  : > "$exits"
  # The wrapper bounds the client itself: the suite's timeout signals only
  # the shell it starts the command with, which does not pass it on.
  cat > "$OUT/bin/client" <<'WRAPPER' || die "cannot write the client's wrapper"
#!/usr/bin/env bash
# Runs the client under test (TOOLWIRE_CC_CLIENT, split into words as the
# suite splits a command) for at most TOOLWIRE_CC_TIMEOUT seconds and
# appends the scenario, its exit code (124: timed out) and its
# milliseconds to TOOLWIRE_CC_EXITS.
start=$(date +%s%3N)
timeout -k 2 "$TOOLWIRE_CC_TIMEOUT" $TOOLWIRE_CC_CLIENT "$@" </dev/null
rc=$?
printf '%s\t%s\t%s\n' "$MCP_CONFORMANCE_SCENARIO" "$rc" "$(($(date +%s%3N) - start))" >> "$TOOLWIRE_CC_EXITS"
exit $rc
WRAPPER
  chmod +x "$OUT/bin/client"
  start=$(date +%s%3N)
  # All at once: the run as a whole is bounded as one scenario is.
  TOOLWIRE_CC_CLIENT="$CLIENT" TOOLWIRE_CC_EXITS="$exits" TOOLWIRE_CC_TIMEOUT="$TMO" \
  timeout -k 5 "$((TMO + 30))" "${SUITE[@]}" client \
    --command "$OUT/bin/client" --suite all --timeout "$((TMO * 1000))" -o "$OUT/run" "${extra[@]}" \
    >"$OUT/logs/suite.log" 2>&1 </dev/null
  rc=$?
  end=$(date +%s%3N)
  for s in "${TOGETHER[@]}"; do
    sub="$(scenario_dir "$s")"
    dir=""
    for d in "$OUT/run/$s-"*; do
      [[ "$d" =~ /"$s"-[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}-[0-9]{2}-[0-9]{2}-[0-9]{3}Z$ ]] && dir="$d"
    done
    exit_line="$(awk -F'\t' -v s="$s" '$1 == s { line = $0 } END { print line }' "$exits")"
    code="$(cut -f2 <<<"$exit_line")" ms="$(cut -f3 <<<"$exit_line")"
    verdict=0
    if [ -z "$dir" ]; then
      verdict=$([ "$rc" = 0 ] && echo 1 || echo "$rc")
    else
      mkdir -p "$OUT/scenarios/$sub" && mv "$dir" "$OUT/scenarios/$sub/"
      if [ -z "$exit_line" ] || [ "$code" = 124 ]; then
        verdict=124  # timed out, or never ended on its own
      elif [ "$code" != 0 ] && ! printf '%s\n' "${ALLOW_CLIENT_ERROR[@]}" | grep -qxF "$s"; then
        verdict="$code"
      elif grep -q '"status": *"WARNING"' "$OUT/scenarios/$sub"/*/checks.json 2>/dev/null; then
        verdict=1
      fi
    fi
    ms="${ms:-0}"
    printf '%s\t%s\t%d.%03d\t%s\n' "$s" "$verdict" $((ms / 1000)) $((ms % 1000)) "$sub" >> "$OUT/manifest.tsv"
    printf '  %-45s client exit %s\n' "$s" "${code:-none}"
  done
  echo "  (one process of the suite, counted for ${#TOGETHER[@]} scenarios: exit $rc, $(( (end - start) / 1000 )).$(printf '%03d' $(( (end - start) % 1000 ))) s; its output: $OUT/logs/suite.log)"
fi

run_scenario() {
  local s="$1" sub start rc ms
  sub="$(scenario_dir "$s")"
  start=$(date +%s%N)
  # timeout runs the scenario in its own process group and signals all of
  # it: the suite ends only the client's shell at its own timeout, and a
  # client that outlived it would otherwise hold the run open.
  timeout -k 5 "$((TMO + 15))" "${SUITE[@]}" client \
    --command "$CLIENT" --scenario "$s" --timeout "$((TMO * 1000))" -o "$OUT/scenarios/$sub" "${extra[@]}" \
    >"$OUT/logs/$sub.log" 2>&1 </dev/null
  rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  # One short line per write: scenarios running at once append whole lines.
  printf '%s\t%s\t%d.%03d\t%s\n' "$s" "$rc" $((ms / 1000)) $((ms % 1000)) "$sub" >> "$OUT/manifest.tsv"
  printf '  %-45s exit %s\n' "$s" "$rc"
}
running=0
for s in "${ALONE[@]}"; do
  if [ "$running" -ge "$JOBS" ]; then
    wait -n
    running=$((running - 1))
  fi
  run_scenario "$s" &
  running=$((running + 1))
done
wait
echo

# The CLI exits non-zero for a client scenario with a FAILURE or WARNING
# check, a client that timed out, or a client that exited non-zero where the
# scenario does not allow it: summarize.mjs reads that exit code as FAIL.
summary="$(timeout 60 node "$ROOT/conformance/suite/summarize.mjs" "$OUT")"
status=$?
printf '%s\n' "$summary"
[ -n "$EXPECTED" ] || exit "$status"

# Compare the failed scenarios with the expected ones.
mapfile -t failed < <(awk '$2 == "FAIL" { print $1 }' <<<"$summary" | sort)
mapfile -t expected < <(sed -n '/^client:/,/^[^ #-]/s/^[[:space:]]*-[[:space:]]*\([^ #]*\).*/\1/p' "$EXPECTED" | sort)
ran="$(printf '%s\n' "${SCENARIOS[@]}" | sort)"
unexpected="$(comm -23 <(printf '%s\n' "${failed[@]}" | sed '/^$/d') <(printf '%s\n' "${expected[@]}"))"
stale="$(comm -12 <(comm -13 <(printf '%s\n' "${failed[@]}" | sed '/^$/d') <(printf '%s\n' "${expected[@]}")) <(printf '%s\n' "$ran"))"
echo
echo "expected failures ($EXPECTED): ${#expected[@]} listed"
[ -z "$unexpected" ] || { echo "unexpected failures:"; sed 's/^/  /' <<<"$unexpected"; }
[ -z "$stale" ] || { echo "expected to fail but did not (update the file):"; sed 's/^/  /' <<<"$stale"; }
[ -z "$unexpected" ] && [ -z "$stale" ] && { echo "as expected"; exit 0; }
exit 1
