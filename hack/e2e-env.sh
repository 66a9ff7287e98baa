#!/usr/bin/env bash
# Prints, as shell `export` lines, what the end-to-end tests need to reach the local
# cluster started by hack/cluster-up.sh:
#   eval "$(hack/e2e-env.sh)"      # or: source <(hack/e2e-env.sh)
# With --check it also fails (exit 1) when that cluster's API server is not ready.
set -euo pipefail
LOG_PREFIX=e2e-env
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"

if [[ ${1:-} == --check ]]; then
  [[ -s $KUBECONFIG_FILE ]] || die "no local cluster: $KUBECONFIG_FILE missing (run hack/cluster-up.sh)"
  kubectl --kubeconfig "$KUBECONFIG_FILE" --request-timeout=5s get --raw /readyz >/dev/null 2>&1 ||
    die "local cluster API https://$API_HOST:$API_PORT not ready (logs: $LOG_DIR)"
fi

cat <<ENV
export KUBECONFIG=$KUBECONFIG_FILE
export DEPWATCH_E2E_KUBECONFIG=$KUBECONFIG_FILE
export DEPWATCH_E2E_API_HOST=$API_HOST
export DEPWATCH_E2E_API_PORT=$API_PORT
export DEPWATCH_E2E_IMAGE=$DEPWATCH_IMAGE
export DEPWATCH_E2E_TESTAPP_IMAGE=$TESTAPP_IMAGE
export DEPWATCH_E2E_PAUSE_IMAGE=$PAUSE_IMAGE
export DEPWATCH_E2E_NODE=$NODE_NAME
export DEPWATCH_E2E_CONTAINERD_SOCK=$CONTAINERD_SOCK
export DEPWATCH_E2E_POD_CIDR=$POD_CIDR
ENV
