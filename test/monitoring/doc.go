// Package monitoring holds the checks of depwatch's monitoring files, which live where the
// install picks them up (manifests/components/monitoring): the alert rules
// (depwatch.rules.yaml, the one source; prometheusrule.yaml is written from it), the Grafana
// dashboard (depwatch-dashboard.json), and their promtool unit tests (rules_test.yaml here,
// run by hack/check-rules.sh). Its tests keep the two rule files, the dashboard, the
// runbook (docs/operating.md) and the metrics in step.
package monitoring

// Dir is the monitoring component's folder, from this package's.
const Dir = "../../manifests/components/monitoring"
