#!/usr/bin/env bash
# Takes a picture of each page of the operator console for docs/console.md:
# a console with sample data (the demo server, a server that fails, policy
# rules, callers with sessions, a limit hit, calls audited and waiting for
# an operator) in a headless Chromium, 1366x820, written as PNGs to
# docs/console/ (or the directory given).
#
#   scripts/console-screenshots.sh              # docs/console/*.png
#   scripts/console-screenshots.sh /tmp/shots
#
# Needs chromium (/usr/bin/chromium); nothing is fetched from the network.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/console}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
TOOLWIRE_CONSOLE_SCREENSHOTS="$out" CI=true go test -count=1 -run '^TestScreenshots$' ./console/
ls -1 "$out"/*.png
