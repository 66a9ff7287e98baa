package monitoring

import (
	"bytes"
	"fmt"
	"strings"
)

// Rule is one rule of a rules file, as far as the checks read it.
type Rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Group is a rule group.
type Group struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []Rule `json:"rules"`
}

// RulesFile is a Prometheus rules file.
type RulesFile struct {
	Groups []Group `json:"groups"`
}

// ruleHeader is the PrometheusRule's part before the groups.
const ruleHeader = `# The Prometheus Operator's form of depwatch.rules.yaml, written from it by
# ` + "`go test ./test/monitoring -run TestPrometheusRule -update`" + `: edit that file, not this one.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: depwatch
  namespace: depwatch
  labels:
    app.kubernetes.io/name: depwatch
    app.kubernetes.io/part-of: depwatch
    prometheus: k8s
    role: alert-rules
spec:
`

// PrometheusRule wraps a rules file's groups, comments included, into a PrometheusRule:
// the file's leading comment block is left out and its "groups:" goes under spec.
func PrometheusRule(rules []byte) ([]byte, error) {
	i := bytes.Index(rules, []byte("\ngroups:\n"))
	if i < 0 {
		return nil, fmt.Errorf("the rules file has no top-level \"groups:\" line")
	}
	var b strings.Builder
	b.WriteString(ruleHeader)
	for _, line := range strings.SplitAfter(string(rules[i+1:]), "\n") {
		if strings.TrimSpace(line) == "" {
			b.WriteString(line)
			continue
		}
		b.WriteString("  " + line)
	}
	return []byte(b.String()), nil
}
