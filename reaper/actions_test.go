package reaper

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// README.md's list of pod actions is the list the code logs: neither may drift from the other.
func TestReadmeListsEveryPodAction(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("Pod actions:\\s+((?:`[a-z-]+`,?\\s*)+)\\.").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no \"Pod actions: `...`, ...\" list")
	}
	var listed []string
	for _, a := range regexp.MustCompile("`([a-z-]+)`").FindAllSubmatch(m[1], -1) {
		listed = append(listed, string(a[1]))
	}
	want := slices.Clone(PodActions)
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("README.md lists pod actions %v; the code logs %v", listed, want)
	}
}
