package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
)

// Dashboard is the part of a Grafana dashboard the checks read.
type Dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []Panel `json:"panels"`
}

// Panel is one panel (or row) of a dashboard.
type Panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// LoadDashboard reads a dashboard's JSON (only the fields above: Grafana's model has many
// more).
func LoadDashboard(path string) (Dashboard, error) {
	var d Dashboard
	b, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s: not valid JSON: %w", path, err)
	}
	return d, nil
}

// Queries are the dashboard's expressions, panel by panel.
func (d Dashboard) Queries() []string {
	var q []string
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			q = append(q, t.Expr)
		}
	}
	return q
}
