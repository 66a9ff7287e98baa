#!/usr/bin/env bash
# Installs Debian's `prometheus` package when promtool or prometheus is missing: promtool
# checks the alert rules (hack/check-rules.sh), the server evaluates them in the e2e test
# (test/e2e/monitoring_test.go, which starts and stops its own). The package's service is
# neither started nor enabled: nothing runs after this script.
set -euo pipefail
command -v promtool >/dev/null && command -v prometheus >/dev/null && exit 0
echo "[install-prometheus] installing Debian's prometheus package (promtool, prometheus)"
export DEBIAN_FRONTEND=noninteractive
# invoke-rc.d and deb-systemd-invoke ask policy-rc.d before starting a service: 101 says no.
# Only a policy this script wrote is removed again.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# Under systemd the unit would still start at the next boot.
if [[ -d /run/systemd/system ]]; then
  systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
command -v promtool >/dev/null && command -v prometheus >/dev/null ||
  { echo "[install-prometheus] promtool or prometheus missing after installing the package" >&2; exit 1; }
