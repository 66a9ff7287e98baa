#!/usr/bin/env bash
# Stops the local cluster that hack/cluster-up.sh started and removes its state.
# - stops exactly the recorded processes (_output/cluster/pids/*.pid): TERM, then KILL;
# - kills the pod containers and containerd-shims of *this* cluster's containerd (found by
#   its socket path on the shims' command lines), unmounts what the kubelet and containerd
#   mounted under _output/cluster and the pods' network namespaces, removes the CNI bridge;
# - removes _output/cluster. Keeps the built binaries (_output/k8s-*) and images.
# Safe to call twice: without a recorded cluster it does nothing.
set -euo pipefail
LOG_PREFIX=cluster-down
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"

if [[ ! -d $CLUSTER_DIR ]]; then
  log "no cluster recorded in $CLUSTER_DIR: nothing to do"
  exit 0
fi

# stop_pid NAME PID: TERM, wait up to 10 s, then KILL.
stop_pid() {
  local name=$1 pid=$2 i
  [[ -d /proc/$pid ]] || return 0
  log "stopping $name (pid $pid, $(cpu_seconds "$pid") s of CPU since it started)"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 100); do
    [[ -d /proc/$pid ]] || return 0
    # A zombie child of nobody we know still counts as gone.
    [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" == Z ]] && return 0
    sleep 0.1
  done
  log "$name (pid $pid) did not exit after TERM: KILL"
  kill -KILL "$pid" 2>/dev/null || true
  for i in $(seq 50); do [[ -d /proc/$pid ]] || return 0; sleep 0.1; done
  log "WARNING: $name (pid $pid) still exists"
}

# cpu_seconds PID: the process's user and system CPU so far, in whole seconds (what each
# component cost the machine; docs/development.md compares them with the suite's).
cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%d", ($12 + $13) / hz }' "/proc/$1/stat" 2>/dev/null || echo "?"
}

# descendants PID: all descendant pids of PID, deepest last.
descendants() {
  local c
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    echo "$c"
    descendants "$c"
  done
}

# Our containerd's shims: containerd-shim-runc-v2 ... -address <our socket>.
our_shims() {
  local p
  for p in /proc/[0-9]*; do
    [[ -r $p/cmdline ]] || continue
    if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q -- "containerd-shim.* -address $CONTAINERD_SOCK\( \|$\)"; then
      echo "${p#/proc/}"
    fi
  done
}

# 1. The kubelet first, so it does not restart what we stop next.
if [[ -s $PID_DIR/kubelet.pid ]] && pid_alive kubelet; then
  stop_pid kubelet "$(<"$PID_DIR/kubelet.pid")"
fi

# 2. Pod containers and their shims. Remember the pods' network namespaces first.
shims=$(our_shims)
netns_inodes=()
if [[ -n $shims ]]; then
  log "killing pod containers and shims of this cluster's containerd: $(echo $shims | wc -w) shim(s)"
  for s in $shims; do
    for c in $(descendants "$s"); do
      ino=$(stat -Lc %i "/proc/$c/ns/net" 2>/dev/null) && netns_inodes+=("$ino")
    done
  done
  for s in $shims; do
    kids=$(descendants "$s")
    [[ -n $kids ]] && kill -KILL $kids 2>/dev/null || true
  done
  for s in $shims; do kill -TERM "$s" 2>/dev/null || true; done
  for i in $(seq 50); do
    left=""
    for s in $shims; do [[ -d /proc/$s ]] && left+=" $s"; done
    [[ -z $left ]] && break
    sleep 0.1
  done
  for s in $left; do kill -KILL "$s" 2>/dev/null || true; done
fi

# 3. The recorded components, in reverse start order.
for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
  c=${COMPONENTS[i]}
  f="$PID_DIR/$c.pid"
  [[ -s $f ]] || continue
  if pid_alive "$c"; then
    stop_pid "$c" "$(<"$f")"
  fi
done
# Shims that containerd may have started while it was stopping.
for s in $(our_shims); do
  kids=$(descendants "$s")
  [[ -n $kids ]] && kill -KILL $kids 2>/dev/null || true
  kill -KILL "$s" 2>/dev/null || true
done

# 4. Shim sockets (containerd writes each shim's address into its bundle).
for a in "$CONTAINERD_DIR"/state/io.containerd.runtime.v2.task/*/*/address; do
  [[ -f $a ]] || continue
  sock=$(sed 's#^unix://##' "$a")
  [[ $sock == /run/containerd/s/* ]] && rm -f "$sock"
done

# 5. Mounts: pods' network namespaces that were ours, then everything under $CLUSTER_DIR.
if ((${#netns_inodes[@]})) && [[ -d /run/netns ]]; then
  for n in /run/netns/cni-*; do
    [[ -e $n ]] || continue
    ino=$(stat -Lc %i "$n" 2>/dev/null) || continue
    if [[ " ${netns_inodes[*]} " == *" $ino "* ]]; then
      umount "$n" 2>/dev/null || umount -l "$n" 2>/dev/null || true
      rm -f "$n"
    fi
  done
fi
umount_under() {
  local m
  # Deepest first; mountinfo escapes spaces as \040, our paths have none.
  for m in $(awk -v d="$1/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "WARNING: could not unmount $m"
  done
}
umount_under "$CLUSTER_DIR"
umount_under "$CLUSTER_DIR" # a second pass for mounts that were stacked

# 6. The CNI bridge and the kubelet's (now empty) cgroups.
if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
  ip link delete "$CNI_BRIDGE" 2>/dev/null || log "WARNING: could not delete bridge $CNI_BRIDGE"
fi
for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [[ -d $cg ]] || continue
  find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
done

# 7. State. Keep _output/k8s-* (built binaries) and _output/images.
rm -rf "$CLUSTER_DIR" 2>/dev/null || {
  umount_under "$CLUSTER_DIR"
  rm -rf "$CLUSTER_DIR" || die "could not remove $CLUSTER_DIR (still mounted?): $(awk -v d="$CLUSTER_DIR/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | head -3)"
}
log "cluster stopped and its state removed (binaries in $K8S_BIN and images in $IMAGES_DIR kept)"
