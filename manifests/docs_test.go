package manifests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The kustomizations the docs show can be built as shown: their bases and components come
// from one place, all from the repository at one ref (an overlay of your own) or all by a
// relative path that exists from an overlay in this checkout (manifests/overlays/<name>).
// A remote base beside a relative component resolves neither way. The ref is the version's
// tag, so that a release's docs point at itself.
func TestDocsKustomizationsTakeBaseAndComponentsFromOnePlace(t *testing.T) {
	docs, _ := filepath.Glob("../docs/*.md")
	docs = append(docs, "../README.md")
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	found := 0
	for _, doc := range docs {
		for _, m := range block.FindAllStringSubmatch(string(readFile(t, doc)), -1) {
			var k struct {
				Kind       string   `json:"kind"`
				Resources  []string `json:"resources"`
				Components []string `json:"components"`
			}
			if yaml.Unmarshal([]byte(m[1]), &k) != nil || k.Kind != "Kustomization" {
				continue
			}
			found++
			var remote, local []string
			for _, p := range append(k.Resources, k.Components...) {
				if strings.Contains(p, "://") || strings.HasPrefix(p, "github.com/") {
					remote = append(remote, p)
				} else {
					local = append(local, p)
				}
			}
			switch {
			case len(remote) > 0 && len(local) > 0:
				t.Errorf("%s: a kustomization mixes remote %v with relative %v: no overlay resolves both", doc, remote, local)
			case len(remote) > 0:
				ref := regexp.MustCompile(`^https://github\.com/depwatch/depwatch//manifests/[a-z/]+\?ref=v\d+\.\d+\.\d+$`)
				refs := map[string]bool{}
				for _, p := range remote {
					if !ref.MatchString(p) {
						t.Errorf("%s: %q: want https://github.com/depwatch/depwatch//manifests/<dir>?ref=<tag>", doc, p)
					}
					_, r, _ := strings.Cut(p, "?ref=")
					refs[r] = true
					dir := strings.TrimPrefix(strings.Split(p, "//")[2], "manifests/")
					if _, err := os.Stat(strings.TrimSuffix(dir, "?ref="+r)); err != nil {
						t.Errorf("%s: %q: manifests/%s is not in this repository", doc, p, strings.TrimSuffix(dir, "?ref="+r))
					}
				}
				version := strings.TrimSpace(string(readFile(t, "../VERSION")))
				if len(refs) > 1 || !refs[version] {
					t.Errorf("%s: a kustomization takes depwatch at refs %v; want the release's tag, %s (VERSION)", doc, remote, version)
				}
			default:
				for _, p := range local {
					if _, err := os.Stat(filepath.Join("overlays", "example", p)); err != nil {
						t.Errorf("%s: %q does not exist from an overlay in manifests/overlays/<name>", doc, p)
					}
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("no kustomization found in the docs: is the test still reading them?")
	}
}

// The examples run the release image: every depwatch image they name carries the tag in VERSION
// (after a version bump, an example left behind would run the old image, which the admission
// policy then refuses in depwatch's namespace).
func TestExamplesRunTheReleasedImage(t *testing.T) {
	version := strings.TrimSpace(string(readFile(t, "../VERSION")))
	files, _ := filepath.Glob("../examples/*.yaml")
	ref := regexp.MustCompile(`ghcr\.io/depwatch/depwatch(?::([^\s@"']+))?`)
	seen := 0
	for _, f := range files {
		for _, m := range ref.FindAllSubmatch(readFile(t, f), -1) {
			seen++
			if string(m[1]) != version {
				t.Errorf("%s names %s; the release is %s (VERSION)", f, m[0], version)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no example names depwatch's image: nothing checked")
	}
}

// docFiles are the documents a user or contributor reads, relative to manifests/.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, _ := filepath.Glob("../docs/*.md")
	return append(docs, "../README.md", "../CHANGELOG.md", "../CONTRIBUTING.md", "../SECURITY.md", chart+"/README.md")
}

// anchors are the GitHub anchors of a Markdown file's headings: lower case, punctuation other
// than hyphens and underscores dropped, spaces as hyphens, a repeat suffixed -1, -2, ...
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inCode := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r > 127:
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// Every link between the repository's documents resolves: the file exists, and the anchor,
// when there is one, is a heading of it. A renamed heading or a moved file fails here.
func TestDocsLinksAndAnchorsResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	code := regexp.MustCompile("(?s)```.*?```")
	checked := 0
	for _, doc := range docFiles(t) {
		text := code.ReplaceAllString(string(readFile(t, doc)), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), path)
			}
			checked++
			info, err := os.Stat(file)
			if err != nil {
				t.Errorf("%s: link %q: %s does not exist", doc, target, file)
				continue
			}
			if anchor == "" || info.IsDir() || !strings.HasSuffix(file, ".md") {
				continue
			}
			if !anchors(string(readFile(t, file)))[anchor] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", doc, target, file, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no link between the documents found: nothing checked")
	}
}

// Every `make <target>` the documents name is a target of the Makefile that `make help`
// lists (a target with a `## ` description).
func TestDocsNameOnlyMakeTargetsThatExist(t *testing.T) {
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z0-9-]+):.*## `).FindAllStringSubmatch(string(readFile(t, "../Makefile")), -1) {
		listed[m[1]] = true
	}
	// A command: in a code span, or a line of a code block.
	named := regexp.MustCompile("(?m)(?:`|^\\s*(?:\\$ )?)make ([^`\n]+)")
	checked := 0
	for _, doc := range docFiles(t) {
		for _, m := range named.FindAllStringSubmatch(string(readFile(t, doc)), -1) {
			for _, target := range strings.Fields(m[1]) {
				if !regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`).MatchString(target) {
					break // a variable, a flag or the end of the command: the targets are before it
				}
				checked++
				if !listed[target] {
					t.Errorf("%s: names `make %s`, which the Makefile has no `## `-described target for (make help does not list it)", doc, target)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("the documents name no make target: nothing checked")
	}
}

// Every repository path the documents name in a code span (`coordinator/egress`,
// `manifests/base/config.yaml`) exists: a moved or deleted file fails here.
func TestDocsNameOnlyPathsThatExist(t *testing.T) {
	span := regexp.MustCompile("`((?:cmd|coordinator|probe|reaper|jobs|manifests|examples|hack|internal|test|docs)/[A-Za-z0-9_./-]*)`")
	checked := 0
	for _, doc := range docFiles(t) {
		for _, m := range span.FindAllStringSubmatch(string(readFile(t, doc)), -1) {
			p := strings.TrimSuffix(m[1], "/")
			if strings.ContainsAny(p, "*<>") || strings.HasSuffix(p, ".") {
				continue // a pattern or a placeholder
			}
			// A Go identifier after a package's path (`internal/podstate.CrashLoopBackOff`):
			// the package is the path.
			if i := strings.LastIndex(p, "."); i > strings.LastIndex(p, "/") && i+1 < len(p) && p[i+1] >= 'A' && p[i+1] <= 'Z' {
				p = p[:i]
			}
			checked++
			if _, err := os.Stat(filepath.Join("..", p)); err != nil {
				t.Errorf("%s: names `%s`, which is not in the repository", doc, m[1])
			}
		}
	}
	if checked == 0 {
		t.Fatal("the documents name no repository path: nothing checked")
	}
}

// Every depwatch label or annotation key the documents and examples name
// (`depwatch.io/depends-on`, `-l depwatch.io/kind=weeder`) is one the code or the manifests
// use: a key renamed on one side fails here. A key of the form `probe.depwatch.io/<namespace>`
// matches the prefix the code builds it from.
func TestDocsNameOnlyDepwatchKeysThatExist(t *testing.T) {
	key := regexp.MustCompile(`\b((?:[a-z0-9-]+\.)?depwatch\.io/[A-Za-z0-9._-]*)`)
	known := map[string]bool{}
	collect := func(p string, quoted bool) {
		data := readFile(t, p)
		re := key
		if quoted {
			re = regexp.MustCompile(`"((?:[a-z0-9-]+\.)?depwatch\.io/[A-Za-z0-9._-]*)`)
		}
		for _, m := range re.FindAllSubmatch(data, -1) {
			known[string(m[1])] = true
		}
	}
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "_output" || n == "docs" || n == "examples" {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(p, ".go"):
			collect(p, true) // a string literal, not a comment
		case strings.HasPrefix(p, "../manifests/") && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".tpl") || strings.HasSuffix(p, ".json")):
			collect(p, false)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !known["depwatch.io/depends-on"] || !known["depwatch.io/kind"] {
		t.Fatalf("the code's keys were not found (%d found): is the test still reading it?", len(known))
	}
	examples, _ := filepath.Glob("../examples/*.yaml")
	checked := 0
	for _, doc := range append(docFiles(t), examples...) {
		for _, m := range key.FindAllStringSubmatch(string(readFile(t, doc)), -1) {
			k := strings.TrimRight(m[1], ".")
			if k == "depwatch.io/" {
				continue // the domain itself, not a key
			}
			checked++
			if known[k] {
				continue
			}
			prefixed := false
			for p := range known {
				if strings.HasSuffix(p, "/") && strings.HasPrefix(k, p) {
					prefixed = true
				}
			}
			if !prefixed && !(strings.HasPrefix(doc, "../examples/") && exampleOwnKey(t, doc, k)) {
				t.Errorf("%s names %s, a key no code or manifest uses", doc, k)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d depwatch keys found in the documents: is the test still reading them?", checked)
	}
}

// exampleOwnKey reports whether an example defines the key itself: a label its reaper is told
// to select (REQUIRE_LABEL_KEY, EXCLUDE_LABEL_KEY, REQUIRE_ANNOTATION_KEY), which is the
// user's choice, not depwatch's.
func exampleOwnKey(t *testing.T, file, k string) bool {
	re := regexp.MustCompile(`(?s)name: (?:REQUIRE_LABEL_KEY|EXCLUDE_LABEL_KEY|REQUIRE_ANNOTATION_KEY)\s+value: "?` + regexp.QuoteMeta(k) + `"?\s`)
	return re.Match(readFile(t, file))
}
