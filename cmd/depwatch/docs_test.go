package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The documents a user reads, relative to cmd/depwatch. CHANGELOG.md is left out: it records
// what was, and may name a flag or variable that has since been renamed.
func userDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs found: %v", err)
	}
	return append(docs, "../../README.md", "../../CONTRIBUTING.md", "../../SECURITY.md",
		"../../manifests/charts/depwatch/README.md")
}

func exampleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	return files
}

// help is what `depwatch <command> --help` prints, for every command the binary has.
func help(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	none := func(string) (string, bool) { return "", false }
	for _, c := range commands() {
		var b bytes.Buffer
		c.run(context.Background(), []string{"--help"}, none, &b, &b)
		out[c.name] = b.String()
	}
	var b bytes.Buffer
	usage(&b)
	out[""] = b.String()
	return out
}

// commandFlags are the flags of each command (and of depwatch without one, ""), read from what
// its --help prints: the flag sets' own PrintDefaults lines ("  -name type" or "  --name type").
// Every command also answers to -h and --help.
func commandFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	line := regexp.MustCompile(`(?m)^\s+--?([a-z][a-z0-9-]*)\b`)
	out := map[string]map[string]bool{}
	for name, text := range help(t) {
		flags := map[string]bool{"help": true, "h": true}
		if name != "" {
			for _, m := range line.FindAllStringSubmatch(text, -1) {
				flags[m[1]] = true
			}
		} else {
			flags["version"] = true // depwatch --version
		}
		out[name] = flags
	}
	for _, c := range []string{"coordinator", "weeder", "prober", "reap", "probe"} {
		if len(out[c]) <= 2 {
			t.Fatalf("depwatch %s --help lists no flag: is the test still reading the help?", c)
		}
	}
	return out
}

// foreignFlags are the flags of other tools that the docs name alone in a code span, with the
// tool: such a span is not about depwatch.
var foreignFlags = map[string]string{
	"set":          "helm",
	"set-file":     "helm",
	"build-arg":    "docker",
	"grace-period": "kubectl",
}

// A depwatch command line: the binary under either of its names and a command, or depwatch
// alone at the start of a line with a flag (`depwatch --help`).
var (
	commandLine = regexp.MustCompile(`(?:^|[\s"'(/\[])(?:depwatch|dependency-watchdog)\s+(reap|coordinator|probe|weeder|prober|version)\b(.*)`)
	globalLine  = regexp.MustCompile(`^\s*(?:\$ )?depwatch(\s+-.*)`)
)

// flagToken is a flag given on a command line: -name, --name or --name=value.
var flagToken = regexp.MustCompile(`^--?([a-z][a-z0-9-]*)(?:=.*)?$`)

// commandFlagsUsed returns the command a line runs ("" for depwatch alone) and the flags it
// gives, up to the end of the command (a pipe, a comment, the next command).
func commandFlagsUsed(line string) (cmd string, flags []string, ok bool) {
	var rest string
	if m := commandLine.FindStringSubmatch(line); m != nil {
		cmd, rest = m[1], m[2]
	} else if m := globalLine.FindStringSubmatch(line); m != nil {
		rest = m[1]
	} else {
		return "", nil, false
	}
	for _, f := range strings.Fields(rest) {
		if f == "|" || f == "||" || f == "&&" || f == ";" || strings.HasPrefix(f, "#") || strings.HasPrefix(f, "2>") {
			break
		}
		f = strings.Trim(f, `"',[]`)
		if m := flagToken.FindStringSubmatch(f); m != nil {
			flags = append(flags, m[1])
		}
	}
	return cmd, flags, true
}

var (
	fence    = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	span     = regexp.MustCompile("`([^`]+)`") // may continue over a line break
	yamlArgs = regexp.MustCompile(`^\s*args:\s*\[\s*"?([a-z]+)"?\s*,(.*)\]`)
	yamlFlag = regexp.MustCompile(`^\s*-\s+"?(--?[a-z][a-z0-9-]*(?:=[^"\s]*)?)"?\s*(?:#.*)?$`)
)

// Every flag the documents name exists: a flag on a depwatch command line (in a code span, a
// code block or a container's args) is a flag of that command, and a flag named alone in a
// code span (`--kube-api-qps`) is a flag of some depwatch command, unless it is another tool's
// (foreignFlags). The flags come from the commands' own --help, so a flag renamed in the code
// or in a document fails here.
func TestDocsNameOnlyFlagsDepwatchHas(t *testing.T) {
	flags := commandFlags(t)
	anyCommand := map[string]bool{}
	for _, set := range flags {
		for f := range set {
			anyCommand[f] = true
		}
	}
	for f, tool := range foreignFlags {
		if anyCommand[f] {
			t.Errorf("--%s is listed as %s's flag, but a depwatch command has it too: remove it from foreignFlags", f, tool)
		}
	}
	checked := 0
	check := func(doc, where, cmd string, used []string) {
		for _, f := range used {
			checked++
			if !flags[cmd][f] {
				name := "depwatch " + cmd
				if cmd == "" {
					name = "depwatch"
				}
				t.Errorf("%s: %q gives --%s, which %s does not have (see %s --help)", doc, where, f, name, name)
			}
		}
	}
	for _, doc := range append(userDocs(t), exampleFiles(t)...) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		var blocks []string
		if strings.HasSuffix(doc, ".yaml") {
			blocks = []string{text}
		} else {
			for _, m := range fence.FindAllStringSubmatch(text, -1) {
				blocks = append(blocks, m[1])
			}
			text = fence.ReplaceAllString(text, "")
			for _, m := range span.FindAllStringSubmatch(text, -1) {
				s := strings.Join(strings.Fields(m[1]), " ")
				if strings.Contains(m[1], "\n\n") || s == "" {
					continue // not a span: a paragraph ends first
				}
				if cmd, used, ok := commandFlagsUsed(s); ok {
					check(doc, s, cmd, used)
					continue
				}
				if f := flagToken.FindStringSubmatch(strings.Fields(s)[0]); f != nil && strings.HasPrefix(s, "--") {
					checked++
					if !anyCommand[f[1]] && foreignFlags[f[1]] == "" {
						t.Errorf("%s: `%s` names --%s, which no depwatch command has (nor is it a known flag of helm, kubectl or docker)", doc, s, f[1])
					}
				}
			}
		}
		for _, block := range blocks {
			// A command continued over lines is one line.
			block = strings.ReplaceAll(block, "\\\n", " ")
			for _, line := range strings.Split(block, "\n") {
				if cmd, used, ok := commandFlagsUsed(line); ok {
					check(doc, strings.TrimSpace(line), cmd, used)
				} else if m := yamlArgs.FindStringSubmatch(line); m != nil {
					var used []string
					for _, a := range strings.Split(m[2], ",") {
						if f := flagToken.FindStringSubmatch(strings.Trim(strings.TrimSpace(a), `"'`)); f != nil {
							used = append(used, f[1])
						}
					}
					check(doc, strings.TrimSpace(line), m[1], used)
				} else if m := yamlFlag.FindStringSubmatch(line); m != nil {
					// A container's args, one a line: a flag of some depwatch command.
					f := flagToken.FindStringSubmatch(m[1])
					checked++
					if !anyCommand[f[1]] {
						t.Errorf("%s: args line %q gives --%s, which no depwatch command has", doc, strings.TrimSpace(line), f[1])
					}
				}
			}
		}
	}
	t.Logf("%d flags checked", checked)
	if checked < 20 {
		t.Fatalf("only %d flags found in the documents: is the test still reading them?", checked)
	}
}

// variables are the environment variables depwatch reads, by command, from their --help: the
// coordinator's "env DEPWATCH_..." of each flag, the reap and probe tables' rows, the logging
// rows every command shares, and the $VARIABLES the help names (KUBECONFIG).
func variables(t *testing.T) (byCommand map[string]map[string]bool, all map[string]bool) {
	t.Helper()
	row := regexp.MustCompile(`(?m)^([A-Z][A-Z0-9_]*[A-Z0-9])\s{2,}`)
	env := regexp.MustCompile(`\benv (DEPWATCH_[A-Z0-9_]+)`)
	dollar := regexp.MustCompile(`\$([A-Z][A-Z0-9_]+)`)
	byCommand, all = map[string]map[string]bool{}, map[string]bool{}
	for name, text := range help(t) {
		set := map[string]bool{}
		for _, re := range []*regexp.Regexp{row, env, dollar} {
			for _, m := range re.FindAllStringSubmatch(text, -1) {
				if m[1] != "VARIABLE" { // the table's header
					set[m[1]] = true
					all[m[1]] = true
				}
			}
		}
		byCommand[name] = set
	}
	for _, c := range []string{"reap", "probe"} {
		if !byCommand[c]["LOG_LEVEL"] || !byCommand[c]["NAMESPACE"] {
			t.Fatalf("depwatch %s --help: no environment table found (%v)", c, byCommand[c])
		}
	}
	if !byCommand["coordinator"]["DEPWATCH_CONFIG_FILE"] {
		t.Fatalf("depwatch coordinator --help names no DEPWATCH_ variable: is the test still reading it?")
	}
	return byCommand, all
}

// knobNames are the variables the repository's scripts, Makefile and tests read (not the
// depwatch commands, whose variables their --help lists): a Makefile variable (`NAME ?=`), a
// variable a script reads (`${NAME`, `$NAME`) or a recipe passes on (`NAME=$(...)`), and one
// a Go test, tool or the coordinator looks up by its literal name (`os.Getenv("NAME")`,
// `lookup("POD_NAMESPACE")`).
func knobNames(t *testing.T) map[string]bool {
	t.Helper()
	shell := regexp.MustCompile(`\$\{?([A-Z][A-Z0-9_]*[A-Z0-9])\b`)
	makeVar := regexp.MustCompile(`(?m)^([A-Z][A-Z0-9_]*[A-Z0-9])\s*\??:?=|\b([A-Z][A-Z0-9_]*[A-Z0-9])=\$\(`)
	goEnv := regexp.MustCompile(`(?:Getenv|LookupEnv|lookup)\("([A-Z][A-Z0-9_]*[A-Z0-9])"\)`)
	out := map[string]bool{}
	add := func(re *regexp.Regexp, data []byte) {
		for _, m := range re.FindAllSubmatch(data, -1) {
			for _, g := range m[1:] {
				if len(g) > 0 {
					out[string(g)] = true
				}
			}
		}
	}
	read := func(p string) []byte {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	add(makeVar, read("../../Makefile"))
	add(shell, read("../../Makefile"))
	// The coordinator's own code also reads the downward API's POD_NAME and POD_NAMESPACE.
	for _, dir := range []string{"../../hack", "../../.ci", "../../test", "../../coordinator", "../../cmd"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch {
			case strings.HasSuffix(p, ".go"):
				add(goEnv, read(p))
			case strings.HasSuffix(p, ".sh"), filepath.Base(p) == "run":
				add(shell, read(p))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"E2E_PARALLEL", "DEPWATCH_BENCH_SCALE", "DEPWATCH_CACHE_DIR"} {
		if !out[v] {
			t.Fatalf("%s is not among the variables the scripts, Makefile and tests read: is the test still finding them? (%d found)", v, len(out))
		}
	}
	return out
}

// placeholders are upper-case names the docs use for "a variable" in general, not one.
var placeholders = map[string]bool{"NAME": true, "VARIABLE": true}

// foreignVariables are other programs' variables the docs name, with the program.
var foreignVariables = map[string]string{
	"GOGC":                    "the Go runtime",
	"GOMEMLIMIT":              "the Go runtime",
	"CGO_ENABLED":             "the Go toolchain",
	"TZ":                      "the C library (a SCHEDULE prefix robfig/cron reads)",
	"CI":                      "CI systems (set by them; the docs say how a run was made)",
	"IMAGEVECTOR_OVERWRITE":   "gardenlet",
	"KUBERNETES_SERVICE_HOST": "client-go's in-cluster config",
	"KUBERNETES_SERVICE_PORT": "client-go's in-cluster config",
}

// Every environment variable the documents and examples name exists: a depwatch command reads
// it (its --help lists it), or the repository's scripts, Makefile or tests read it, or it is
// another program's (foreignVariables). In the examples, every variable a depwatch container
// sets is one its command reads.
func TestDocsNameOnlyVariablesThatExist(t *testing.T) {
	byCommand, all := variables(t)
	source := knobNames(t)
	known := func(v string) bool {
		// Not a command's variable: a test's, a script's or the Makefile's, spelt out where
		// it is read.
		return all[v] || placeholders[v] || source[v] || foreignVariables[v] != ""
	}
	anyName := regexp.MustCompile(`\bDEPWATCH_[A-Z0-9_]*[A-Z0-9]\b`)
	spanVar := regexp.MustCompile(`^\$?([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)$|^([A-Z][A-Z0-9_]*)=`)
	assign := regexp.MustCompile(`(?:^|[\s(])([A-Z][A-Z0-9_]*)=`)
	checked := 0
	for _, doc := range userDocs(t) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		seen := map[string]bool{}
		report := func(v, where string) {
			checked++
			if !known(v) && !seen[v] {
				seen[v] = true
				t.Errorf("%s: %s names %s, which no depwatch command reads (its --help) and no script, Makefile or test reads", doc, where, v)
			}
		}
		for _, v := range anyName.FindAllString(text, -1) {
			report(v, "the text")
		}
		for _, m := range fence.FindAllStringSubmatch(text, -1) {
			for _, line := range strings.Split(m[1], "\n") {
				if strings.Contains(line, "://") && !strings.Contains(line, " ") {
					continue
				}
				for _, a := range assign.FindAllStringSubmatch(line, -1) {
					report(a[1], "a command line")
				}
			}
		}
		for _, m := range span.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
			if strings.Contains(m[1], "\n\n") {
				continue
			}
			if v := spanVar.FindStringSubmatch(strings.TrimSpace(m[1])); v != nil {
				report(v[1]+v[2], "`"+m[1]+"`")
			}
		}
	}
	for _, file := range exampleFiles(t) {
		for _, c := range exampleContainers(t, file) {
			cmd := "reap" // depwatch started without a command runs reap
			if len(c.Args) > 0 {
				cmd = c.Args[0]
			}
			for _, e := range c.Env {
				checked++
				if !byCommand[cmd][e.Name] && foreignVariables[e.Name] == "" {
					t.Errorf("%s: container %s runs depwatch %s with %s, which depwatch %s does not read (see its --help)", file, c.Name, cmd, e.Name, cmd)
				}
			}
		}
	}
	t.Logf("%d variables checked", checked)
	if checked < 50 {
		t.Fatalf("only %d variables found in the documents and examples: is the test still reading them?", checked)
	}
}

type exampleContainer struct {
	Name  string   `json:"name"`
	Image string   `json:"image"`
	Args  []string `json:"args"`
	Env   []struct {
		Name string `json:"name"`
	} `json:"env"`
}

// exampleContainers are the containers of an example manifest that run depwatch's image.
func exampleContainers(t *testing.T, file string) []exampleContainer {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []exampleContainer
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, findContainers(t, obj)...)
	}
	return out
}

func findContainers(t *testing.T, v any) []exampleContainer {
	var out []exampleContainer
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "containers" {
				list, _ := v[k].([]any)
				for _, c := range list {
					var ec exampleContainer
					m, _ := c.(map[string]any)
					ec.Name, _ = m["name"].(string)
					ec.Image, _ = m["image"].(string)
					for _, a := range asList(m["args"]) {
						s, _ := a.(string)
						ec.Args = append(ec.Args, s)
					}
					for _, e := range asList(m["env"]) {
						em, _ := e.(map[string]any)
						n, _ := em["name"].(string)
						ec.Env = append(ec.Env, struct {
							Name string `json:"name"`
						}{n})
					}
					if strings.Contains(ec.Image, "depwatch") {
						out = append(out, ec)
					}
				}
				continue
			}
			out = append(out, findContainers(t, v[k])...)
		}
	case []any:
		for _, e := range v {
			out = append(out, findContainers(t, e)...)
		}
	}
	return out
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
