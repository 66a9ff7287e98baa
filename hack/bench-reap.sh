#!/usr/bin/env bash
# Side by side on the local cluster: one reap cycle over NS's pods by target/pod-reaper and by
# `depwatch reap`, the same settings, both configured as in a cluster (pod-reaper reads only
# the in-cluster config): a service-account token and the cluster's CA are bind-mounted over
# /var/run/secrets/kubernetes.io/serviceaccount in a private mount namespace. Prints each
# run's wall time, user and system CPU seconds and peak RSS (KiB), and the dry-run lines.
#
#   go run ./hack/benchreap populate -namespace reapbench -pods 10000 -match-every 10
#   POD_REAPER_BIN=/path/to/pod-reaper hack/bench-reap.sh      # REPS=5 NS=reapbench
#   go run ./hack/benchreap cleanup -namespace reapbench
#
# pod-reaper is built from its source (github.com/target/pod-reaper, `go build ./reaper`);
# this script does not fetch it.
set -euo pipefail
cd "$(dirname "$0")/.."
NS=${NS:-reapbench}; REPS=${REPS:-5}
: "${POD_REAPER_BIN:?set POD_REAPER_BIN to a pod-reaper binary built from github.com/target/pod-reaper}"
[[ -x $POD_REAPER_BIN ]] || { echo "POD_REAPER_BIN=$POD_REAPER_BIN is not an executable" >&2; exit 2; }
export KUBECONFIG=${KUBECONFIG:-$PWD/_output/cluster/kubeconfig}
# shellcheck source=hack/lib.sh
source hack/lib.sh
export PATH=$PATH:$K8S_BIN
make build >/dev/null
sa=$(mktemp -d); trap 'rm -rf "$sa"' EXIT
kubectl -n "$NS" create serviceaccount reapbench --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl create clusterrolebinding "reapbench-$NS" --clusterrole=view --serviceaccount="$NS:reapbench" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n "$NS" create token reapbench --duration=1h >"$sa/token"
cp _output/cluster/pki/ca.crt "$sa/ca.crt"
echo -n "$NS" >"$sa/namespace"
mkdir -p /var/run/secrets/kubernetes.io/serviceaccount
for i in $(seq 1 "$REPS"); do
  for who in pod-reaper depwatch; do
    cmd=$POD_REAPER_BIN
    [[ $who == depwatch ]] && cmd="$PWD/_output/bin/depwatch reap"
    out=$(unshare -m bash -c "mount --bind '$sa' /var/run/secrets/kubernetes.io/serviceaccount && \
      env -i HOME=/nonexistent PATH=/usr/bin:/bin KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=6443 \
        NAMESPACE=$NS SCHEDULE='@every 8s' RUN_DURATION=15s DRY_RUN=true CONTAINER_STATUSES=CrashLoopBackOff \
        /usr/bin/time -f 'TIME %e %U %S %M' $cmd" 2>&1 || true)
    echo "$who run $i: wall/user/sys/maxrss_kib $(grep '^TIME' <<<"$out" | cut -d' ' -f2-), dry-run lines $(grep -c 'dry-run mode' <<<"$out" || true)"
  done
done
kubectl delete clusterrolebinding "reapbench-$NS" >/dev/null
