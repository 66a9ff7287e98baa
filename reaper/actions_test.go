package reaper

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// The reap reference's list of pod actions (reapDoc) is the list the code logs: neither may
// drift from the other.
func TestReapDocListsEveryPodAction(t *testing.T) {
	readme, err := os.ReadFile("../" + reapDoc)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("Pod actions:\\s+((?:`[a-z-]+`,?\\s*)+)\\.").FindSubmatch(readme)
	if m == nil {
		t.Fatal(reapDoc + " has no \"Pod actions: `...`, ...\" list")
	}
	var listed []string
	for _, a := range regexp.MustCompile("`([a-z-]+)`").FindAllSubmatch(m[1], -1) {
		listed = append(listed, string(a[1]))
	}
	want := slices.Clone(PodActions)
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("%s lists pod actions %v; the code logs %v", reapDoc, listed, want)
	}
}
