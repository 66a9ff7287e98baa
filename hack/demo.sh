#!/usr/bin/env bash
# make demo: depwatch's weeder, live. An upstream Service goes down, its dependent crash-loops
# until the kubelet's back-off has grown, the upstream comes back, and the weeder Job that
# depwatch's coordinator launched (armed) when the outage began restarts the dependent at once
# instead of letting it wait out the back-off.
#
# Where: the local cluster (_output/cluster/kubeconfig, started here when needed), whatever
# KUBECONFIG says: an exported KUBECONFIG is not a request to use that cluster. Another
# cluster only when named for the demo alone:
#   make demo DEMO_KUBECONFIG=~/.kube/config   # its current context
# There the demo installs what a user would, the chart (release depwatch-demo in namespace
# depwatch-demo-system, watching only namespace depwatch-demo), never the lab overlay (no
# privileged namespace, host network, 127.0.0.1:6443 or imagePullPolicy Never), and removes
# what it created when it ends, fails or is interrupted. Its nodes must be able to run
#   DEMO_IMAGE          the depwatch image (default: the chart's, ghcr.io/depwatch/depwatch:<VERSION>;
#                       make image, then e.g. kind load image-archive)
#   DEMO_TESTAPP_IMAGE  the demo's workload, test/e2e/testapp (default localhost/depwatch-testapp:dev:
#                       hack/image.sh testapp, then load _output/images/testapp.tar)
set -euo pipefail
LOG_PREFIX=demo
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

# Restarts to wait for before the upstream returns. The kubelet (v1.36) restarts the first
# crash at once, then waits 10 s, 20 s, 40 s, 80 s, ... (capped at 5 min): with 3 restarts
# behind it, the dependent's next restart is 40 s away.
RESTARTS="${DEMO_RESTARTS:-3}"
NS=depwatch-demo

tmp=$(mktemp -d)
# quiet OUTPUT-FILE COMMAND...: runs COMMAND; its output is shown only when it fails. (The
# local overlay's host network draws a pod-security warning on every apply: expected here,
# see manifests/overlays/local.)
quiet() {
  local out=$1; shift
  "$@" >"$out" 2>&1 || { cat "$out" >&2; die "failed: $*"; }
}

if [[ -n ${DEMO_KUBECONFIG:-} ]]; then
  # ------------------------------------------------------------ a cluster the user named
  [[ -r $DEMO_KUBECONFIG ]] || die "DEMO_KUBECONFIG=$DEMO_KUBECONFIG: no readable kubeconfig there"
  export KUBECONFIG="$DEMO_KUBECONFIG"
  local_cluster=
  DW_NS=depwatch-demo-system
  RELEASE=depwatch-demo
  HELM=${HELM:-$ROOT/_output/bin/helm}
  [[ -x $HELM ]] || command -v "$HELM" >/dev/null || die "no helm at $HELM: make helm (or HELM=/path/to/helm)"
  TESTAPP_IMAGE=${DEMO_TESTAPP_IMAGE:-localhost/depwatch-testapp:dev}
  PULL_POLICY=IfNotPresent
  kubectl --request-timeout=10s get --raw /readyz >/dev/null 2>&1 ||
    die "DEMO_KUBECONFIG=$DEMO_KUBECONFIG: its current context ($(kubectl config current-context 2>/dev/null || echo none)) does not answer"
  log "using the current context of DEMO_KUBECONFIG=$DEMO_KUBECONFIG ($(kubectl config current-context)): installing the chart, as a user would"
  # What is already there is not the demo's to remove: refuse rather than adopt it.
  for n in "$NS" "$DW_NS"; do
    if kubectl get namespace "$n" >/dev/null 2>&1; then
      die "namespace $n already exists on that cluster: the demo creates it and removes it afterwards, so it does not use one it did not create (an earlier demo's? kubectl delete namespace $n)"
    fi
  done
  created=()
  cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if ((${#created[@]})); then
      log "removing what the demo created: ${created[*]}"
      [[ " ${created[*]} " == *" release/$RELEASE "* ]] &&
        { "$HELM" uninstall "$RELEASE" -n "$DW_NS" --wait --timeout 2m >/dev/null 2>&1 || log "helm uninstall $RELEASE -n $DW_NS failed: remove it by hand"; }
      for n in "$NS" "$DW_NS"; do
        [[ " ${created[*]} " == *" namespace/$n "* ]] &&
          { kubectl delete namespace "$n" --ignore-not-found --wait=false >/dev/null 2>&1 || log "kubectl delete namespace $n failed: remove it by hand"; }
      done
    fi
    rm -rf "$tmp"
    exit "$rc"
  }
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # Only the demo's namespace: the coordinator leaves every other one alone.
  cat >"$tmp/config.yaml" <<YAML
watchDuration: 5m0s
servicesAndDependantSelectors:
  upstream:
    podSelectors:
      - matchLabels: {depwatch.io/demo: dependent}
namespaces:
  names: [$NS]
armWeeder: true
armedMaxWait: 30m
jobTemplate:
  ttlSecondsAfterFinished: 600
YAML
  image_args=()
  if [[ -n ${DEMO_IMAGE:-} ]]; then
    image_args=(--set "image.repository=${DEMO_IMAGE%:*}" --set "image.tag=${DEMO_IMAGE##*:}")
  fi
  log "installing depwatch: helm install $RELEASE manifests/charts/depwatch -n $DW_NS --create-namespace"
  created+=("namespace/$DW_NS" "release/$RELEASE")
  quiet "$tmp/install" "$HELM" install "$RELEASE" manifests/charts/depwatch -n "$DW_NS" --create-namespace \
    --set-file config="$tmp/config.yaml" "${image_args[@]}" --wait --timeout 3m
  log "the coordinator runs (kubectl -n $DW_NS get deployments)"
else
  # ------------------------------------------------------------ the local cluster
  export KUBECONFIG="$KUBECONFIG_FILE"
  local_cluster=1
  DW_NS=depwatch
  # TESTAPP_IMAGE: lib.sh's, imported into the local containerd.
  PULL_POLICY=Never
  trap 'rm -rf "$tmp"' EXIT
  if ! kubectl --request-timeout=5s get --raw /readyz >/dev/null 2>&1; then
    log "starting the embedded local cluster (make cluster-up)"
    # Its own progress lines and the first run's build steps only: the image packer's digests
    # and the kubeconfig path it prints for scripts are not what someone watching the demo reads
    # (errors go to stderr and stay).
    ./hack/cluster-up.sh | grep --line-buffered -E '^(\[cluster-up|    build-k8s:)'
  fi
  # The lab overlay runs privileged, on the host network, against 127.0.0.1:6443: only ever on
  # the local cluster.
  server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  [[ $server == "https://$API_HOST:$API_PORT" ]] ||
    die "$KUBECONFIG_FILE names $server, not the local cluster (https://$API_HOST:$API_PORT): not applying the lab overlay there; for another cluster, DEMO_KUBECONFIG=..."
  if containerd_up; then
    ./hack/image.sh depwatch testapp >/dev/null
  fi
  log "installing depwatch: kubectl apply -k manifests/overlays/local"
  # An earlier run's removal (make e2e removes the lab when it ends) may still be under way:
  # nothing can be created in a namespace being deleted.
  if [[ -n "$(kubectl get namespace depwatch -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" ]]; then
    log "waiting for namespace depwatch, being deleted by an earlier run, to be gone"
    quiet "$tmp/wait" kubectl wait --for=delete namespace/depwatch --timeout=180s
  fi
  quiet "$tmp/apply" kubectl apply -k manifests/overlays/local
  quiet "$tmp/rollout" kubectl -n depwatch rollout status deployment/depwatch-coordinator --timeout=120s
  log "the coordinator runs (kubectl -n depwatch get deployment depwatch-coordinator)"
fi

if [[ -n $local_cluster ]]; then
  # No kube-proxy here: both run on the host network, and the dependent dials the upstream's
  # host port.
  port=$(free_port 23456)
  listen="127.0.0.1:$port" addr="127.0.0.1:$port" host_network=true dependent_label=depwatch.io/e2e
else
  # A real cluster: the pod network, and the dependent dials the upstream's Service.
  port=8080
  listen=":$port" addr="upstream.$NS.svc:80" host_network=false dependent_label=depwatch.io/demo
fi
# Pod security "restricted", which a real cluster may enforce by default (the lab's demo
# namespace does not, and its pods stay as they always were).
pod_security="" container_security=""
if [[ -z $local_cluster ]]; then
  pod_security="      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}"
  container_security="          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}"
fi
log "creating namespace $NS: Service upstream (listens on $listen) and Deployment dependent (exits 1 while $addr is down)"
if [[ -n $local_cluster ]]; then
  kubectl delete namespace "$NS" --ignore-not-found --wait=true >/dev/null
else
  created+=("namespace/$NS")
fi
kubectl create namespace "$NS" >/dev/null
workload() { # name replicas labels-yaml command readiness-probe
  cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1, namespace: $NS}
spec:
  replicas: $2
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: $3}
    spec:
      hostNetwork: $host_network
      terminationGracePeriodSeconds: 0
$pod_security
      containers:
        - name: app
          image: $TESTAPP_IMAGE
          imagePullPolicy: $PULL_POLICY
          command: $4
$container_security
$5
---
YAML
}
# Ready while the upstream accepts connections; the kubelet dials it itself (on the pod network
# the dependent runs only while it reaches the upstream: Running is Ready).
probe="          readinessProbe: {tcpSocket: {host: 127.0.0.1, port: $port}, periodSeconds: 1, failureThreshold: 1}"
upstream_probe="          readinessProbe: {tcpSocket: {port: $port}, periodSeconds: 1, failureThreshold: 1}"
dependent_probe=""
[[ -n $local_cluster ]] && upstream_probe=$probe dependent_probe=$probe
{
  workload upstream 1 '{app: upstream}' "[\"/testapp\", \"serve\", \"$listen\"]" "$upstream_probe"
  workload dependent 1 "{app: dependent, $dependent_label: dependent}" "[\"/testapp\", \"depend\", \"$addr\"]" "$dependent_probe"
  cat <<YAML
apiVersion: v1
kind: Service
metadata: {name: upstream, namespace: $NS}
spec: {selector: {app: upstream}, ports: [{port: 80, targetPort: $port}]}
YAML
} | kubectl apply -f - >/dev/null
kubectl -n "$NS" rollout status deployment/upstream --timeout=120s >/dev/null
kubectl -n "$NS" rollout status deployment/dependent --timeout=120s >/dev/null
log "both are Ready"
kubectl -n "$NS" get pods -o wide

# dependent_state: "<pod> restarts=N ready=B <state>", state the container's waiting or
# terminated reason, or Running.
dependent_state() {
  kubectl -n "$NS" get pods -l app=dependent -o go-template='{{range .items}}{{.metadata.name}}{{range .status.containerStatuses}} restarts={{.restartCount}} ready={{.ready}} {{with .state.waiting}}{{.reason}}{{end}}{{with .state.terminated}}{{.reason}}{{end}}{{with .state.running}}Running{{end}}{{end}}{{"\n"}}{{end}}'
}
backoff_of() { # restarts -> the kubelet's next back-off in seconds
  local r=$1 d=10
  ((r == 0)) && { echo 0; return; }
  for ((i = 1; i < r; i++)); do d=$((d * 2)); done
  ((d > 300)) && d=300
  echo "$d"
}

log "OUTAGE: scaling the upstream to 0; the dependent starts crash-looping"
kubectl -n "$NS" scale deployment/upstream --replicas=0 >/dev/null
while :; do
  state="$(dependent_state)"
  # Each change once, not every poll.
  [[ $state != "${last_state:-}" ]] && echo "    $state"
  last_state=$state
  restarts=$(grep -oE 'restarts=[0-9]+' <<<"$state" | head -1 | cut -d= -f2 || true)
  if [[ ${restarts:-0} -ge $RESTARTS && ($state == *CrashLoopBackOff* || $state == *Error*) ]]; then break; fi
  sleep 3
done
secs=$(backoff_of "$restarts")
log "the dependent is in back-off; the kubelet waits ${secs}s before it retries it on its own"

log "RECOVERY: scaling the upstream back to 1"
kubectl -n "$NS" scale deployment/upstream --replicas=1 >/dev/null
# A go-template, not a jsonpath filter: an EndpointSlice without endpoints has
# "endpoints": null, which a jsonpath filter refuses with a dump of the whole object.
ready_endpoints() {
  kubectl -n "$NS" get endpointslices -l kubernetes.io/service-name=upstream \
    -o go-template='{{range .items}}{{range .endpoints}}{{if .conditions.ready}}ready {{end}}{{end}}{{end}}'
}
until [[ -n "$(ready_endpoints)" ]]; do sleep 0.2; done
up=$(date +%s.%N)
log "upstream is Ready; the coordinator's weeder Job (armed when the outage began, waiting for this moment) restarts the dependent"
job=""
until [[ -n $job ]]; do
  job=$(kubectl -n "$DW_NS" get jobs -l "depwatch.io/kind=weeder,depwatch.io/namespace=$NS" --sort-by=.metadata.creationTimestamp -o jsonpath='{.items[-1:].metadata.name}' 2>/dev/null || true)
  sleep 0.2
done
log "weeder Job $DW_NS/$job; its log (kubectl -n $DW_NS logs job/$job):"
until kubectl -n "$NS" get pods -l app=dependent -o jsonpath='{.items[*].status.containerStatuses[0].ready}' | grep -q true; do sleep 0.2; done
ready=$(date +%s.%N)
sleep 1
# Each JSON line's time and its sentence for people (a pod's "detail", else the message); the
# full lines are one `kubectl logs` away.
kubectl -n "$DW_NS" logs "job/$job" 2>/dev/null | sed -nE \
  -e 's/.*"detail":"(([^"\\]|\\.)*)".*"time":"[0-9-]+T([0-9:]+)Z?".*/    \3  \1/p' -e t \
  -e 's/.*"msg":"(([^"\\]|\\.)*)".*"time":"[0-9-]+T([0-9:]+)Z?".*/    \3  \1/p' | sed 's/\\"/"/g' || true
log "the dependent is Ready $(awk "BEGIN{printf \"%.1f\", $ready - $up}")s after the upstream came back (the kubelet alone: up to ${secs}s)"
kubectl -n "$NS" get pods -o wide
echo
if [[ -n $local_cluster ]]; then
  log "explore: export KUBECONFIG=$KUBECONFIG; kubectl -n depwatch get jobs,pods; kubectl -n $NS get events"
  log "clean up: kubectl delete namespace $NS; make cluster-down"
else
  log "done; removing the demo's release and namespaces from that cluster"
fi
