#!/usr/bin/env bash
# make test: lint, unit tests, fuzz, then the e2e suite on a local cluster that is started
# here and always torn down (also on failure). Prints how long each stage took.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -a report=()
stage() {
  local name="$1"; shift
  local start=$SECONDS
  echo "==> [$name] $*"
  if "$@"; then
    report+=("$(printf '%-14s %5ss  ok' "$name" "$((SECONDS - start))")")
  else
    local rc=$?
    report+=("$(printf '%-14s %5ss  FAILED (exit %s)' "$name" "$((SECONDS - start))" "$rc")")
    return "$rc"
  fi
}
summary() {
  echo
  echo "==> stage timings"
  printf '  %s\n' "${report[@]}"
}

teardown() {
  local rc=$?
  stage cluster-down make --no-print-directory cluster-down || true
  summary
  exit "$rc"
}

stage lint make --no-print-directory lint
stage unit make --no-print-directory unit
stage fuzz make --no-print-directory fuzz
trap teardown EXIT
stage cluster-up make --no-print-directory cluster-up
stage e2e make --no-print-directory e2e
