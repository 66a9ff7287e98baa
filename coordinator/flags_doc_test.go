package coordinator

import (
	"flag"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestEveryFlagIsDocumented keeps docs/coordinator.md's flag table and the flags the
// coordinator parses in step: a flag added without a row, or a row left behind, fails here.
func TestEveryFlagIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/coordinator.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	if i := strings.Index(section, "## Flags"); i >= 0 {
		section = section[i:]
	}
	if i := strings.Index(section[len("## Flags"):], "\n## "); i >= 0 {
		section = section[:len("## Flags")+i]
	}
	documented := map[string]bool{}
	for _, row := range strings.Split(section, "\n") {
		if !strings.HasPrefix(row, "| `--") {
			continue
		}
		first := strings.SplitN(row, "|", 3)[1] // the flag column
		for _, m := range regexp.MustCompile("`--([a-z-]+)`").FindAllStringSubmatch(first, -1) {
			documented[m[1]] = true
		}
	}
	var o Options
	parsed := map[string]bool{}
	newFlagSet(&o).VisitAll(func(f *flag.Flag) { parsed[f.Name] = true })
	var missing, stale []string
	for name := range parsed {
		if !documented[name] {
			missing = append(missing, "--"+name)
		}
	}
	for name := range documented {
		if !parsed[name] {
			stale = append(stale, "--"+name)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing)+len(stale) > 0 {
		t.Errorf("docs/coordinator.md's flag table: missing %v, documented but not a flag %v", missing, stale)
	}
}
