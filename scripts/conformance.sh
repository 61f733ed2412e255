#!/usr/bin/env bash
# Run the official MCP conformance suite's server scenarios against a running
# Streamable HTTP endpoint. Every scenario runs in one process of the suite
# (its "--suite all"), which takes a second or two where a process per
# scenario took most of a minute; scenarios named with --scenario run one
# process each, each under its own timeout.
#
# usage: scripts/conformance.sh URL [options] [-- extra args for "conformance server"]
#   URL               e.g. http://127.0.0.1:3010/mcp; the host must be 127.0.0.1,
#                     localhost or [::1] (dns-rebinding-protection needs one of them)
#   --scenario NAME   run only NAME (repeatable); default: every server scenario
#                     that "conformance list --server" prints (active and pending)
#   --spec-version V  only scenarios for protocol version V (e.g. 2025-06-18)
#   --timeout SECS    limit per scenario (default 60); one process for them all
#                     has SECS and 5 s a scenario
#   -o DIR            results directory (default: a new directory under ${TMPDIR:-/tmp})
#   --list            print the scenario names and exit
#   --install-only    install the npm packages and exit
# env: TOOLWIRE_NPM_DIR   where the pinned npm packages are installed
#                         (default $HOME/.cache/toolwire-npm)
#
# Output: a table (scenario, verdict, pass/fail/warn checks, seconds, note), then
#   scenarios: P passed, F failed, S skipped
#   N passed, M failed       <- checks (SUCCESS / FAILURE), counted as the suite does
# Exit: 0 when no scenario failed, 1 when one did, 2 on a usage or setup error.
#
# Serve the fixtures with:  go run ./conformance/server -http 127.0.0.1:3010 [-stateless]
set -uo pipefail

# Pinned: the suite, and the MCP TypeScript SDK it drives (a dependency of the
# suite with a caret range; pinning it keeps runs reproducible).
NPM_PACKAGES=(@modelcontextprotocol/conformance@0.1.16 @modelcontextprotocol/sdk@1.32.2)
NPM_DIR="${TOOLWIRE_NPM_DIR:-${HOME:-/tmp}/.cache/toolwire-npm}"
SUITE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../conformance/suite" && pwd)"
CLI="$NPM_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"

die() { echo "conformance.sh: $*" >&2; exit 2; }
usage() { sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

URL="" SPEC="" TMO=60 OUT="" LIST=0 INSTALL_ONLY=0
SCENARIOS=() PASS_THROUGH=()
while [ $# -gt 0 ]; do
  case "$1" in
    --scenario) [ $# -ge 2 ] || usage; SCENARIOS+=("$2"); shift 2 ;;
    --spec-version) [ $# -ge 2 ] || usage; SPEC="$2"; shift 2 ;;
    --timeout) [ $# -ge 2 ] || usage; TMO="$2"; shift 2 ;;
    -o) [ $# -ge 2 ] || usage; OUT="$2"; shift 2 ;;
    --list) LIST=1; shift ;;
    --install-only) INSTALL_ONLY=1; shift ;;
    --) shift; PASS_THROUGH=("$@"); break ;;
    -h|--help) usage ;;
    -*) echo "unknown option: $1" >&2; usage ;;
    *) [ -z "$URL" ] || usage; URL="$1"; shift ;;
  esac
done
[[ "$TMO" =~ ^[1-9][0-9]*$ ]] || die "--timeout wants a number of seconds"

for cmd in node npm timeout; do
  command -v "$cmd" >/dev/null || die "$cmd not found"
done
node_major="$(timeout 10 node -p 'process.versions.node.split(".")[0]')" || die "node does not run"
[ "$node_major" -ge 20 ] || die "node >= 20 required (have $(node --version))"

# --- install (idempotent: npm runs only when a pinned version is missing) ---
installed_version() {  # NAME -> version installed in NPM_DIR, or nothing
  timeout 10 node -e 'try { console.log(require(process.argv[1]).version) } catch {}' \
    "$NPM_DIR/node_modules/$1/package.json" 2>/dev/null
}
install_packages() {
  mkdir -p "$NPM_DIR" || die "cannot create $NPM_DIR"
  local missing=() spec
  for spec in "${NPM_PACKAGES[@]}"; do
    [ "$(installed_version "${spec%@*}")" = "${spec##*@}" ] || missing+=("$spec")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing into $NPM_DIR: ${missing[*]}" >&2
  [ -f "$NPM_DIR/package.json" ] || printf '{ "name": "toolwire-npm", "private": true }\n' > "$NPM_DIR/package.json"
  # npm warns EBADENGINE on Node 20 (some dependencies ask for Node >= 22); harmless.
  ( cd "$NPM_DIR" && timeout 600 npm install --no-audit --no-fund --save-exact --loglevel=error "${missing[@]}" ) >&2 \
    || die "npm install failed"
  for spec in "${missing[@]}"; do
    [ "$(installed_version "${spec%@*}")" = "${spec##*@}" ] || die "$spec did not install"
  done
}
if command -v flock >/dev/null; then
  mkdir -p "$NPM_DIR" || die "cannot create $NPM_DIR"
  exec 9>"$NPM_DIR/.install.lock"
  flock -w 660 9 || die "timed out waiting for another install in $NPM_DIR"
  install_packages
  flock -u 9; exec 9>&-
else
  install_packages
fi
[ "$INSTALL_ONLY" = 1 ] && { echo "installed in $NPM_DIR"; exit 0; }

# The suite's CLI, with the Node 20 preload.
SUITE=(node --import "$SUITE_DIR/preload.mjs" "$CLI")

# --- scenarios ---
LISTED=("${SCENARIOS[@]}")  # named with --scenario
if [ ${#SCENARIOS[@]} -eq 0 ]; then
  list_args=(list --server); [ -n "$SPEC" ] && list_args+=(--spec-version "$SPEC")
  listing="$(timeout 60 "${SUITE[@]}" "${list_args[@]}")" || die "conformance list failed"
  mapfile -t SCENARIOS < <(sed -n 's/^  - \([^ ]*\).*/\1/p' <<<"$listing")
  [ ${#SCENARIOS[@]} -gt 0 ] || die "the suite listed no server scenarios${SPEC:+ for $SPEC}"
fi
if [ "$LIST" = 1 ]; then printf '%s\n' "${SCENARIOS[@]}"; exit 0; fi

[ -n "$URL" ] || usage
host="$(timeout 10 node -p 'new URL(process.argv[1]).hostname' "$URL" 2>/dev/null)" || die "bad URL: $URL"
case "$host" in
  127.0.0.1|localhost|'[::1]') ;;
  *) die "refusing $URL: only 127.0.0.1, localhost or [::1] may be targeted" ;;
esac

if [ -z "$OUT" ]; then
  OUT="$(mktemp -d "${TMPDIR:-/tmp}/toolwire-conformance.XXXXXX")" || die "mktemp failed"
fi
mkdir -p "$OUT/scenarios" "$OUT/logs" || die "cannot create $OUT"
: > "$OUT/manifest.tsv"

echo "conformance 0.1.16: ${#SCENARIOS[@]} server scenario(s) against $URL, ${TMO}s each"
if command -v curl >/dev/null && ! curl -s -o /dev/null -m 5 "$URL"; then
  echo "warning: nothing answered at $URL" >&2
fi

extra=(); [ -n "$SPEC" ] && extra+=(--spec-version "$SPEC")

# scenario_dir NAME: the scenario's subdirectory of the results, its name
# with anything but letters, digits, '.', '_' and '-' made '_'.
scenario_dir() { printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_'; }
# start_ms DIR: the start time in the name the suite gives a scenario's
# results, "server-NAME-2026-12-06T04-25-02-199Z", in ms.
start_ms() {
  local t="${1: -24}"  # 2026-12-06T04-25-02-199Z
  date -u -d "${t:0:10} ${t:11:2}:${t:14:2}:${t:17:2}.${t:20:3}" +%s%3N 2>/dev/null || echo 0
}

if [ ${#LISTED[@]} -eq 0 ]; then
  # Every scenario, in one process. The manifest is built from the
  # directories it wrote, one per scenario; a scenario with none failed
  # (it did not run, or the run was cut short), with the run's exit code.
  start=$(date +%s%3N)
  # The run as a whole: one scenario's limit, and a few seconds for each
  # (they take well under one); a scenario cut short by it fails.
  timeout -k 5 $((TMO + 5 * ${#SCENARIOS[@]})) "${SUITE[@]}" server \
    --url "$URL" --suite all -o "$OUT/run" "${extra[@]}" "${PASS_THROUGH[@]}" \
    >"$OUT/logs/suite.log" 2>&1 </dev/null
  rc=$?
  end=$(date +%s%3N)
  declare -A found=()
  for s in "${SCENARIOS[@]}"; do
    for d in "$OUT/run/server-$s-"*; do
      [[ "$d" =~ /server-"$s"-[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}-[0-9]{2}-[0-9]{2}-[0-9]{3}Z$ ]] || continue
      found[$s]="$d"
    done
  done
  # Seconds of a scenario: from its start to the next one's (or the run's end).
  starts=()
  for s in "${!found[@]}"; do starts+=("$(start_ms "${found[$s]}")"); done
  mapfile -t starts < <(printf '%s\n' "${starts[@]}" | sort -n)
  for s in "${SCENARIOS[@]}"; do
    sub="$(scenario_dir "$s")"
    if [ -z "${found[$s]:-}" ]; then
      printf '%s\t%s\t0.000\t%s\n' "$s" "$([ "$rc" = 0 ] && echo 1 || echo "$rc")" "$sub" >> "$OUT/manifest.tsv"
      printf '  %-40s no results\n' "$s"
      continue
    fi
    mkdir -p "$OUT/scenarios/$sub" && mv "${found[$s]}" "$OUT/scenarios/$sub/"
    # A scenario whose results the run's end cut short has no checks: it
    # failed with the run's exit code (124: timed out).
    code=0
    [ -f "$OUT/scenarios/$sub/$(basename "${found[$s]}")/checks.json" ] || code="$rc"
    from="$(start_ms "${found[$s]}")" to="$end"
    for t in "${starts[@]}"; do [ "$t" -gt "$from" ] && { to="$t"; break; }; done
    ms=$(( to > from ? to - from : 0 ))
    printf '%s\t%s\t%d.%03d\t%s\n' "$s" "$code" $((ms / 1000)) $((ms % 1000)) "$sub" >> "$OUT/manifest.tsv"
    printf '  %-40s ran\n' "$s"
  done
  echo "  (one process of the suite: exit $rc, $(( (end - start) / 1000 )).$(printf '%03d' $(( (end - start) % 1000 ))) s; its output: $OUT/logs/suite.log)"
  echo
  timeout 60 node "$SUITE_DIR/summarize.mjs" "$OUT"
  exit $?
fi

for s in "${SCENARIOS[@]}"; do
  sub="$(scenario_dir "$s")"
  start=$(date +%s%N)
  # -k: if the CLI ignores SIGTERM, SIGKILL it 5 s later.
  timeout -k 5 "$TMO" "${SUITE[@]}" server \
    --url "$URL" --scenario "$s" -o "$OUT/scenarios/$sub" "${extra[@]}" "${PASS_THROUGH[@]}" \
    >"$OUT/logs/$sub.log" 2>&1 </dev/null
  rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '%s\t%s\t%d.%03d\t%s\n' "$s" "$rc" $((ms / 1000)) $((ms % 1000)) "$sub" >> "$OUT/manifest.tsv"
  printf '  %-40s exit %s\n' "$s" "$rc"
done
echo

timeout 60 node "$SUITE_DIR/summarize.mjs" "$OUT"
