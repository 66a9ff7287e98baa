#!/usr/bin/env bash
# Fails when a module that depwatch's static builds compile (the binary, the images, the e2e
# test binary) has another version in hack/k8s's build list than in depwatch's go.mod.
#
# Why it matters: the Kubernetes binaries of the local cluster and depwatch are built with the
# same flags (CGO_ENABLED=0, -trimpath), so on a fresh machine client-go, apimachinery and
# their dependencies compile once for both, but only while every shared module has one
# version. A drift costs minutes of compiling on every fresh machine, never correctness.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
fmt='{{with .Module}}{{if not .Main}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}'
ours="$( { go list -deps -tags e2e -f "$fmt" ./...; go list -deps -test -tags e2e -f "$fmt" ./test/e2e; } | sed '/^$/d' | sort -u)"
theirs="$(cd hack/k8s && go list -m -f '{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}' all | sort -u)"
drift="$(join <(echo "$ours") <(echo "$theirs") | awk '$2 != $3 {printf "  %s: %s in go.mod, %s in hack/k8s/go.mod\n", $1, $2, $3}')"
if [[ -n "$drift" ]]; then
  echo "check-k8s-modules: these modules have another version in hack/k8s/go.mod than in go.mod:"
  echo "$drift"
  echo "Require depwatch's versions there (cd hack/k8s && go mod edit -require=MODULE@VERSION && go mod tidy)"
  echo "so that a fresh machine compiles the packages both use once."
  exit 1
fi
