#!/usr/bin/env bash
# make demo: depwatch's weeder, live. An upstream Service goes down, its dependent crash-loops
# until the kubelet's back-off has grown, the upstream comes back, and the weeder Job that
# depwatch's coordinator launched (armed) when the outage began restarts the dependent at once
# instead of letting it wait out the back-off. Runs on the embedded local cluster (started here when needed), or on the current
# kubectl context when KUBECONFIG is set and reachable (its nodes must have the images
# localhost/depwatch:dev and localhost/depwatch-testapp:dev, e.g. loaded with `kind load`).
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
TESTAPP_IMAGE=localhost/depwatch-testapp:dev

if [[ -n ${KUBECONFIG:-} ]] && kubectl --request-timeout=5s get --raw /readyz >/dev/null 2>&1; then
  log "using the current context of KUBECONFIG=$KUBECONFIG ($(kubectl config current-context))"
else
  log "starting the embedded local cluster (make cluster-up)"
  # Its own progress lines and the first run's build steps only: the image packer's digests
  # and the kubeconfig path it prints for scripts are not what someone watching the demo reads
  # (errors go to stderr and stay).
  ./hack/cluster-up.sh | grep --line-buffered -E '^(\[cluster-up|    build-k8s:)'
  export KUBECONFIG="$KUBECONFIG_FILE"
fi
if containerd_up; then
  ./hack/image.sh depwatch testapp >/dev/null
fi

log "installing depwatch: kubectl apply -k manifests/overlays/local"
# quiet OUTPUT-FILE COMMAND...: runs COMMAND; its output is shown only when it fails. (The
# local overlay's host network draws a pod-security warning on every apply: expected here,
# see manifests/overlays/local.)
quiet() {
  local out=$1; shift
  "$@" >"$out" 2>&1 || { cat "$out" >&2; die "failed: $*"; }
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# An earlier run's removal (make e2e removes the lab when it ends) may still be under way:
# nothing can be created in a namespace being deleted.
if [[ -n "$(kubectl get namespace depwatch -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" ]]; then
  log "waiting for namespace depwatch, being deleted by an earlier run, to be gone"
  quiet "$tmp/wait" kubectl wait --for=delete namespace/depwatch --timeout=180s
fi
quiet "$tmp/apply" kubectl apply -k manifests/overlays/local
quiet "$tmp/rollout" kubectl -n depwatch rollout status deployment/depwatch-coordinator --timeout=120s
log "the coordinator runs (kubectl -n depwatch get deployment depwatch-coordinator)"

port=$(free_port 23456)
addr="127.0.0.1:$port"
log "creating namespace $NS: Service upstream (listens on $addr) and Deployment dependent (exits 1 while upstream is down)"
kubectl delete namespace "$NS" --ignore-not-found --wait=true >/dev/null
kubectl create namespace "$NS" >/dev/null
workload() { # name replicas labels-yaml command probe
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
      hostNetwork: true
      terminationGracePeriodSeconds: 0
      containers:
        - name: app
          image: $TESTAPP_IMAGE
          imagePullPolicy: Never
          command: $4
          # Ready while the upstream accepts connections; the kubelet dials it itself.
          readinessProbe: {tcpSocket: {host: 127.0.0.1, port: $port}, periodSeconds: 1, failureThreshold: 1}
---
YAML
}
{
  workload upstream 1 '{app: upstream}' "[\"/testapp\", \"serve\", \"$addr\"]"
  workload dependent 1 '{app: dependent, depwatch.io/e2e: dependent}' "[\"/testapp\", \"depend\", \"$addr\"]"
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
  job=$(kubectl -n depwatch get jobs -l "depwatch.io/kind=weeder,depwatch.io/namespace=$NS" --sort-by=.metadata.creationTimestamp -o jsonpath='{.items[-1:].metadata.name}' 2>/dev/null || true)
  sleep 0.2
done
log "weeder Job depwatch/$job; its log (kubectl -n depwatch logs job/$job):"
until kubectl -n "$NS" get pods -l app=dependent -o jsonpath='{.items[*].status.containerStatuses[0].ready}' | grep -q true; do sleep 0.2; done
ready=$(date +%s.%N)
sleep 1
# Each JSON line's time and its sentence for people (a pod's "detail", else the message); the
# full lines are one `kubectl logs` away.
kubectl -n depwatch logs "job/$job" 2>/dev/null | sed -nE \
  -e 's/.*"detail":"(([^"\\]|\\.)*)".*"time":"[0-9-]+T([0-9:]+)Z?".*/    \3  \1/p' -e t \
  -e 's/.*"msg":"(([^"\\]|\\.)*)".*"time":"[0-9-]+T([0-9:]+)Z?".*/    \3  \1/p' | sed 's/\\"/"/g' || true
log "the dependent is Ready $(awk "BEGIN{printf \"%.1f\", $ready - $up}")s after the upstream came back (the kubelet alone: up to ${secs}s)"
kubectl -n "$NS" get pods -o wide
echo
log "explore: export KUBECONFIG=$KUBECONFIG; kubectl -n depwatch get jobs,pods; kubectl -n $NS get events"
log "clean up: kubectl delete namespace $NS; make cluster-down"
