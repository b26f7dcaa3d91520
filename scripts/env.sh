# Source this (`. scripts/env.sh`) to put the tools that scripts/install-deps.sh cached on PATH:
# a supported Node.js (when the machine's is too old), kube-apiserver, etcd, kubectl, helm and the
# reference service. Safe to source before install-deps has run: it only adds what exists.
_rl_cache="${RATELIMIT_TOOLS_CACHE:-$HOME/.cache/ratelimit-ts-tools}"
if [ -f "$_rl_cache/env.sh" ]; then
  . "$_rl_cache/env.sh"
elif [ -d "$_rl_cache/bin" ]; then
  export PATH="$_rl_cache/bin:$PATH"
fi
unset _rl_cache
