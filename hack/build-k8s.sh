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
#
# K8S_VERSION=vX.Y.Z builds another version (make test-k8s): its module is written to
# _output/k8s-mod-<version> from hack/k8s's (the same staging modules at v0.Y.Z) and tidied there
# once; it shares no compiled packages with depwatch's builds, so its cold build is the longest.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
ROOT="$root"
# shellcheck source=hack/lib.sh
source "$root/hack/lib.sh"
pinned="$(pinned_k8s_version)"
version="$K8S_VERSION"
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] ||
  { echo "build-k8s: K8S_VERSION=$version is not a Kubernetes release (vX.Y.Z, e.g. v1.35.4)" >&2; exit 2; }
minor="${BASH_REMATCH[1]}"
bin="${K8S_BIN:-$root/_output/k8s-$version/bin}"
mkdir -p "$bin"
moddir="$root/hack/k8s"
if [[ $version != "$pinned" ]]; then
  moddir="$root/_output/k8s-mod-$version"
  if [[ ! -s $moddir/go.sum ]]; then
    echo "build-k8s: writing the module of Kubernetes $version in $moddir (go mod tidy: a minute or more)"
    rm -rf "$moddir" && mkdir -p "$moddir"
    cp "$root/hack/k8s/tools.go" "$moddir/"
    staging="v0.$minor.${BASH_REMATCH[2]}"
    {
      echo "module github.com/depwatch/depwatch/hack/k8s"
      echo
      echo "go $(go env GOVERSION | sed 's/^go//')"
      echo
      echo "require k8s.io/kubernetes $version"
      echo
      echo "replace ("
      awk '/=> k8s.io\// {print $1}' "$root/hack/k8s/go.mod" | sed "s|.*|\t& => & $staging|"
      echo ")"
    } >"$moddir/go.mod"
    (cd "$moddir" && go mod tidy) || { rm -f "$moddir/go.sum"; exit 1; }
  fi
fi
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z \
 -X k8s.io/client-go/pkg/version.gitVersion=$version"
cd "$moddir"
export CGO_ENABLED=0
flags=(-trimpath)
key="$({ cat go.mod go.sum; echo "$ldflags ${flags[*]} CGO_ENABLED=$CGO_ENABLED"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-16)"
cache="${DEPWATCH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/depwatch}/k8s-$version-$key"
names=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
command -v kubectl >/dev/null || names+=(kubectl)
# Binaries built from another go.mod or with other flags are stale.
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
