// Command imgpack packs one static binary into a single-layer container image and
// writes it as an image tarball (docker "save" format, which `ctr images import`
// and `docker load` both read). No Docker engine is needed.
//
//	imgpack -binary _output/bin/depwatch -name depwatch -tag localhost/depwatch:dev -o _output/images/depwatch.tar \
//	        -link usr/local/bin/dependency-watchdog
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
)

func main() {
	binary := flag.String("binary", "", "path of the static binary to pack (required)")
	inName := flag.String("name", "", "file name of the binary inside the image, at / (default: base name of -binary)")
	tag := flag.String("tag", "", "image reference to record in the tarball, e.g. localhost/depwatch:dev (required)")
	out := flag.String("o", "", "output tarball path (required)")
	user := flag.String("user", "65532", "user the image runs as")
	arch := flag.String("arch", runtime.GOARCH, "image architecture")
	link := flag.String("link", "", "another path of the binary in the image, a symbolic link to /<name> (e.g. usr/local/bin/dependency-watchdog, where gardenlet starts dependency-watchdog)")
	flag.Parse()
	if *binary == "" || *tag == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "imgpack: -binary, -tag and -o are required")
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*binary, *inName, *tag, *out, *user, *arch, *link); err != nil {
		fmt.Fprintf(os.Stderr, "imgpack: %v\n", err)
		os.Exit(1)
	}
}

func run(binary, inName, tag, out, user, arch, link string) error {
	if inName == "" {
		inName = path.Base(binary)
	}
	inName = strings.TrimPrefix(inName, "/")
	ref, err := name.NewTag(tag, name.WeakValidation)
	if err != nil {
		return fmt.Errorf("bad tag %q: %w", tag, err)
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		return err
	}

	// One layer: the binary at /<name>, mode 0755, owned by root; a fixed mtime
	// keeps the image digest reproducible for the same binary.
	epoch := time.Unix(0, 0)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 01777, ModTime: epoch}); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: inName, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data)), ModTime: epoch}); err != nil {
		return err
	}
	if _, err := tw.Write(data); err != nil {
		return err
	}
	if err := writeLink(tw, strings.Trim(link, "/"), "/"+inName, epoch); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return err
	}

	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
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
	img, err = mutate.ConfigFile(img, cfg)
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
	also := ""
	if link != "" {
		also = ", also at /" + strings.Trim(link, "/")
	}
	fmt.Printf("imgpack: wrote %s (%s, %s, entrypoint /%s%s)\n", out, ref.Name(), digest, inName, also)
	return nil
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
