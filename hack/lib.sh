# Shared settings and helpers of the local test cluster scripts (hack/cluster-up.sh,
# hack/cluster-down.sh, hack/image.sh, hack/e2e-env.sh). Source it; don't run it.
# shellcheck shell=bash

ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
# The Kubernetes version of the local cluster: hack/k8s/go.mod's unless K8S_VERSION names another
# (make test-k8s).
# pinned_k8s_version prints the Kubernetes release hack/k8s/go.mod pins (hack/build-k8s.sh
# builds it; the Makefile finds kubectl in its bin directory).
pinned_k8s_version() { awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$ROOT/hack/k8s/go.mod"; }
K8S_VERSION="${K8S_VERSION:-$(pinned_k8s_version)}"
K8S_BIN="${K8S_BIN:-$ROOT/_output/k8s-$K8S_VERSION/bin}"
# A machine without kubectl gets one built by hack/build-k8s.sh next to the cluster's binaries.
command -v kubectl >/dev/null || PATH="$PATH:$K8S_BIN"
# CLUSTER_DIR may name another checkout's cluster: a git worktree then builds and imports its
# own images into the one running cluster instead of starting a second one.
CLUSTER_DIR="${CLUSTER_DIR:-$ROOT/_output/cluster}"
PKI_DIR="$CLUSTER_DIR/pki"
PID_DIR="$CLUSTER_DIR/pids"
LOG_DIR="$CLUSTER_DIR/logs"
KUBECONFIG_FILE="$CLUSTER_DIR/kubeconfig"
PORTS_FILE="$CLUSTER_DIR/ports.env"
CONTAINERD_DIR="$CLUSTER_DIR/containerd"
CONTAINERD_SOCK="$CONTAINERD_DIR/containerd.sock"
KUBELET_DIR="$CLUSTER_DIR/kubelet"
IMAGES_DIR="$ROOT/_output/images"
TOOLS_BIN="$ROOT/_output/bin"

API_HOST="127.0.0.1"
API_PORT="6443"
NODE_NAME="localhost"
SERVICE_CIDR="10.96.0.0/16"
POD_CIDR="10.88.0.0/16"
CNI_BRIDGE="depwatch0"
PAUSE_IMAGE="localhost/pause:local"
DEPWATCH_IMAGE="localhost/depwatch:dev"
TESTAPP_IMAGE="localhost/depwatch-testapp:dev"

# Components in start order; cluster-down stops them in reverse.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet)

_lib_start=${_lib_start:-$SECONDS}
log() { printf '[%s +%3ss] %s\n' "${LOG_PREFIX:-cluster}" "$((SECONDS - _lib_start))" "$*"; }
die() { printf '[%s +%3ss] ERROR: %s\n' "${LOG_PREFIX:-cluster}" "$((SECONDS - _lib_start))" "$*" >&2; exit 1; }

# port_in_use PORT: true when something listens on 127.0.0.1:PORT or on a wildcard address.
port_in_use() {
  ss -Htln "sport = :$1" 2>/dev/null | grep -q .
}

# free_port BASE [EXCLUDED...]: first port >= BASE that nothing listens on and that is not excluded.
free_port() {
  local p=$1; shift
  while port_in_use "$p" || [[ " $* " == *" $p "* ]]; do p=$((p + 1)); done
  echo "$p"
}

# pid_alive NAME: true when the recorded process of component NAME still runs that binary.
pid_alive() {
  local f="$PID_DIR/$1.pid" pid
  [[ -s $f ]] || return 1
  pid=$(<"$f")
  [[ -d /proc/$pid ]] || return 1
  # Guard against a recycled pid: the process must still be the component's binary.
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$(basename "$1")"
}

ctr_local() { ctr -a "$CONTAINERD_SOCK" -n k8s.io "$@"; }

containerd_up() {
  [[ -S $CONTAINERD_SOCK ]] && pid_alive containerd && ctr -a "$CONTAINERD_SOCK" version >/dev/null 2>&1
}
