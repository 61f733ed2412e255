#!/usr/bin/env bash
# Runs every test: installs the pinned npm packages the tests drive (the
# official TypeScript SDK client for the interop test, the reference
# everything and filesystem servers for the client's tasks and roots tests,
# the official MCP conformance suite for the gateway's conformance test),
# then the Go tests with the race detector. Needs Go, and Node.js 20+ with
# npm for the npm packages.
set -euo pipefail
cd "$(dirname "$0")/.."
# One place for the npm packages, shared by the install and the test, even
# where HOME is not set.
export TOOLWIRE_NPM_DIR="${TOOLWIRE_NPM_DIR:-${HOME:-/tmp}/.cache/toolwire-npm}"
scripts/npm-deps.sh >/dev/null
scripts/conformance.sh --install-only >/dev/null
# Most tests wait on child processes and sockets more than they compute, so
# eight run at once per package (the default is one per core): the suite
# used 1.2 of the 2 cores with four.
go test -race -count=1 -parallel 8 ./...
