#!/usr/bin/env bash
# Runs every test: installs the pinned npm packages the interop test drives
# (the official TypeScript SDK client), then the Go tests with the race
# detector. Needs Go, and Node.js 20+ with npm for the interop test.
set -euo pipefail
cd "$(dirname "$0")/.."
# One place for the npm packages, shared by the install and the test, even
# where HOME is not set.
export TOOLWIRE_NPM_DIR="${TOOLWIRE_NPM_DIR:-${HOME:-/tmp}/.cache/toolwire-npm}"
scripts/npm-deps.sh >/dev/null
go test -race -count=1 ./...
