#!/usr/bin/env bash
# Build the local control plane from Go modules, cached outside the repository by version:
#   offhours-kube       kube-apiserver, kube-controller-manager, kube-scheduler, etcd and kubectl in one binary
#   kwok                fake nodes with nvidia.com/gpu capacity
#   workflow-controller the Argo Workflows controller
#   argo                the Argo CLI (argo submit/list/get/logs)
#   kubectl             a two-line wrapper: offhours-kube kubectl "$@"
# Progress goes to stderr, one line per component with its elapsed time; the Go tool's own output
# goes to a log per component in the cache (shown when a build fails). Prints the bin directory.
# A warm cache rebuilds nothing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=/dev/null
source "$here/versions.env"
cache="${OFFHOURS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/offhours}/controlplane"
key="k8s-${KUBERNETES_VERSION}_kwok-${KWOK_VERSION}_argo-${ARGO_VERSION}_$(cat "$here/kube/go.mod" "$here/kube/main.go" | sha256sum | cut -c1-12)"
bin="$cache/$key/bin"
logs="$cache/$key/logs"
mkdir -p "$bin" "$logs"
export CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
ldflags_common="-s -w"
started=$SECONDS

# component NAME COMMAND...: build NAME unless bin/NAME exists, reporting its time; on failure, its log's tail.
component() {
  local name=$1; shift
  if [ -x "$bin/$name" ]; then
    echo "[build] $name: cached" >&2
    return
  fi
  local t0=$SECONDS
  echo "[build] $name: building (Go output in $logs/$name.log)" >&2
  if ! "$@" >"$logs/$name.log" 2>&1; then
    echo "[build] $name: FAILED after $((SECONDS - t0)) s; the end of $logs/$name.log:" >&2
    tail -n 25 "$logs/$name.log" >&2
    exit 1
  fi
  echo "[build] $name: built in $((SECONDS - t0)) s (total $((SECONDS - started)) s)" >&2
}

build_kube() {
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  local ver="-X k8s.io/component-base/version.gitVersion=${KUBERNETES_VERSION} -X k8s.io/component-base/version.gitMajor=1"
  ver="$ver -X k8s.io/component-base/version.gitMinor=${minor} -X k8s.io/component-base/version.gitTreeState=clean"
  ver="$ver -X k8s.io/client-go/pkg/version.gitVersion=${KUBERNETES_VERSION} -X k8s.io/client-go/pkg/version.gitMajor=1"
  ver="$ver -X k8s.io/client-go/pkg/version.gitMinor=${minor}"
  (cd "$here/kube" && go build -ldflags "$ldflags_common $ver" -o "$bin/offhours-kube.tmp" .)
  mv "$bin/offhours-kube.tmp" "$bin/offhours-kube"
}

# `go install .../v4/cmd/argo@v4.0.5` fails: ui/embed.go embeds ui/dist/app, which the module does not ship
# (the UI is built by yarn in Argo's release). The CLI does not serve the UI: build it from a copy of the
# module with a placeholder page there.
build_argo() {
  local dir src
  dir="$(cd "$cache" && go mod download -json "github.com/argoproj/argo-workflows/v4@${ARGO_VERSION}" |
         sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [ -d "$dir" ] || { echo "go mod download did not give a module folder" >&2; return 1; }
  src="$(mktemp -d)"
  cp -r "$dir/." "$src" && chmod -R u+w "$src"
  mkdir -p "$src/ui/dist/app" && echo "placeholder: the argo CLI of offhours' local control plane serves no UI" \
    >"$src/ui/dist/app/index.html"
  local status=0
  (cd "$src" && go build -ldflags "$ldflags_common -X github.com/argoproj/argo-workflows/v4.version=${ARGO_VERSION}" \
     -o "$bin/argo.tmp" ./cmd/argo) || status=$?
  rm -rf "$src"
  [ "$status" = 0 ] && mv "$bin/argo.tmp" "$bin/argo"
}

kubectl_wrapper() {
  printf '#!/bin/sh\nexec "%s/offhours-kube" kubectl "$@"\n' "$bin" >"$bin/kubectl.tmp"
  chmod +x "$bin/kubectl.tmp" && mv "$bin/kubectl.tmp" "$bin/kubectl"
}

component offhours-kube build_kube
component kwok env GOBIN="$bin" go install -ldflags "$ldflags_common" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
component workflow-controller env GOBIN="$bin" go install -ldflags "$ldflags_common" \
  "github.com/argoproj/argo-workflows/v4/cmd/workflow-controller@${ARGO_VERSION}"
component argo build_argo
component kubectl kubectl_wrapper
echo "[build] control plane binaries ready in $((SECONDS - started)) s" >&2
echo "$bin"
