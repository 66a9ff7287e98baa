// Package release holds no code: its tests check the release image, the archive `make image`
// writes (hack/image.sh release) and the Dockerfile that builds the same image with Docker.
package release

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const repoRoot = "../.."

// The archive under test: DEPWATCH_RELEASE_ARCHIVE names one make image wrote; otherwise the
// first test that needs it builds one with hack/image.sh release (a fresh machine compiles
// client-go for arm64 once, some minutes; after that, seconds).
var (
	archiveOnce sync.Once
	archivePath string
	archiveErr  error
)

func releaseArchive(t *testing.T) *archive {
	t.Helper()
	archiveOnce.Do(func() {
		if p := os.Getenv("DEPWATCH_RELEASE_ARCHIVE"); p != "" {
			archivePath = p
			return
		}
		if testing.Short() {
			archiveErr = errSkip
			return
		}
		dir, err := os.MkdirTemp("", "depwatch-release-test-")
		if err != nil {
			archiveErr = err
			return
		}
		archivePath = filepath.Join(dir, "depwatch.tar")
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "./hack/image.sh", "release")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "IMAGE_OUT="+archivePath, "REVISION=")
		if out, err := cmd.CombinedOutput(); err != nil {
			archiveErr = fmt.Errorf("hack/image.sh release (what make image runs) failed: %v\n%s", err, out)
		}
	})
	if errors.Is(archiveErr, errSkip) {
		t.Skip("-short: not building the release archive (set DEPWATCH_RELEASE_ARCHIVE=_output/images/depwatch-<VERSION>.tar to check one make image wrote)")
	}
	if archiveErr != nil {
		t.Fatal(archiveErr)
	}
	a, err := readArchive(archivePath)
	if err != nil {
		t.Fatalf("%s: %v", archivePath, err)
	}
	return a
}

var errSkip = errors.New("skip")

// archive is an OCI image layout read from a tar: its files by name.
type archive struct{ files map[string][]byte }

func readArchive(path string) (*archive, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := &archive{files: map[string][]byte{}}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return a, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			a.files[h.Name] = b
		}
	}
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type index struct {
	MediaType   string            `json:"mediaType"`
	Manifests   []descriptor      `json:"manifests"`
	Annotations map[string]string `json:"annotations"`
}

// imageConfig is the part of an image's config a pod's container gets.
type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Env        []string          `json:"Env"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

func (a *archive) json(name string, into any) error {
	b, ok := a.files[name]
	if !ok {
		return fmt.Errorf("the archive has no %s", name)
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (a *archive) blob(d descriptor, into any) error {
	return a.json("blobs/"+strings.Replace(d.Digest, ":", "/", 1), into)
}

// images reads index.json's one entry, the image index, and each platform's config.
func (a *archive) images(t *testing.T) (top descriptor, idx index, configs map[string]imageConfig) {
	t.Helper()
	var layoutIndex index
	if err := a.json("index.json", &layoutIndex); err != nil {
		t.Fatal(err)
	}
	if len(layoutIndex.Manifests) != 1 || layoutIndex.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json lists %+v; want one OCI image index", layoutIndex.Manifests)
	}
	top = layoutIndex.Manifests[0]
	if err := a.blob(top, &idx); err != nil {
		t.Fatal(err)
	}
	configs = map[string]imageConfig{}
	for _, m := range idx.Manifests {
		if m.Platform == nil {
			t.Fatalf("the image index lists %s without a platform", m.Digest)
		}
		var manifest struct{ Config descriptor }
		var cfg imageConfig
		if err := a.blob(m, &manifest); err != nil {
			t.Fatal(err)
		}
		if err := a.blob(manifest.Config, &cfg); err != nil {
			t.Fatal(err)
		}
		plat := m.Platform.OS + "/" + m.Platform.Architecture
		if cfg.OS+"/"+cfg.Architecture != plat {
			t.Errorf("the index lists %s for an image whose config says %s/%s", plat, cfg.OS, cfg.Architecture)
		}
		configs[plat] = cfg
	}
	return top, idx, configs
}

func gitHead(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repoRoot, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("no git checkout to compare the image's commit with: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func versionFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(repoRoot + "/VERSION")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// make image writes one archive whose index holds the image for linux/amd64 and
// linux/arm64, each labelled with the source, version, commit and licence, and named
// ghcr.io/depwatch/depwatch:<VERSION> for the tools that load it.
func TestReleaseArchiveIndexListsAmd64AndArm64WithTheOCILabels(t *testing.T) {
	a := releaseArchive(t)
	if _, ok := a.files["oci-layout"]; !ok {
		t.Error("the archive has no oci-layout file: not an OCI image layout")
	}
	top, idx, configs := a.images(t)
	version := versionFile(t)
	if got, want := top.Annotations["io.containerd.image.name"], "ghcr.io/depwatch/depwatch:"+version; got != want {
		t.Errorf("index.json names the image %q (io.containerd.image.name); want %q", got, want)
	}
	if got := top.Annotations["org.opencontainers.image.ref.name"]; got != version {
		t.Errorf("index.json's ref.name is %q; want the tag %q", got, version)
	}
	plats := slices.Sorted(func(yield func(string) bool) {
		for p := range configs {
			if !yield(p) {
				return
			}
		}
	})
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(plats, want) {
		t.Fatalf("the image index lists %v; want %v", plats, want)
	}
	want := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/depwatch/depwatch",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	if os.Getenv("DEPWATCH_RELEASE_ARCHIVE") == "" {
		want["org.opencontainers.image.revision"] = gitHead(t) // built here, from HEAD
	}
	for plat, cfg := range configs {
		for k, v := range want {
			if cfg.Config.Labels[k] != v {
				t.Errorf("%s: label %s=%q; want %q", plat, k, cfg.Config.Labels[k], v)
			}
		}
		if rev := cfg.Config.Labels["org.opencontainers.image.revision"]; len(rev) != 40 {
			t.Errorf("%s: label org.opencontainers.image.revision=%q; want a full commit hash", plat, rev)
		}
		if !equalMaps(cfg.Config.Labels, idx.Annotations) {
			t.Errorf("%s: labels %v; the index's annotations %v", plat, cfg.Config.Labels, idx.Annotations)
		}
	}
	if !equalMaps(configs["linux/amd64"].Config.Labels, configs["linux/arm64"].Config.Labels) {
		t.Errorf("the two platforms' labels differ: %v, %v", configs["linux/amd64"].Config.Labels, configs["linux/arm64"].Config.Labels)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// The archive holds what it says: every blob's name is its content's digest.
func TestReleaseArchiveBlobsMatchTheirDigests(t *testing.T) {
	a := releaseArchive(t)
	for name, b := range a.files {
		hex, ok := strings.CutPrefix(name, "blobs/sha256/")
		if !ok {
			continue
		}
		if got := sha256Hex(b); got != hex {
			t.Errorf("%s holds content of digest sha256:%s", name, got)
		}
	}
	if bytes.Count(a.files["index.json"], []byte("digest")) == 0 {
		t.Error("index.json names no blob")
	}
}
