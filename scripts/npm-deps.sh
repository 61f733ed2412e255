#!/usr/bin/env bash
# Install the npm packages the tests use (the TypeScript SDK, the reference
# everything and filesystem servers), at the exact versions pinned in
# interop/ts/package.json, into one shared directory. Idempotent: npm runs
# only when a pinned version is missing, so a second run takes a second.
#
# usage: scripts/npm-deps.sh
# env: TOOLWIRE_NPM_DIR   where to install (default $HOME/.cache/toolwire-npm);
#                         the tests look for node_modules there
#
# The directory and its lock are the ones scripts/conformance.sh uses (it
# pins the same @modelcontextprotocol/sdk), and packages are added the same
# way, with "npm install --save-exact NAME@VERSION", so the two scripts
# neither undo each other's packages nor run npm in the directory at once.
# Prints the directory on the last line of stdout. Exit 0 when every pinned
# version is installed, 2 otherwise.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MANIFEST="$ROOT/interop/ts/package.json"
NPM_DIR="${TOOLWIRE_NPM_DIR:-${HOME:-/tmp}/.cache/toolwire-npm}"

die() { echo "npm-deps.sh: $*" >&2; exit 2; }

for cmd in node npm timeout; do
  command -v "$cmd" >/dev/null || die "$cmd not found"
done
node_major="$(timeout 10 node -p 'process.versions.node.split(".")[0]')" || die "node does not run"
[ "$node_major" -ge 20 ] || die "node >= 20 required (have $(node --version))"

# NAME@VERSION for each dependency; anything but an exact version is refused.
mapfile -t PACKAGES < <(timeout 10 node -e '
  const deps = require(process.argv[1]).dependencies ?? {};
  for (const [name, v] of Object.entries(deps)) {
    if (!/^\d+\.\d+\.\d+$/.test(v)) { console.error(`${name}: "${v}" is not an exact version`); process.exit(1); }
    console.log(`${name}@${v}`);
  }' "$MANIFEST") || die "cannot read the pinned versions from $MANIFEST"
[ ${#PACKAGES[@]} -gt 0 ] || die "$MANIFEST pins no dependencies"

installed_version() {  # NAME -> version installed in NPM_DIR, or nothing
  timeout 10 node -e 'try { console.log(require(process.argv[1]).version) } catch {}' \
    "$NPM_DIR/node_modules/$1/package.json" 2>/dev/null
}
missing_packages() {
  local spec
  for spec in "${PACKAGES[@]}"; do
    [ "$(installed_version "${spec%@*}")" = "${spec##*@}" ] || echo "$spec"
  done
}
install_packages() {
  local missing
  mapfile -t missing < <(missing_packages)
  if [ ${#missing[@]} -eq 0 ]; then
    echo "already installed: ${PACKAGES[*]}" >&2
    return 0
  fi
  echo "installing into $NPM_DIR: ${missing[*]}" >&2
  [ -f "$NPM_DIR/package.json" ] || printf '{ "name": "toolwire-npm", "private": true }\n' > "$NPM_DIR/package.json"
  local start=$SECONDS
  # npm may warn EBADENGINE on Node 20 (some dependencies ask for Node >= 22); harmless.
  ( cd "$NPM_DIR" && timeout -k 10 600 npm install --no-audit --no-fund --save-exact --loglevel=error "${missing[@]}" ) >&2 \
    || die "npm install failed"
  mapfile -t missing < <(missing_packages)
  [ ${#missing[@]} -eq 0 ] || die "did not install: ${missing[*]}"
  echo "installed in $((SECONDS - start))s: ${PACKAGES[*]}" >&2
}

mkdir -p "$NPM_DIR" || die "cannot create $NPM_DIR"
if command -v flock >/dev/null; then
  exec 9>"$NPM_DIR/.install.lock"
  flock -w 660 9 || die "timed out waiting for another install in $NPM_DIR"
  install_packages
  flock -u 9; exec 9>&-
else
  install_packages
fi
echo "$NPM_DIR"
