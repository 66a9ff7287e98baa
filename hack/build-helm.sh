#!/usr/bin/env bash
# Builds the helm CLI pinned in hack/helm/go.mod (its `tool` line) into $HELM_BIN (default
# _output/bin/helm) and prints the binary's path as its last line. `make lint` uses it to lint
# and render manifests/charts/depwatch, the unit tests compare that rendering with the
# kustomize base, and the e2e suite installs the chart with it.
#
# A binary that is already there is reused. Like hack/build-k8s.sh, every binary built is also
# kept per user under a key of all that goes into it (hack/helm/go.mod and go.sum, the flags,
# the Go version), so a fresh clone copies it instead of compiling helm again.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/hack/helm"
module="helm.sh/helm/v4"
version="$(go list -m -f '{{.Version}}' "$module")"
out="${HELM_BIN:-$root/_output/bin/helm}"
ldflags="-s -w -X $module/internal/version.version=$version -X $module/internal/version.gitTreeState=clean"
export CGO_ENABLED=0
flags=(-trimpath)
key="$({ cat go.mod go.sum; echo "$ldflags ${flags[*]} CGO_ENABLED=$CGO_ENABLED"; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-16)"
cache="${DEPWATCH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/depwatch}/helm-$version-$key"
mkdir -p "$(dirname "$out")"

if [[ -x $out && "$(cat "$out.key" 2>/dev/null)" == "$key" ]]; then
  echo "build-helm: helm $version already built at $out, reusing it" >&2
elif [[ -x $cache/helm ]] && cp "$cache/helm" "$out.tmp"; then
  mv "$out.tmp" "$out"
  echo "$key" >"$out.key"
  echo "build-helm: helm $version copied from $cache (built there by an earlier run)" >&2
else
  echo "build-helm: building helm $version from $module (cold build: minutes)" >&2
  start=$SECONDS
  go build "${flags[@]}" -ldflags "$ldflags" -o "$out.tmp" "$module/cmd/helm"
  mv "$out.tmp" "$out"
  echo "$key" >"$out.key"
  echo "build-helm: helm built in $((SECONDS - start))s" >&2
  # Kept for the next fresh clone; a full disk or an unwritable home only costs it a build.
  if mkdir -p "$cache" 2>/dev/null && cp "$out" "$cache/helm.tmp.$$" 2>/dev/null; then
    mv "$cache/helm.tmp.$$" "$cache/helm"
  else
    rm -f "$cache/helm.tmp.$$"
  fi
fi
echo "$out"
