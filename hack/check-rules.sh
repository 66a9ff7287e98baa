#!/usr/bin/env bash
# Checks depwatch's alert rules with Prometheus's own tool: `promtool check rules` (syntax,
# expressions, templates) and `promtool test rules` (test/monitoring/rules_test.yaml: every alert
# firing and quiet on series). promtool comes from Debian's `prometheus` package,
# installed when missing by hack/install-prometheus.sh (without its service).
# (The PrometheusRule holds the same groups: go test ./test/monitoring proves it.)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RULES="$ROOT/manifests/components/monitoring/depwatch.rules.yaml"
log() { printf '[check-rules] %s\n' "$*"; }

"$ROOT/hack/install-prometheus.sh"
log "$(promtool --version 2>&1 | head -1)"
promtool check rules "$RULES"
(cd "$ROOT/test/monitoring" && promtool test rules rules_test.yaml)
