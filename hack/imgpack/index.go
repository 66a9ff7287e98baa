package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// runIndex packs one image per OS/ARCH=BINARY of platforms into an image index and writes
// it as an OCI image layout archive (oci-layout, index.json, blobs/sha256/...): index.json
// lists that one index, named by the annotations containerd (`ctr images import`, `kind load
// image-archive`, `docker load`) and skopeo (`oci-archive:`) read.
func runIndex(platforms []string, inName, tag, out, user, link string, labels map[string]string) error {
	ref, err := name.NewTag(tag, name.WeakValidation)
	if err != nil {
		return fmt.Errorf("bad tag %q: %w", tag, err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var names []string
	for _, p := range platforms {
		plat, binary, ok := strings.Cut(p, "=")
		osName, arch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 || osName != "linux" || arch == "" || binary == "" {
			return fmt.Errorf("-platform %q: want linux/ARCH=BINARY", p)
		}
		in := inName
		if in == "" {
			in = path.Base(binary)
		}
		img, err := buildImage(binary, strings.TrimPrefix(in, "/"), user, arch, link, labels, true)
		if err != nil {
			return fmt.Errorf("%s: %w", plat, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: osName, Architecture: arch}},
		})
		names = append(names, plat)
	}
	if len(labels) > 0 {
		idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	}

	dir, err := os.MkdirTemp(filepath.Dir(out), ".imgpack-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		// containerd and docker load name the image by this; the OCI spec's ref.name is the tag.
		"io.containerd.image.name":          ref.Name(),
		"org.opencontainers.image.ref.name": ref.TagStr(),
	})); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("imgpack: wrote %s (OCI image layout: %s, index %s for %s, entrypoint /%s%s)\n",
		out, ref.Name(), digest, strings.Join(names, ", "), strings.TrimPrefix(inName, "/"), alsoAt(link))
	return nil
}

// tarDir writes the files under dir into the tar archive out, in lexical order, with fixed
// owners and times: the same layout gives the same archive.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	epoch := time.Unix(0, 0)
	walkErr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Name: rel + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch})
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: 0o644, Size: info.Size(), ModTime: epoch}); err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if walkErr != nil {
		f.Close()
		return walkErr
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
