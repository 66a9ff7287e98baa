#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and kubelet at the
# version pinned in hack/k8s/go.mod into $K8S_BIN (default _output/k8s/bin).
# A binary that is already there is reused: the second run builds nothing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version="v1.36.3"
bin="${K8S_BIN:-$root/_output/k8s-$version/bin}"
mkdir -p "$bin"
commit="$(awk '/^k8s.io\/kubernetes /{print $2; exit}' "$root/hack/k8s/go.sum" | cut -c1-12)"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z \
 -X k8s.io/client-go/pkg/version.gitVersion=$version"
cd "$root/hack/k8s"
for name in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
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
