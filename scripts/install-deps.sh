#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine, and nothing that is already there.
# Debian packages via apt-get; Go-built tools (kube-apiserver, etcd, kubectl, the reference ratelimit
# service) are built once into a cache outside the work tree by scripts/build-go-tools.sh.
set -euo pipefail

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-sentinel >/dev/null || need+=(redis-sentinel)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v memcached >/dev/null || need+=(memcached)
command -v openssl >/dev/null || need+=(openssl)
command -v chromium >/dev/null || need+=(chromium) # papers/ browser test (playwright-core drives it)
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${need[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Debian starts services on install; the tests start their own on free ports and never use these.
for svc in redis-server redis-sentinel memcached; do
  if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
  fi
done

# Node.js 24 LTS from the npm registry when the machine's node is older than 22 (see install-node.sh).
bash scripts/install-node.sh

if [ -f scripts/build-go-tools.sh ]; then
  bash scripts/build-go-tools.sh
fi
