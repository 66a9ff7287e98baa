package reaper

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// reapDoc is the document that holds depwatch reap's reference: its variable table and its
// list of pod actions.
const reapDoc = "docs/pod-reaper.md"

// The reap reference's table of `depwatch reap` variables (reapDoc, section "## depwatch reap")
// names exactly the variables the reaper reads (its settings table, which --help is printed
// from): a variable added to one and not the other fails here.
func TestReapDocTableNamesEveryReapVariable(t *testing.T) {
	readme, err := os.ReadFile("../" + reapDoc)
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "\n## depwatch reap\n")
	if start < 0 {
		t.Fatal(reapDoc + " has no \"## depwatch reap\" section")
	}
	section = section[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	name := regexp.MustCompile("`([A-Z_]+)`")
	var documented []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| variable") {
			continue
		}
		first := strings.Split(line, "|")[1]
		prefix := ""
		for _, m := range name.FindAllStringSubmatch(first, -1) {
			v := m[1]
			if strings.HasPrefix(v, "_") { // `EXCLUDE_LABEL_KEY` / `_VALUES`
				v = prefix + v
			} else if i := strings.LastIndex(v, "_"); i > 0 {
				prefix = v[:i]
			}
			documented = append(documented, v)
		}
	}
	var read []string
	for _, s := range settings {
		if strings.HasPrefix(s.Desc, "refused:") {
			continue // listed only to be refused with a reason; the doc's prose names it
		}
		read = append(read, s.Name)
	}
	// The log settings are read by the command, for every subcommand alike.
	read = append(read, "LOG_LEVEL", "LOG_FORMAT")
	slices.Sort(documented)
	slices.Sort(read)
	for _, v := range read {
		if !slices.Contains(documented, v) {
			t.Errorf("%s is read by depwatch reap but not in %s's table", v, reapDoc)
		}
	}
	for _, v := range documented {
		if !slices.Contains(read, v) {
			t.Errorf("%s's table documents %s, which depwatch reap does not read", reapDoc, v)
		}
	}
}
