#!/usr/bin/env bash
# Starts a real single-node Kubernetes cluster on this machine, no Docker needed:
# etcd, kube-apiserver (https://127.0.0.1:6443), kube-controller-manager, kube-scheduler,
# containerd (own socket and state) and one kubelet (node "localhost").
#
# - installs etcd-server containerd runc containernetworking-plugins openssl from Debian
#   when missing; builds the Kubernetes binaries once (hack/build-k8s.sh, reused after);
# - packs and imports localhost/pause:local, localhost/depwatch:dev,
#   localhost/depwatch-testapp:dev and the release image ghcr.io/depwatch/depwatch:<VERSION>
#   (hack/image.sh), the pause image before the kubelet starts;
# - everything lives in _output/cluster: pki/, pids/<name>.pid, logs/<name>.log, kubeconfig.
# Idempotent: if the recorded cluster is up and healthy it says so, refreshes the images
# and returns. Stop it with hack/cluster-down.sh; hack/e2e-env.sh prints what tests need.
# Environment:
#   KUBELET_SYNC_FREQUENCY  e.g. 10s: kubelet syncFrequency (default: the kubelet's 1m), see below
#   DEPWATCH_BIN            pack this static binary as localhost/depwatch:dev instead of building it
#   CLUSTER_PROFILING       true: kube-apiserver serves /debug/pprof (off by default; for
#                           measuring where the suite's CPU goes, docs/development.md)
set -euo pipefail
LOG_PREFIX=cluster-up
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

[[ $(id -u) == 0 ]] || die "must run as root (it starts containerd and a kubelet)"

kubectl_() { kubectl --kubeconfig "$KUBECONFIG_FILE" --request-timeout=5s "$@"; }

# ----------------------------------------------------------------------------- helpers
# wait_for WHAT TIMEOUT LOGFILE CMD...: polls CMD every second until it succeeds.
wait_for() {
  local what=$1 timeout=$2 logfile=$3 start=$SECONDS
  shift 3
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS - start >= timeout)); then
      [[ -f $logfile ]] && { echo "---- last lines of $logfile:" >&2; tail -n 25 "$logfile" >&2; }
      die "timed out after ${timeout}s waiting for $what; see $logfile"
    fi
    sleep 1
  done
  log "$what (waited $((SECONDS - start))s)"
}

# start NAME CMD...: starts CMD in its own session, log in logs/NAME.log, pid in pids/NAME.pid.
start() {
  local name=$1
  shift
  local logf="$LOG_DIR/$name.log" pidf="$PID_DIR/$name.pid"
  log "starting $name (log: $logf)"
  # The pid is written by the process itself right before exec, so it is the component's
  # own pid even if setsid had to fork.
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidf" "$@" </dev/null >>"$logf" 2>&1 &
  local i
  for i in $(seq 50); do [[ -s $pidf ]] && break; sleep 0.1; done
  [[ -s $pidf ]] || die "$name did not start; see $logf"
}

# alive_or_die NAME: the process recorded for NAME must still run.
alive_or_die() {
  pid_alive "$1" || { tail -n 25 "$LOG_DIR/$1.log" >&2; die "$1 exited; see $LOG_DIR/$1.log"; }
}

healthy() {
  local c
  for c in "${COMPONENTS[@]}"; do pid_alive "$c" || return 1; done
  [[ -s $KUBECONFIG_FILE ]] || return 1
  kubectl_ get --raw /readyz >/dev/null 2>&1 || return 1
  node_ready || return 1
  containerd_up || return 1
}

node_ready() {
  [[ "$(kubectl_ get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

# ----------------------------------------------------------------------------- already up?
if [[ -d $PID_DIR ]] && compgen -G "$PID_DIR/*.pid" >/dev/null; then
  if healthy; then
    log "cluster already up and healthy (API https://$API_HOST:$API_PORT, node $NODE_NAME Ready)"
    log "refreshing images"
    "$ROOT/hack/image.sh"
    log "kubeconfig: $KUBECONFIG_FILE"
    echo "$KUBECONFIG_FILE"
    exit 0
  fi
  log "a previous cluster is recorded but not healthy: stopping it first"
  "$ROOT/hack/cluster-down.sh"
fi

# ----------------------------------------------------------------------------- packages
need=()
command -v etcd >/dev/null || need+=(etcd-server)
command -v containerd >/dev/null || need+=(containerd)
command -v containerd-shim-runc-v2 >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback && -x /usr/lib/cni/portmap ]] ||
  need+=(containernetworking-plugins)
command -v openssl >/dev/null || need+=(openssl)
command -v curl >/dev/null || need+=(curl)
command -v ss >/dev/null || need+=(iproute2)
if ((${#need[@]})); then
  log "installing from Debian: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  log "installed ${need[*]}"
else
  log "Debian packages present (etcd-server containerd runc containernetworking-plugins openssl)"
fi

# ----------------------------------------------------------------------------- binaries
log "building/reusing Kubernetes $K8S_VERSION binaries in $K8S_BIN"
if ! K8S_BIN="$K8S_BIN" "$ROOT/hack/build-k8s.sh" 2>&1 | sed 's/^/    /'; then
  die "hack/build-k8s.sh failed (output above)"
fi
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
  [[ -x $K8S_BIN/$b ]] || die "$K8S_BIN/$b missing after hack/build-k8s.sh"
done

# ----------------------------------------------------------------------------- ports
port_in_use "$API_PORT" &&
  die "port $API_PORT is already in use (another API server?): $(ss -Htlnp "sport = :$API_PORT" | head -1)"
etcd_port=$(free_port 23790)
etcd_peer_port=$(free_port 23800 "$etcd_port")
kcm_port=$(free_port 10357 "$etcd_port" "$etcd_peer_port")
sched_port=$(free_port 10359 "$etcd_port" "$etcd_peer_port" "$kcm_port")
kubelet_port=$(free_port 10350 "$etcd_port" "$etcd_peer_port" "$kcm_port" "$sched_port")
kubelet_healthz_port=$(free_port 10348 "$etcd_port" "$etcd_peer_port" "$kcm_port" "$sched_port" "$kubelet_port")

# A run that ended without cluster-down may have left etcd's tmpfs mounted.
if mountpoint -q "$CLUSTER_DIR/etcd" 2>/dev/null; then umount -l "$CLUSTER_DIR/etcd"; fi
rm -rf "$CLUSTER_DIR"
mkdir -p "$PKI_DIR" "$PID_DIR" "$LOG_DIR" "$CONTAINERD_DIR" "$KUBELET_DIR" "$CLUSTER_DIR/cni/net.d"
cat >"$PORTS_FILE" <<EOF
API_PORT=$API_PORT
ETCD_PORT=$etcd_port
ETCD_PEER_PORT=$etcd_peer_port
KCM_PORT=$kcm_port
SCHEDULER_PORT=$sched_port
KUBELET_PORT=$kubelet_port
KUBELET_HEALTHZ_PORT=$kubelet_healthz_port
EOF
log "ports: api $API_PORT, etcd $etcd_port/$etcd_peer_port, controller-manager $kcm_port, scheduler $sched_port, kubelet $kubelet_port (healthz $kubelet_healthz_port)"

# ----------------------------------------------------------------------------- PKI
log "generating CA and certificates in $PKI_DIR"
ossl() { openssl "$@" 2>>"$PKI_DIR/openssl.log" >/dev/null || die "openssl $1 failed; see $PKI_DIR/openssl.log"; }
# cert NAME SUBJECT [SAN]: NAME.key + NAME.crt signed by the CA; a server cert when SAN is given.
cert() {
  local name=$1 subj=$2 san=${3:-} ext
  if [[ -n $san ]]; then
    ext="subjectAltName=$san
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth"
  else
    ext="keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  fi
  echo "$ext" >"$PKI_DIR/$name.ext"
  ossl req -newkey rsa:2048 -nodes -keyout "$PKI_DIR/$name.key" -out "$PKI_DIR/$name.csr" -subj "$subj"
  ossl x509 -req -in "$PKI_DIR/$name.csr" -CA "$PKI_DIR/ca.crt" -CAkey "$PKI_DIR/ca.key" -CAcreateserial \
    -days 3650 -out "$PKI_DIR/$name.crt" -extfile "$PKI_DIR/$name.ext"
  rm -f "$PKI_DIR/$name.csr" "$PKI_DIR/$name.ext"
}
ossl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI_DIR/ca.key" -out "$PKI_DIR/ca.crt" -days 3650 \
  -subj "/CN=depwatch-local-ca" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
ossl genrsa -out "$PKI_DIR/sa.key" 2048
ossl rsa -in "$PKI_DIR/sa.key" -pubout -out "$PKI_DIR/sa.pub"
cert apiserver "/CN=kube-apiserver" \
  "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert admin "/O=system:masters/CN=kubernetes-admin"
cert controller-manager "/CN=system:kube-controller-manager"
cert scheduler "/CN=system:kube-scheduler"
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"

# kubeconfig FILE CERTNAME
kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: depwatch-local
  cluster:
    server: https://$API_HOST:$API_PORT
    certificate-authority: $PKI_DIR/ca.crt
users:
- name: $2
  user:
    client-certificate: $PKI_DIR/$2.crt
    client-key: $PKI_DIR/$2.key
contexts:
- name: depwatch-local
  context:
    cluster: depwatch-local
    user: $2
    namespace: default
current-context: depwatch-local
EOF
}
kubeconfig "$KUBECONFIG_FILE" admin
kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" controller-manager
kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" scheduler
kubeconfig "$CLUSTER_DIR/kubelet.kubeconfig" kubelet

# ----------------------------------------------------------------------------- etcd
# etcd keeps its data in memory: a throwaway cluster needs no durability, and on a disk every
# write waits for fsync (the e2e EndpointSlice storm reached ~120 writes/s with etcd on this
# machine's disk). cluster-down unmounts it with the rest of $CLUSTER_DIR.
mkdir -p "$CLUSTER_DIR/etcd"
if ! mountpoint -q "$CLUSTER_DIR/etcd"; then
  mount -t tmpfs -o size=2560m,mode=0700 depwatch-etcd "$CLUSTER_DIR/etcd" 2>/dev/null ||
    log "etcd data on disk: could not mount a tmpfs at $CLUSTER_DIR/etcd"
fi
start etcd etcd --name depwatch-local --data-dir "$CLUSTER_DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster "depwatch-local=http://127.0.0.1:$etcd_peer_port" --initial-cluster-state new \
  --quota-backend-bytes 2147483648 --log-level warn
wait_for "etcd healthy on 127.0.0.1:$etcd_port" 30 "$LOG_DIR/etcd.log" \
  curl -fsS "http://127.0.0.1:$etcd_port/health"

# ----------------------------------------------------------------------------- control plane
start kube-apiserver "$K8S_BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --secure-port "$API_PORT" --advertise-address 127.0.0.1 \
  --endpoint-reconciler-type none \
  --service-cluster-ip-range "$SERVICE_CIDR" \
  --authorization-mode Node,RBAC \
  --enable-admission-plugins NodeRestriction \
  --allow-privileged=true \
  --client-ca-file "$PKI_DIR/ca.crt" \
  --tls-cert-file "$PKI_DIR/apiserver.crt" --tls-private-key-file "$PKI_DIR/apiserver.key" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI_DIR/sa.pub" \
  --service-account-signing-key-file "$PKI_DIR/sa.key" \
  --kubelet-preferred-address-types Hostname \
  --profiling="${CLUSTER_PROFILING:-false}"
wait_for "kube-apiserver /readyz ok on https://$API_HOST:$API_PORT" 90 "$LOG_DIR/kube-apiserver.log" \
  kubectl_ get --raw /readyz

start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
  --kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$kcm_port" \
  --leader-elect=false \
  --root-ca-file "$PKI_DIR/ca.crt" \
  --service-account-private-key-file "$PKI_DIR/sa.key" \
  --cluster-signing-cert-file "$PKI_DIR/ca.crt" --cluster-signing-key-file "$PKI_DIR/ca.key" \
  --use-service-account-credentials=true \
  --profiling=false
start kube-scheduler "$K8S_BIN/kube-scheduler" \
  --kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" \
  --authentication-kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" \
  --authorization-kubeconfig "$CLUSTER_DIR/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$sched_port" \
  --leader-elect=false \
  --profiling=false

# ----------------------------------------------------------------------------- containerd
cat >"$CLUSTER_DIR/cni/net.d/10-depwatch.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "depwatch-local",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$CLUSTER_DIR/cni/ipam",
        "ranges": [[{ "subnet": "$POD_CIDR" }]],
        "routes": [{ "dst": "$POD_CIDR" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } },
    { "type": "loopback" }
  ]
}
EOF
cat >"$CONTAINERD_DIR/config.toml" <<EOF
version = 2
root = "$CONTAINERD_DIR/root"
state = "$CONTAINERD_DIR/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$CONTAINERD_DIR/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # Pods' network namespaces under our state dir (not /run/netns): cluster-down finds them.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$CONTAINERD_DIR/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CLUSTER_DIR/cni/net.d"
    max_conf_num = 1
EOF
start containerd containerd --config "$CONTAINERD_DIR/config.toml"
wait_for "containerd up on $CONTAINERD_SOCK" 30 "$LOG_DIR/containerd.log" containerd_up

# The sandbox (pause) image must be in containerd before the kubelet creates pods.
log "packing and importing images (hack/image.sh)"
if ! "$ROOT/hack/image.sh" 2>&1 | sed 's/^/    /'; then
  die "hack/image.sh failed (output above)"
fi

# ----------------------------------------------------------------------------- kubelet
cat >"$KUBELET_DIR/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
  x509: {}
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
podLogsDir: $CLUSTER_DIR/pod-logs
resolvConf: /etc/resolv.conf
# The machine's disk is shared: don't let disk thresholds evict test pods, and never
# garbage-collect the locally imported images (they cannot be pulled again).
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
# The e2e suite runs six tests at once, some with sixteen pods and their Jobs, while the
# namespaces of finished tests are still being deleted (slowly, on a loaded machine): the
# default of 110 pods refused new ones ("Too many pods") and stalled every test waiting on one.
maxPods: 250
EOF
if [[ -n ${KUBELET_SYNC_FREQUENCY:-} ]]; then
  # Kubelet v1.36 requeues a crash-looping pod only when its backoff expires, or after
  # syncFrequency (default 1m) if that comes first. Until then the container's state stays
  # "terminated" (kubectl: Error) and state.waiting.reason=CrashLoopBackOff shows only
  # briefly. A shorter syncFrequency makes the waiting state show within that time after
  # each crash. The backoff itself (10s doubling to 300s) is unchanged.
  echo "syncFrequency: $KUBELET_SYNC_FREQUENCY" >>"$KUBELET_DIR/config.yaml"
  log "kubelet syncFrequency: $KUBELET_SYNC_FREQUENCY"
fi
start kubelet "$K8S_BIN/kubelet" \
  --config "$KUBELET_DIR/config.yaml" \
  --kubeconfig "$CLUSTER_DIR/kubelet.kubeconfig" \
  --hostname-override "$NODE_NAME" \
  --root-dir "$KUBELET_DIR" \
  --cert-dir "$KUBELET_DIR/pki"
kubelet_started=$SECONDS
sleep 1

for c in "${COMPONENTS[@]}"; do alive_or_die "$c"; done
wait_for "node $NODE_NAME Ready" 120 "$LOG_DIR/kubelet.log" node_ready
log "node $NODE_NAME Ready $((SECONDS - kubelet_started))s after the kubelet started"
wait_for "service account default/default exists" 60 "$LOG_DIR/kube-controller-manager.log" \
  kubectl_ -n default get serviceaccount default
wait_for "configmap default/kube-root-ca.crt exists" 60 "$LOG_DIR/kube-controller-manager.log" \
  kubectl_ -n default get configmap kube-root-ca.crt
for c in "${COMPONENTS[@]}"; do alive_or_die "$c"; done

log "cluster up in ${SECONDS}s: API https://$API_HOST:$API_PORT, node $NODE_NAME, images $PAUSE_IMAGE $DEPWATCH_IMAGE $TESTAPP_IMAGE"
log "use it: export KUBECONFIG=$KUBECONFIG_FILE   (stop it: hack/cluster-down.sh)"
echo "$KUBECONFIG_FILE"
