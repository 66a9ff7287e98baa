#!/usr/bin/env bash
# Stops one process of the local cluster and starts it again with the same command line, the
# way an operator restarts a control-plane component. The e2e fault tests use it to restart
# kube-apiserver while depwatch's Jobs and coordinator run.
#
# Usage: hack/restart-component.sh COMPONENT [DOWN_SECONDS]
#   COMPONENT     one of the cluster's components (kube-apiserver, kube-controller-manager, ...)
#   DOWN_SECONDS  how long it stays stopped before it is started again (default 0)
# Waits for kube-apiserver's /readyz when COMPONENT is kube-apiserver.
set -euo pipefail
LOG_PREFIX=restart
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"

name="${1:-}"
down="${2:-0}"
[[ " ${COMPONENTS[*]} " == *" $name "* ]] || die "COMPONENT=\"$name\": must be one of ${COMPONENTS[*]}"
[[ $down =~ ^[0-9]+$ ]] || die "DOWN_SECONDS=\"$down\": must be a whole number of seconds"
pid_alive "$name" || die "$name is not running (no live pid in $PID_DIR/$name.pid)"

pidf="$PID_DIR/$name.pid"
pid=$(<"$pidf")
mapfile -d '' argv <"/proc/$pid/cmdline"
log "stopping $name (pid $pid)"
kill -TERM "$pid"
deadline=$((SECONDS + 10))
while [[ -d /proc/$pid ]] && ((SECONDS < deadline)); do sleep 0.1; done
if [[ -d /proc/$pid ]]; then
  # kube-apiserver drains long-running requests (watches) on SIGTERM for up to a minute.
  log "$name still running 10s after SIGTERM; killing it"
  kill -KILL "$pid" || true
  while [[ -d /proc/$pid ]]; do sleep 0.1; done
fi
: >"$pidf"
sleep "$down"

log "starting $name again"
# Inherited descriptors other than 0-2 are closed first: the caller may hold a lock (flock)
# or a pipe that a long-lived component must not keep open after this script ends.
setsid bash -c 'for fd in /proc/$$/fd/*; do n=${fd##*/}; ((n > 2)) && eval "exec $n>&-"; done; echo $$ >"$0"; exec "$@"' \
  "$pidf" "${argv[@]}" </dev/null >>"$LOG_DIR/$name.log" 2>&1 &
for _ in $(seq 50); do [[ -s $pidf ]] && break; sleep 0.1; done
[[ -s $pidf ]] || die "$name did not start; see $LOG_DIR/$name.log"

if [[ $name == kube-apiserver ]]; then
  deadline=$((SECONDS + 60))
  while ((SECONDS < deadline)); do
    if kubectl --kubeconfig "$KUBECONFIG_FILE" --request-timeout=2s get --raw /readyz >/dev/null 2>&1; then
      log "kube-apiserver ready again"
      exit 0
    fi
    pid_alive "$name" || die "kube-apiserver exited after the restart; see $LOG_DIR/$name.log"
    sleep 0.2
  done
  die "kube-apiserver not ready 60s after the restart; see $LOG_DIR/$name.log"
fi
log "$name started (pid $(<"$pidf"))"
