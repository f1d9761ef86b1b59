package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The annotations of the archive's index.json entry that name the image:
// the OCI one holds the tag (what `skopeo copy oci-archive:FILE:TAG` and
// the image layout spec read), containerd's the whole reference (what
// `ctr images import` names the image by).
const (
	annotationRefName        = "org.opencontainers.image.ref.name"
	annotationContainerdName = "io.containerd.image.name"
)

// WriteArchive writes idx as an OCI image layout in one tar file (an "OCI
// archive": what `ctr images import`, `skopeo copy oci-archive:`, `podman
// load` and `docker load` read), its one entry the index named ref. Every
// file in the tar has mtime and owner 0 and is in name order, so the same
// index makes the same archive byte for byte.
func WriteArchive(path string, idx v1.ImageIndex, ref name.Tag) error {
	dir, err := os.MkdirTemp("", "ipvsproxy-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write an OCI layout in %s: %w", dir, err)
	}
	if err := l.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		annotationRefName:        ref.TagStr(),
		annotationContainerdName: ref.Name(),
	})); err != nil {
		return fmt.Errorf("write the index into the layout: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := tarDir(f, dir); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// tarDir writes dir's regular files and directories into w, sorted, with
// no times or owners.
func tarDir(w io.Writer, dir string) error {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		switch {
		case fi.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		case fi.Mode().IsRegular():
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, fi.Size()
		default:
			return fmt.Errorf("%s: neither a file nor a directory", p)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// Archive is an OCI archive read back: its index, and the reference its
// entry is named by.
type Archive struct {
	Index v1.ImageIndex
	Ref   name.Tag
	dir   string
}

// Close removes the unpacked layout.
func (a *Archive) Close() error { return os.RemoveAll(a.dir) }

// ReadArchive unpacks an archive WriteArchive wrote (or any OCI archive
// whose index.json has one entry, an index with a containerd name) into a
// temporary directory; Close removes it.
func ReadArchive(path string) (*Archive, error) {
	dir, err := os.MkdirTemp("", "ipvsproxy-image-")
	if err != nil {
		return nil, err
	}
	a := &Archive{dir: dir}
	if err := a.read(path); err != nil {
		a.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return a, nil
}

func (a *Archive) read(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		clean := filepath.Clean(hdr.Name)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("entry %q leaves the archive", hdr.Name)
		}
		target := filepath.Join(a.dir, clean)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.Create(target)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: type %c is not a file or directory", hdr.Name, hdr.Typeflag)
		}
	}
	l, err := layout.ImageIndexFromPath(a.dir)
	if err != nil {
		return err
	}
	m, err := l.IndexManifest()
	if err != nil {
		return err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return fmt.Errorf("index.json has %d entries, want one image index", len(m.Manifests))
	}
	desc := m.Manifests[0]
	ref, err := name.NewTag(desc.Annotations[annotationContainerdName])
	if err != nil {
		return fmt.Errorf("the index's name %q: %w", desc.Annotations[annotationContainerdName], err)
	}
	a.Ref = ref
	a.Index, err = l.ImageIndex(desc.Digest)
	return err
}

// Push uploads idx to the registry of ref under ref's tag (blobs that are
// there already are not sent again) and returns the digest the registry
// holds it under: idx's own, since the manifests are sent as they are.
// Credentials come from the Docker config (~/.docker/config.json,
// $DOCKER_CONFIG), as crane and skopeo find them.
func Push(ctx context.Context, idx v1.ImageIndex, ref name.Tag, opts ...remote.Option) (v1.Hash, error) {
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.WriteIndex(ref, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	desc, err := remote.Head(ref, opts...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("read back %s: %w", ref, err)
	}
	return desc.Digest, nil
}
