#!/usr/bin/env bash
# Runs every Fuzz* target in the module for a bounded budget each ($1, default 20000x).
# New failing inputs land in the package's testdata/fuzz and fail the run.
#
# The default budget is a count of executions, not a duration: with a duration, Go 1.26's
# fuzz coordinator can report its own deadline as a failure ("context deadline exceeded",
# no failing input written; golang/go#75804, fixed in Go 1.27). A count has no deadline to
# race. A duration (10s) still works for exploring by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-20000x}"
for pkg in $(go list ./...); do
  dir="$(go list -f '{{.Dir}}' "$pkg")"
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "fuzz: $pkg $target for $fuzztime"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
  done
done
