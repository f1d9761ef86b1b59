package main

import (
	"archive/tar"
	"bytes"
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
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/ipvsproxy/ipvsproxy/release/image"
)

// `ipvsproxy-release push` (what `make push` runs) uploads the archive to
// REGISTRY/ipvsproxy:TAG, and the registry (go-containerregistry's, in
// process) holds the index under the archive's digest, each platform's
// file tree as built.
func TestPushUploadsTheArchive(t *testing.T) {
	dir := t.TempDir()
	spec := image.Spec{Version: "0.1.0", Revision: "abc", Source: "https://example.invalid", Created: time.Unix(1796538891, 0)}
	for _, arch := range []string{"amd64", "arm64"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		body := []byte("daemon " + arch)
		tw.WriteHeader(&tar.Header{Name: "usr/local/bin/ipvsproxy", Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write(body)
		tw.Close()
		p := filepath.Join(dir, arch+".tar")
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		spec.Platforms = append(spec.Platforms, image.PlatformRootfs{Platform: v1.Platform{OS: "linux", Architecture: arch}, Rootfs: p})
	}
	idx, err := image.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "ipvsproxy-0.1.0.oci.tar")
	ref, _ := name.NewTag("registry.invalid/ipvsproxy:0.1.0")
	if err := image.WriteArchive(archive, idx, ref); err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	if err := pushCmd([]string{"-archive", archive, "-registry", host + "/team"}); err != nil {
		t.Fatal(err)
	}
	dest, _ := name.NewTag(host + "/team/ipvsproxy:0.1.0")
	desc, err := remote.Head(dest)
	if err != nil {
		t.Fatalf("the registry has no %s: %v", dest, err)
	}
	if desc.Digest != want {
		t.Errorf("the registry holds %s, the archive %s", desc.Digest, want)
	}
	pulled, err := remote.Index(dest)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		b, err := fileOf(pulled, p, image.Binary)
		if err != nil || string(b) != "daemon "+strings.TrimPrefix(p, "linux/") {
			t.Errorf("%s from the registry: %q, %v", p, b, err)
		}
	}
	if err := pushCmd([]string{"-archive", archive}); err == nil {
		t.Error("push without -registry ran")
	}
}
