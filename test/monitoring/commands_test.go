package monitoring

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The files around the rules tell their reader how to regenerate and test them: each `go
// test ./<package>` they name is a package of this repository, and each rules_test.yaml they
// name is where they say it is, from the repository's root.
func TestTheRulesFilesNameCommandsAndPathsThatExist(t *testing.T) {
	const root = "../.."
	goTest := regexp.MustCompile(`go test (\./[\w./-]+)`)
	testFile := regexp.MustCompile(`[\w./-]*rules_test\.yaml`)
	for _, f := range []string{
		"manifests/components/monitoring/depwatch.rules.yaml",
		"manifests/components/monitoring/prometheusrule.yaml",
		"manifests/charts/depwatch/files/depwatch.rules.yaml",
		"hack/check-rules.sh",
		"docs/operating.md",
		"test/monitoring/rules.go",
		"test/monitoring/monitoring_test.go",
	} {
		text := string(read(t, filepath.Join(root, f)))
		for _, m := range goTest.FindAllStringSubmatch(text, -1) {
			if matches, _ := filepath.Glob(filepath.Join(root, m[1], "*_test.go")); len(matches) == 0 {
				t.Errorf("%s names `go test %s`: no package with tests there", f, m[1])
			}
		}
		for _, p := range testFile.FindAllString(text, -1) {
			if p == "rules_test.yaml" {
				continue // said beside it, in its own folder
			}
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s names %s: not there from the repository's root", f, p)
			}
		}
	}
}
