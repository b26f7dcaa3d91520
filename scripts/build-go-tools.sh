#!/usr/bin/env bash
# Builds the Go tools the e2e tests run, once, into a cache outside the work tree:
#   kube-apiserver, kubectl (k8s.io/kubernetes) and etcd (go.etcd.io/etcd/server/v3) from tools/k8s-bin,
#   helm v3, the reference rate limit service (envoyproxy/ratelimit service_cmd + client_cmd), h2spec
#   (the HTTP/2 conformance tool, from tools/h2spec), eg-check (Envoy Gateway's API types, from
#   tools/eg-check) and istio-check (Istio's EnvoyFilter type, from tools/istio-check).
# Everything comes from the Go module proxy. A tool is built only when its binary is missing, so a second run
# is a few checks. GOPATH/GOCACHE/GOMODCACHE stay at Go's defaults. See docs/k8s-test-binaries.md.
#
# Layout: $CACHE/<tool>-<version>/<binaries>, $CACHE/bin/<binary> -> ../<tool>-<version>/<binary>, $CACHE/env.sh.
# Environment: RATELIMIT_TOOLS_CACHE (cache root), GO (go command), BUILD_GO_TOOLS_NICE (nice level, default 10).
set -euo pipefail

# Pins. Changing one builds into a new versioned directory; the old one stays until deleted by hand.
K8S_VERSION=v1.34.10 # k8s.io/kubernetes; tools/k8s-bin/go.mod must require the same (staging modules v0.34.10)
ETCD_VERSION=v3.6.4  # go.etcd.io/etcd/server/v3, the version k8s 1.34 links its etcd client at
HELM_VERSION=v3.22.0
# github.com/envoyproxy/ratelimit has no release tags since v1.4.0; this is the main branch at 2026-01-22
# (commit 3fb702589d36), resolved with `go list -m github.com/envoyproxy/ratelimit@latest`. Re-checked
# 2026-11-24: still the newest the module proxy serves (`go list -m -versions` lists only it; later
# commits, e.g. 6bcd4d2, answer 403 "This module version is not available"). The interop tests and the
# benchmark use this binary; README "Differences from the reference" says where main has moved past it.
RATELIMIT_VERSION=v1.4.1-0.20260122083618-3fb702589d36
# github.com/summerwind/h2spec: the proxy serves v1.5.0 and v2.2.1+incompatible (`go list -m -versions`,
# 2026-11-26); v2.2.1 is the newest release. tools/h2spec/go.mod must require the same.
H2SPEC_VERSION=v2.2.1+incompatible
# github.com/envoyproxy/gateway: the newest release the proxy serves (`go list -m -versions`, 2026-11-29).
# tools/eg-check/go.mod must require the same.
EG_VERSION=v1.9.1
# istio.io/api: the newest release the proxy serves (`go list -m -versions`, 2026-11-29).
# tools/istio-check/go.mod must require the same.
ISTIO_API_VERSION=v1.32.0

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${RATELIMIT_TOOLS_CACHE:-$HOME/.cache/ratelimit-ts-tools}"
NICE_LEVEL="${BUILD_GO_TOOLS_NICE:-10}"

GO="${GO:-}"
if [ -z "$GO" ]; then
  if command -v go >/dev/null; then GO="$(command -v go)"
  elif [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go
  else echo "build-go-tools: no go command found (set GO=/path/to/go)" >&2; exit 1
  fi
fi
export CGO_ENABLED=0
export GOTOOLCHAIN=local # never download a toolchain: only the module proxy is reachable

K8S_DIR="$CACHE/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
HELM_DIR="$CACHE/helm-$HELM_VERSION"
RL_DIR="$CACHE/ratelimit-$RATELIMIT_VERSION"
H2SPEC_DIR="$CACHE/h2spec-$H2SPEC_VERSION"
# eg-check is our own source: its cache entry changes with it.
EG_SRC_HASH="$(cat "$ROOT/tools/eg-check/main.go" "$ROOT/tools/eg-check/go.mod" "$ROOT/tools/eg-check/go.sum" | sha256sum | cut -c1-12)"
EG_DIR="$CACHE/eg-check-$EG_VERSION-$EG_SRC_HASH"
ISTIO_DIR="$CACHE/istio-check-$ISTIO_API_VERSION"
mkdir -p "$CACHE" "$CACHE/bin"

# One build at a time per cache: a second caller waits instead of compiling the same thing again.
exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  echo "build-go-tools: another build is running in $CACHE; waiting for it"
  flock 9
fi

log() { echo "build-go-tools: $*"; }
run() { nice -n "$NICE_LEVEL" "$@"; }
built=0

# build_one <label> <output file> <command...>: runs the command, which must write <output file>.tmp,
# then renames it into place so an interrupted build never leaves a half-written binary behind.
build_one() {
  local label="$1" out="$2"
  shift 2
  if [ -x "$out" ]; then
    log "$label: cached ($out)"
    return 0
  fi
  mkdir -p "$(dirname "$out")"
  log "$label: building ..."
  local start=$SECONDS
  rm -f "$out.tmp"
  if ! "$@"; then
    rm -f "$out.tmp"
    log "$label: FAILED after $((SECONDS - start)) s"
    exit 1
  fi
  mv -f "$out.tmp" "$out"
  log "$label: built in $((SECONDS - start)) s -> $out"
  built=$((built + 1))
}

# go install writes to GOBIN; install into a scratch GOBIN and move the binary to <out>.tmp.
go_install() {
  local pkg="$1" name="$2" out="$3"
  shift 3
  local gobin
  gobin="$(mktemp -d "$CACHE/.gobin.XXXXXX")"
  if GOBIN="$gobin" run "$GO" install -trimpath "$@" "$pkg"; then
    mv -f "$gobin/$name" "$out.tmp"
    rm -rf "$gobin"
  else
    rm -rf "$gobin"
    return 1
  fi
}

total_start=$SECONDS
log "cache $CACHE, $("$GO" version)"

# --- Kubernetes control plane (tools/k8s-bin) ---
K8S_MINOR="${K8S_VERSION#v1.}"
K8S_MINOR="${K8S_MINOR%%.*}"
K8S_LDFLAGS="-s -w \
 -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$K8S_MINOR \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=$K8S_MINOR \
 -X k8s.io/client-go/pkg/version.gitTreeState=clean"
if ! grep -q "k8s.io/kubernetes $K8S_VERSION" "$ROOT/tools/k8s-bin/go.mod" ||
  ! grep -q "go.etcd.io/etcd/server/v3 $ETCD_VERSION" "$ROOT/tools/k8s-bin/go.mod"; then
  log "tools/k8s-bin/go.mod does not pin k8s.io/kubernetes $K8S_VERSION and etcd $ETCD_VERSION" >&2
  exit 1
fi
k8s_build() {
  (cd "$ROOT/tools/k8s-bin" && run "$GO" build -trimpath "$@")
}
build_one "etcd $ETCD_VERSION" "$K8S_DIR/etcd" \
  k8s_build -ldflags "-s -w" -o "$K8S_DIR/etcd.tmp" ./etcd
build_one "kube-apiserver $K8S_VERSION" "$K8S_DIR/kube-apiserver" \
  k8s_build -ldflags "$K8S_LDFLAGS" -o "$K8S_DIR/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
build_one "kubectl $K8S_VERSION" "$K8S_DIR/kubectl" \
  k8s_build -ldflags "$K8S_LDFLAGS" -o "$K8S_DIR/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl

# --- helm: a plain go install works (no replace directives in its go.mod) ---
build_one "helm $HELM_VERSION" "$HELM_DIR/helm" \
  go_install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" helm "$HELM_DIR/helm" \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"

# --- reference rate limit service and its client ---
build_one "ratelimit service_cmd $RATELIMIT_VERSION" "$RL_DIR/service_cmd" \
  go_install "github.com/envoyproxy/ratelimit/src/service_cmd@$RATELIMIT_VERSION" service_cmd "$RL_DIR/service_cmd" -ldflags "-s -w"
build_one "ratelimit client_cmd $RATELIMIT_VERSION" "$RL_DIR/client_cmd" \
  go_install "github.com/envoyproxy/ratelimit/src/client_cmd@$RATELIMIT_VERSION" client_cmd "$RL_DIR/client_cmd" -ldflags "-s -w"

# --- h2spec, through tools/h2spec (its imports pinned there; it has no go.mod of its own) ---
if ! grep -q "github.com/summerwind/h2spec $H2SPEC_VERSION" "$ROOT/tools/h2spec/go.mod"; then
  log "tools/h2spec/go.mod does not pin github.com/summerwind/h2spec $H2SPEC_VERSION" >&2
  exit 1
fi
h2spec_build() {
  (cd "$ROOT/tools/h2spec" && run "$GO" build -trimpath "$@")
}
H2SPEC_SEMVER="${H2SPEC_VERSION#v}" # --version prints it (the source says 2.0.0)
build_one "h2spec $H2SPEC_VERSION" "$H2SPEC_DIR/h2spec" \
  h2spec_build -ldflags "-s -w -X main.VERSION=${H2SPEC_SEMVER%%+*}" -o "$H2SPEC_DIR/h2spec.tmp" \
  github.com/summerwind/h2spec/cmd/h2spec

# --- eg-check: Envoy Gateway's API types with strict decoding, for the Envoy Gateway examples ---
if ! grep -q "github.com/envoyproxy/gateway $EG_VERSION" "$ROOT/tools/eg-check/go.mod"; then
  log "tools/eg-check/go.mod does not pin github.com/envoyproxy/gateway $EG_VERSION" >&2
  exit 1
fi
eg_build() {
  (cd "$ROOT/tools/eg-check" && run "$GO" build -trimpath "$@")
}
build_one "eg-check (envoyproxy/gateway $EG_VERSION)" "$EG_DIR/eg-check" \
  eg_build -ldflags "-s -w" -o "$EG_DIR/eg-check.tmp" .

# --- istio-check: Istio's EnvoyFilter type with strict decoding, for the Istio example ---
if ! grep -q "istio.io/api $ISTIO_API_VERSION" "$ROOT/tools/istio-check/go.mod"; then
  log "tools/istio-check/go.mod does not pin istio.io/api $ISTIO_API_VERSION" >&2
  exit 1
fi
istio_build() {
  (cd "$ROOT/tools/istio-check" && run "$GO" build -trimpath "$@")
}
build_one "istio-check (istio.io/api $ISTIO_API_VERSION)" "$ISTIO_DIR/istio-check" \
  istio_build -ldflags "-s -w" -o "$ISTIO_DIR/istio-check.tmp" .

# --- stable names: bin/ symlinks and env.sh ---
link() { ln -sfn "$1" "$CACHE/bin/$(basename "$1")"; }
for f in etcd kube-apiserver kubectl; do link "$K8S_DIR/$f"; done
link "$HELM_DIR/helm"
link "$RL_DIR/service_cmd"
link "$RL_DIR/client_cmd"
link "$H2SPEC_DIR/h2spec"
link "$EG_DIR/eg-check"
link "$ISTIO_DIR/istio-check"
cat >"$CACHE/env.sh.tmp" <<EOF
# Written by scripts/build-go-tools.sh. Source it to put the test tools on PATH.
export RATELIMIT_TOOLS_CACHE="$CACHE"
export RATELIMIT_TOOLS_BIN="$CACHE/bin"
export K8S_ASSETS="$K8S_DIR"
export PATH="$CACHE/bin:\$PATH"
EOF
mv -f "$CACHE/env.sh.tmp" "$CACHE/env.sh"

log "done: $built built, total $((SECONDS - total_start)) s; binaries in $CACHE/bin (source $CACHE/env.sh)"
# Each binary proves it runs.
B="$CACHE/bin"
echo "  etcd:           $("$B/etcd" --version 2>&1 | head -1)"
echo "  kube-apiserver: $("$B/kube-apiserver" --version 2>&1 | head -1)"
echo "  kubectl:        $("$B/kubectl" version --client 2>&1 | head -1)"
echo "  helm:           $("$B/helm" version --short 2>&1 | head -1)"
echo "  service_cmd:    $RATELIMIT_VERSION ($(stat -L -c %s "$B/service_cmd") bytes)"
echo "  client_cmd:     $RATELIMIT_VERSION ($(stat -L -c %s "$B/client_cmd") bytes)"
echo "  h2spec:         $("$B/h2spec" --version 2>&1 | head -1)"
echo "  eg-check:       envoyproxy/gateway $EG_VERSION ($(stat -L -c %s "$B/eg-check") bytes)"
echo "  istio-check:    istio.io/api $ISTIO_API_VERSION ($(stat -L -c %s "$B/istio-check") bytes)"
