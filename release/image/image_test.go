package image

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

var commitTime = time.Date(2026, 12, 6, 6, 34, 51, 0, time.UTC)

// rootfs writes a tarball like build-rootfs.sh's: the binary (here a
// marker naming the platform) and a directory.
func rootfs(t *testing.T, dir, arch string) string {
	t.Helper()
	p := filepath.Join(dir, "rootfs-"+arch+".tar")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("ipvsproxy for " + arch + "\n")
	for _, h := range []*tar.Header{
		{Name: "usr/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "usr/local/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "usr/local/bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: strings.TrimPrefix(Binary, "/"), Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(body))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(body)
		}
	}
	tw.Close()
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func testSpec(t *testing.T) Spec {
	dir := t.TempDir()
	return Spec{
		Version:  "0.1.0",
		Revision: "98bdb861c48c1dcd0e841647b57c23f122487335",
		Source:   "https://github.com/ipvsproxy/ipvsproxy",
		Created:  commitTime,
		Platforms: []PlatformRootfs{
			{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Rootfs: rootfs(t, dir, "amd64")},
			{Platform: v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, Rootfs: rootfs(t, dir, "arm64")},
		},
	}
}

func digest(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Two builds of the same inputs, at different times of day, give the same
// index digest and the same archive bytes; another commit time does not.
func TestBuildIsReproducible(t *testing.T) {
	spec := testSpec(t)
	ref, _ := name.NewTag("registry.invalid/ipvsproxy:0.1.0")
	dir := t.TempDir()
	var archives [2][]byte
	var digests [2]v1.Hash
	for i := range 2 {
		idx, err := Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		digests[i] = digest(t, idx)
		p := filepath.Join(dir, "ipvsproxy.tar")
		if err := WriteArchive(p, idx, ref); err != nil {
			t.Fatal(err)
		}
		if archives[i], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		// A second apart: nothing of the wall clock may reach the image.
		time.Sleep(1100 * time.Millisecond)
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of the same inputs: %s and %s", digests[0], digests[1])
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Errorf("two archives of the same index differ (%d and %d bytes)", len(archives[0]), len(archives[1]))
	}
	later := spec
	later.Created = commitTime.Add(time.Second)
	idx, err := Build(later)
	if err != nil {
		t.Fatal(err)
	}
	if d := digest(t, idx); d == digests[0] {
		t.Errorf("another commit time gave the same digest %s: the time is not in the image", d)
	}
}

// Each platform's image runs the daemon, carries the OCI labels with the
// commit's time, and holds its own root file system.
func TestImageConfigAndLabels(t *testing.T) {
	spec := testSpec(t)
	idx, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 2 {
		t.Fatalf("%d manifests, want 2", len(m.Manifests))
	}
	for i, desc := range m.Manifests {
		want := spec.Platforms[i].Platform
		if desc.Platform == nil || !desc.Platform.Equals(want) {
			t.Errorf("manifest %d platform %v, want %v", i, desc.Platform, want)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != want.Architecture || cf.OS != "linux" || cf.Variant != want.Variant {
			t.Errorf("%s config platform %s/%s/%s", want, cf.OS, cf.Architecture, cf.Variant)
		}
		if !cf.Created.Time.Equal(commitTime) {
			t.Errorf("%s created %v, want the commit's time %v", want, cf.Created, commitTime)
		}
		if got := strings.Join(append(cf.Config.Entrypoint, cf.Config.Cmd...), " "); got != Binary+" run" {
			t.Errorf("%s runs %q", want, got)
		}
		for k, v := range map[string]string{
			LabelVersion:  "0.1.0",
			LabelRevision: spec.Revision,
			LabelSource:   spec.Source,
			LabelCreated:  "2026-12-06T06:34:51Z",
			LabelLicenses: "Apache-2.0",
		} {
			if cf.Config.Labels[k] != v {
				t.Errorf("%s label %s = %q, want %q", want, k, cf.Config.Labels[k], v)
			}
		}
		if got := fileIn(t, img, strings.TrimPrefix(Binary, "/")); got != "ipvsproxy for "+want.Architecture+"\n" {
			t.Errorf("%s holds %q at %s", want, got, Binary)
		}
	}
}

func fileIn(t *testing.T, img v1.Image, path string) string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == path {
			b, _ := io.ReadAll(tr)
			return string(b)
		}
	}
}

// The archive reads back as the same index under the name it was written
// with; pushed to a registry (go-containerregistry's own, in process), the
// registry holds it under the same digest, both platforms pullable.
func TestArchiveReadsBackAndPushes(t *testing.T) {
	spec := testSpec(t)
	idx, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.NewTag("registry.invalid/ipvsproxy:0.1.0")
	p := filepath.Join(t.TempDir(), "ipvsproxy.tar")
	if err := WriteArchive(p, idx, ref); err != nil {
		t.Fatal(err)
	}
	a, err := ReadArchive(p)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Ref.Name() != ref.Name() {
		t.Errorf("archive names %s, want %s", a.Ref, ref)
	}
	if got, want := digest(t, a.Index), digest(t, idx); got != want {
		t.Fatalf("read back %s, wrote %s", got, want)
	}
	// Every blob there, every digest and size right, the layers as their diff IDs say.
	if err := validate.Index(a.Index); err != nil {
		t.Errorf("the archive's index is not valid: %v", err)
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	dest, err := name.NewTag(strings.TrimPrefix(srv.URL, "http://") + "/team/ipvsproxy:0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := Push(context.Background(), a.Index, dest)
	if err != nil {
		t.Fatal(err)
	}
	if pushed != digest(t, idx) {
		t.Errorf("the registry holds %s, the archive %s", pushed, digest(t, idx))
	}
	pulled, err := remote.Index(dest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(pulled); err != nil {
		t.Errorf("the pulled index is not valid: %v", err)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := remote.Image(dest, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: arch}))
		if err != nil {
			t.Fatalf("pull linux/%s: %v", arch, err)
		}
		if got := fileIn(t, img, strings.TrimPrefix(Binary, "/")); got != "ipvsproxy for "+arch+"\n" {
			t.Errorf("pulled linux/%s holds %q", arch, got)
		}
	}
}

func TestBuildRefusesIncompleteSpecs(t *testing.T) {
	good := testSpec(t)
	for name, mutate := range map[string]func(*Spec){
		"no version":     func(s *Spec) { s.Version = "" },
		"no revision":    func(s *Spec) { s.Revision = "" },
		"no time":        func(s *Spec) { s.Created = time.Time{} },
		"no platforms":   func(s *Spec) { s.Platforms = nil },
		"platform twice": func(s *Spec) { s.Platforms = append(s.Platforms, s.Platforms[0]) },
		"missing rootfs": func(s *Spec) {
			s.Platforms = []PlatformRootfs{{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Rootfs: "/nonexistent.tar"}}
		},
	} {
		s := good
		mutate(&s)
		if _, err := Build(s); err == nil {
			t.Errorf("%s: built", name)
		}
	}
}
