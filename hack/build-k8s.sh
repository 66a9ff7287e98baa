#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and kubelet at the
# version pinned in hack/k8s/go.mod into $K8S_BIN (default _output/k8s-<version>/bin), and
# kubectl too when the machine has none on its PATH (hack/lib.sh and the Makefile then find it
# there). A binary that is already there is reused: the second run builds nothing. A fresh
# clone (CI's) has no _output: every binary built is also kept per user, under a key of all
# that goes into it (hack/k8s/go.mod and go.sum, the flags, the Go version), and a fresh clone
# copies it from there instead of linking it again (some 40 s for the four on 2 cores).
#
# The flags are depwatch's own (static, -trimpath, as the Makefile sets them): the packages
# both compile (client-go, apimachinery, ...; hack/k8s/go.mod keeps their versions equal) are
# then compiled once on a fresh machine and shared through the Go build cache.
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
export CGO_ENABLED=0
flags=(-trimpath)
key="$({ cat go.mod go.sum; echo "$ldflags ${flags[*]} CGO_ENABLED=$CGO_ENABLED"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-16)"
cache="${DEPWATCH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/depwatch}/k8s-$version-$key"
names=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
command -v kubectl >/dev/null || names+=(kubectl)
# Binaries built from another hack/k8s/go.mod or with other flags are stale.
if [[ -e "$bin/kube-apiserver" && "$(cat "$bin/.key" 2>/dev/null)" != "$key" ]]; then
  echo "build-k8s: the binaries in $bin were built from another go.mod or with other flags: replacing them"
  for name in "${names[@]}"; do rm -f "$bin/$name"; done
fi
for name in "${names[@]}"; do
  if [[ -x "$bin/$name" ]]; then
    echo "build-k8s: $name $version already built at $bin/$name, reusing it"
    continue
  fi
  if [[ -x "$cache/$name" ]] && cp "$cache/$name" "$bin/$name.tmp"; then
    mv "$bin/$name.tmp" "$bin/$name"
    echo "build-k8s: $name $version copied from $cache (built there by an earlier run)"
    continue
  fi
  echo "build-k8s: building $name $version (cold build: minutes)"
  start=$SECONDS
  go build "${flags[@]}" -ldflags "$ldflags" -o "$bin/$name.tmp" "k8s.io/kubernetes/cmd/$name"
  mv "$bin/$name.tmp" "$bin/$name"
  echo "build-k8s: $name built in $((SECONDS - start))s"
  # Kept for the next fresh clone; a full disk or an unwritable home only costs the next one
  # a build.
  if mkdir -p "$cache" 2>/dev/null && cp "$bin/$name" "$cache/$name.tmp.$$" 2>/dev/null; then
    mv "$cache/$name.tmp.$$" "$cache/$name"
  else
    rm -f "$cache/$name.tmp.$$"
  fi
done
echo "$key" >"$bin/.key"
