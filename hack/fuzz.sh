#!/usr/bin/env bash
# Runs every Fuzz* target in the module for a bounded time each ($1, default 10s).
# New failing inputs land in the package's testdata/fuzz and fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-10s}"
for pkg in $(go list ./...); do
  dir="$(go list -f '{{.Dir}}' "$pkg")"
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "fuzz: $pkg $target for $fuzztime"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
  done
done
