#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and kubelet at the
# version pinned in hack/k8s/go.mod into $K8S_BIN (default _output/k8s-<version>/bin), and
# kubectl too when the machine has none on its PATH (hack/lib.sh and the Makefile then find it
# there). A binary that is already there is reused: the second run builds nothing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="v1.36.3"
bin="${K8S_BIN:-$root/_output/k8s-$version/bin}"
mkdir -p "$bin"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z \
 -X k8s.io/client-go/pkg/version.gitVersion=$version"
cd "$root/hack/k8s"
names=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
command -v kubectl >/dev/null || names+=(kubectl)
for name in "${names[@]}"; do
  if [[ -x "$bin/$name" ]]; then
    echo "build-k8s: $name $version already built at $bin/$name, reusing it"
    continue
  fi
  echo "build-k8s: building $name $version (cold build: minutes)"
  start=$SECONDS
  go build -trimpath -ldflags "$ldflags" -o "$bin/$name.tmp" "k8s.io/kubernetes/cmd/$name"
  mv "$bin/$name.tmp" "$bin/$name"
  echo "build-k8s: $name built in $((SECONDS - start))s"
done
