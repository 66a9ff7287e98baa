package release

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// dockerStage is what the Dockerfile's final stage says about the image it builds.
type dockerStage struct {
	from, user, workdir string
	entrypoint          []string
	env, labels, args   map[string]string
}

// finalStage reads the Dockerfile's last FROM and what follows it: instructions joined across
// line continuations, comments dropped.
func finalStage(t *testing.T, dockerfile string) dockerStage {
	t.Helper()
	text := strings.ReplaceAll(dockerfile, "\\\n", " ")
	var st dockerStage
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			st = dockerStage{from: strings.Fields(rest)[0], env: map[string]string{}, labels: map[string]string{}, args: map[string]string{}}
		case "USER":
			st.user = rest
		case "WORKDIR":
			st.workdir = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &st.entrypoint); err != nil {
				t.Fatalf("Dockerfile: ENTRYPOINT %s is not in exec form (a JSON array): %v", rest, err)
			}
		case "ENV":
			pairs(st.env, rest)
		case "LABEL":
			pairs(st.labels, rest)
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			st.args[k] = v
		}
	}
	if st.from == "" {
		t.Fatal("Dockerfile: no FROM")
	}
	return st
}

var pair = regexp.MustCompile(`([A-Za-z0-9_.-]+)=("(?:[^"\\]|\\.)*"|\S+)`)

func pairs(into map[string]string, s string) {
	for _, m := range pair.FindAllStringSubmatch(s, -1) {
		into[m[1]] = strings.Trim(m[2], `"`)
	}
}

// imageConf reads hack/image.conf, the settings hack/image.sh builds the release image with.
func imageConf(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(repoRoot + "/hack/image.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+)=(.*)$`).FindAllStringSubmatch(string(b), -1) {
		conf[m[1]] = strings.Trim(m[2], `"`)
	}
	return conf
}

// `docker build` cannot run here: the Dockerfile is held to the image make image packs, each
// platform's. Base, user, entrypoint, working directory, environment and labels are the same
// (the Dockerfile's $VERSION is its ARG default, which is the VERSION file's; $REVISION is the
// commit the archive was built from).
func TestDockerfileBuildsWhatMakeImagePacks(t *testing.T) {
	df, err := os.ReadFile(repoRoot + "/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	st := finalStage(t, string(df))
	conf := imageConf(t)
	version := versionFile(t)
	if st.from != conf["IMAGE_BASE"] {
		t.Errorf("the Dockerfile's final stage is FROM %s; make image packs onto %s (hack/image.conf)", st.from, conf["IMAGE_BASE"])
	}
	if st.args["VERSION"] != version {
		t.Errorf("the Dockerfile's ARG VERSION defaults to %q; the VERSION file says %q", st.args["VERSION"], version)
	}
	if !strings.Contains(string(df), "buildinfo.revision=$REVISION") {
		t.Error("the Dockerfile's go build does not stamp the commit (-X .../internal/buildinfo.revision=$REVISION)")
	}

	_, _, configs := releaseArchive(t).images(t)
	for plat, cfg := range configs {
		c := cfg.Config
		if st.user != c.User {
			t.Errorf("%s: the Dockerfile's USER is %q; make image's %q", plat, st.user, c.User)
		}
		if strings.Join(st.entrypoint, " ") != strings.Join(c.Entrypoint, " ") || len(c.Cmd) != 0 {
			t.Errorf("%s: the Dockerfile's ENTRYPOINT is %q; make image's %q (CMD %q)", plat, st.entrypoint, c.Entrypoint, c.Cmd)
		}
		if st.workdir != c.WorkingDir {
			t.Errorf("%s: the Dockerfile's WORKDIR is %q; make image's %q", plat, st.workdir, c.WorkingDir)
		}
		var env []string
		for k, v := range st.env {
			env = append(env, k+"="+v)
		}
		if strings.Join(env, " ") != strings.Join(c.Env, " ") {
			t.Errorf("%s: the Dockerfile's ENV is %q; make image's %q", plat, env, c.Env)
		}
		vars := strings.NewReplacer("$VERSION", version, "${VERSION}", version,
			"$REVISION", c.Labels["org.opencontainers.image.revision"], "${REVISION}", c.Labels["org.opencontainers.image.revision"])
		labels := map[string]string{}
		for k, v := range st.labels {
			labels[k] = vars.Replace(v)
		}
		if !equalMaps(labels, c.Labels) {
			t.Errorf("%s: the Dockerfile's labels are %v; make image's %v", plat, labels, c.Labels)
		}
	}
	if conf["IMAGE_ENTRYPOINT"] != strings.Join(st.entrypoint, " ") || conf["IMAGE_USER"] != st.user {
		t.Errorf("hack/image.conf says entrypoint %q, user %q; the Dockerfile %q, %q",
			conf["IMAGE_ENTRYPOINT"], conf["IMAGE_USER"], st.entrypoint, st.user)
	}
}
