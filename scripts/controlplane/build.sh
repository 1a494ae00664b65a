#!/usr/bin/env bash
# Build the local control plane from Go modules, cached outside the repository by version:
#   offhours-kube       kube-apiserver, kube-controller-manager, kube-scheduler, etcd and kubectl in one binary
#   kwok                fake nodes with nvidia.com/gpu capacity
#   workflow-controller the Argo Workflows controller
# Prints the bin directory. A warm cache rebuilds nothing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=/dev/null
source "$here/versions.env"
cache="${OFFHOURS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/offhours}/controlplane"
key="k8s-${KUBERNETES_VERSION}_kwok-${KWOK_VERSION}_argo-${ARGO_VERSION}_$(cat "$here/kube/go.mod" "$here/kube/main.go" | sha256sum | cut -c1-12)"
bin="$cache/$key/bin"
mkdir -p "$bin"
export CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"
ldflags_common="-s -w"

if [ ! -x "$bin/offhours-kube" ]; then
  minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  ver="-X k8s.io/component-base/version.gitVersion=${KUBERNETES_VERSION} -X k8s.io/component-base/version.gitMajor=1"
  ver="$ver -X k8s.io/component-base/version.gitMinor=${minor} -X k8s.io/component-base/version.gitTreeState=clean"
  ver="$ver -X k8s.io/client-go/pkg/version.gitVersion=${KUBERNETES_VERSION} -X k8s.io/client-go/pkg/version.gitMajor=1"
  ver="$ver -X k8s.io/client-go/pkg/version.gitMinor=${minor}"
  (cd "$here/kube" && go build -ldflags "$ldflags_common $ver" -o "$bin/offhours-kube.tmp" . && mv "$bin/offhours-kube.tmp" "$bin/offhours-kube")
fi
if [ ! -x "$bin/kwok" ]; then
  GOBIN="$bin" go install -ldflags "$ldflags_common" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
fi
if [ ! -x "$bin/workflow-controller" ]; then
  GOBIN="$bin" go install -ldflags "$ldflags_common" \
    "github.com/argoproj/argo-workflows/v4/cmd/workflow-controller@${ARGO_VERSION}"
fi
echo "$bin"
