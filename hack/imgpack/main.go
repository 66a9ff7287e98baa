// Command imgpack packs static binaries into single-layer container images without a Docker
// engine, in one of two forms:
//
// One binary, one architecture: an image tarball (docker "save" format, which `ctr images
// import` and `docker load` both read), as the local cluster imports it.
//
//	imgpack -binary _output/bin/depwatch -name depwatch -tag localhost/depwatch:dev -o _output/images/depwatch.tar \
//	        -link usr/local/bin/dependency-watchdog
//
// One binary per platform (-platform, repeated): an OCI image layout archive whose index.json
// names one image index listing every platform's image (index.go), as a release ships it.
//
//	imgpack -platform linux/amd64=_output/bin/depwatch-amd64 -platform linux/arm64=_output/bin/depwatch-arm64 \
//	        -name depwatch -tag ghcr.io/depwatch/depwatch:v0.1.0 -o depwatch-v0.1.0.tar \
//	        -user 65532:65532 -label org.opencontainers.image.version=v0.1.0 ...
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// listFlag collects a repeated flag's values.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	binary := flag.String("binary", "", "path of the static binary to pack (required)")
	inName := flag.String("name", "", "file name of the binary inside the image, at / (default: base name of -binary)")
	tag := flag.String("tag", "", "image reference to record in the tarball, e.g. localhost/depwatch:dev (required)")
	out := flag.String("o", "", "output tarball path (required)")
	user := flag.String("user", "65532", "user the image runs as")
	arch := flag.String("arch", runtime.GOARCH, "image architecture")
	link := flag.String("link", "", "another path of the binary in the image, a symbolic link to /<name> (e.g. usr/local/bin/dependency-watchdog, where gardenlet starts dependency-watchdog)")
	var platforms, labels listFlag
	flag.Var(&platforms, "platform", "OS/ARCH=BINARY, repeated: write an OCI image layout archive with an index of one image per platform (instead of -binary and -arch)")
	flag.Var(&labels, "label", "KEY=VALUE, repeated: an image label (and, for -platform, an annotation of the index)")
	flag.Parse()
	if (*binary == "") == (len(platforms) == 0) || *tag == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "imgpack: -tag, -o and either -binary or -platform are required")
		flag.Usage()
		os.Exit(2)
	}
	labelMap, err := keyValues(labels)
	if err != nil {
		fmt.Fprintf(os.Stderr, "imgpack: -label: %v\n", err)
		os.Exit(2)
	}
	if len(platforms) > 0 {
		err = runIndex(platforms, *inName, *tag, *out, *user, *link, labelMap)
	} else {
		err = run(*binary, *inName, *tag, *out, *user, *arch, *link, labelMap)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "imgpack: %v\n", err)
		os.Exit(1)
	}
}

func run(binary, inName, tag, out, user, arch, link string, labels map[string]string) error {
	if inName == "" {
		inName = path.Base(binary)
	}
	inName = strings.TrimPrefix(inName, "/")
	ref, err := name.NewTag(tag, name.WeakValidation)
	if err != nil {
		return fmt.Errorf("bad tag %q: %w", tag, err)
	}
	img, err := buildImage(binary, inName, user, arch, link, labels, false)
	if err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("imgpack: wrote %s (%s, %s, entrypoint /%s%s)\n", out, ref.Name(), digest, inName, alsoAt(link))
	return nil
}

func alsoAt(link string) string {
	if link == "" {
		return ""
	}
	return ", also at /" + strings.Trim(link, "/")
}

// buildImage packs binary as /inName for linux/arch. oci: OCI media types (the index
// archive's); otherwise Docker's (the docker "save" tarball's, as the local cluster has
// always imported it).
func buildImage(binary, inName, user, arch, link string, labels map[string]string, oci bool) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}

	// One layer: the binary at /<name>, mode 0755, owned by root; a fixed mtime
	// keeps the image digest reproducible for the same binary.
	epoch := time.Unix(0, 0)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 01777, ModTime: epoch}); err != nil {
		return nil, err
	}
	if err := tw.WriteHeader(&tar.Header{Name: inName, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data)), ModTime: epoch}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := writeLink(tw, strings.Trim(link, "/"), "/"+inName, epoch); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	var layerOpts []tarball.LayerOption
	base := empty.Image
	if oci {
		layerOpts = append(layerOpts, tarball.WithMediaType(types.OCILayer))
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, layerOpts...)
	if err != nil {
		return nil, err
	}

	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture = arch
	cfg.OS = "linux"
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{"/" + inName}
	// No Cmd: a pod that gives no command and no args (pod-reaper's Deployments) starts the
	// binary with none, and depwatch then runs reap from its environment.
	cfg.Config.Cmd = nil
	cfg.Config.User = user
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/"}
	if len(labels) > 0 {
		cfg.Config.Labels = labels
	}
	return mutate.ConfigFile(img, cfg)
}

// keyValues parses KEY=VALUE pairs.
func keyValues(pairs []string) (map[string]string, error) {
	m := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not KEY=VALUE", p)
		}
		m[k] = v
	}
	return m, nil
}

// writeLink adds the directories of link and link itself, a symbolic link to target; nothing
// when link is empty.
func writeLink(tw *tar.Writer, link, target string, mtime time.Time) error {
	if link == "" {
		return nil
	}
	dirs := strings.Split(link, "/")
	for i := 1; i < len(dirs); i++ {
		dir := strings.Join(dirs[:i], "/") + "/"
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}); err != nil {
			return err
		}
	}
	return tw.WriteHeader(&tar.Header{Name: link, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777, ModTime: mtime})
}
