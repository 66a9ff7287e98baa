#!/usr/bin/env bash
# make test: lint and unit tests, then the e2e suite on a local cluster that is started here
# and always torn down (also on failure), with fuzzing beside it. Prints how long each stage
# took.
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

# The cluster starts while lint and the unit tests run: most of its start is waiting (for
# etcd, the API server, the node), and on a fresh machine its Kubernetes build overlaps the
# Go tests' own compiling. Its output is kept apart and shown when the e2e stage needs it.
cluster_log=_output/cluster-up.log
cluster_pid=
teardown() {
  local rc=$?
  if [[ -n $cluster_pid ]] && kill -0 "$cluster_pid" 2>/dev/null; then
    wait "$cluster_pid" || true
  fi
  if [[ -n $fuzz_pid ]]; then
    stage fuzz fuzz_done || true
  fi
  stage cluster-down make --no-print-directory cluster-down || true
  summary
  exit "$rc"
}
cluster_ready() {
  local rc=0
  wait "$cluster_pid" || rc=$?
  cluster_pid=
  cat "$cluster_log"
  return "$rc"
}

# fuzz_done waits for the background fuzzing and shows its log.
fuzz_log=_output/fuzz.log
fuzz_pid=
fuzz_done() {
  local rc=0
  wait "$fuzz_pid" || rc=$?
  fuzz_pid=
  cat "$fuzz_log"
  echo "fuzz: ran $(cat "$fuzz_log.took" 2>/dev/null || echo '?')s, beside e2e"
  return "$rc"
}

trap teardown EXIT
mkdir -p _output
echo "==> [cluster-up] make cluster-up, in the background (log: $cluster_log)"
make --no-print-directory cluster-up >"$cluster_log" 2>&1 &
cluster_pid=$!
cluster_started=$SECONDS
# The Go tests yield to the cluster's start, so its waits (API server 90 s, node 120 s) hold.
stage lint nice -n 10 make --no-print-directory lint
stage unit nice -n 10 make --no-print-directory unit
stage cluster-up cluster_ready
report[-1]="${report[-1]}  (started $((SECONDS - cluster_started))s ago, beside the stages above)"
# Fuzzing runs beside the e2e suite, at the lowest priority: it has no deadline to miss, and
# it takes what the suite leaves idle, which is most of the two cores while the quiet tests
# run first (they wait on pods and probes, one group at a time).
echo "==> [fuzz] make fuzz, in the background beside e2e at nice 19 (log: $fuzz_log)"
(
  start=$SECONDS
  rc=0
  nice -n 19 make --no-print-directory fuzz >"$fuzz_log" 2>&1 || rc=$?
  echo "$((SECONDS - start))" >"$fuzz_log.took"
  exit "$rc"
) &
fuzz_pid=$!
stage e2e make --no-print-directory e2e
stage fuzz fuzz_done
report[-1]="${report[-1]}  (the wait after e2e; fuzzing ran $(cat "$fuzz_log.took" 2>/dev/null || echo '?')s beside it)"
