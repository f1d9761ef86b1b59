// Command ipvsproxy-release builds ipvsproxy's release artifacts without a
// container engine; the Makefile's image, release and push targets run it.
//
//	ipvsproxy-release image -name registry.invalid/ipvsproxy -version 0.1.0 -revision SHA \
//	    -created EPOCH -o ipvsproxy-0.1.0.oci.tar linux/amd64=rootfs-amd64.tar linux/arm64=rootfs-arm64.tar
//	ipvsproxy-release release -archive ipvsproxy-0.1.0.oci.tar -repo .. -o _output/release/0.1.0
//	ipvsproxy-release push -archive ipvsproxy-0.1.0.oci.tar -registry registry.example.com/team
//	ipvsproxy-release digest -archive ipvsproxy-0.1.0.oci.tar
//	ipvsproxy-release extract -archive A -platform linux/amd64 -path /usr/local/bin/ipvsproxy -o FILE
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/logs"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/ipvsproxy/ipvsproxy/release/bundle"
	"github.com/ipvsproxy/ipvsproxy/release/image"
	"github.com/ipvsproxy/ipvsproxy/release/sbom"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("ipvsproxy-release: ")
	// go-containerregistry's own logs stay silent (its progress and warnings
	// would go straight to stderr); errors come back as values.
	logs.Warn.SetOutput(io.Discard)
	logs.Progress.SetOutput(io.Discard)
	if len(os.Args) < 2 {
		log.Fatal("usage: ipvsproxy-release image|release|push|digest|extract [flags]")
	}
	cmds := map[string]func([]string) error{
		"image": imageCmd, "release": releaseCmd, "push": pushCmd, "digest": digestCmd, "extract": extractCmd,
	}
	cmd, ok := cmds[os.Args[1]]
	if !ok {
		log.Fatalf("unknown command %q: image, release, push, digest or extract", os.Args[1])
	}
	if err := cmd(os.Args[2:]); err != nil {
		log.Fatalf("%s: %v", os.Args[1], err)
	}
}

func imageCmd(args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	nameFlag := fs.String("name", bundle.PlaceholderImage, "the image's repository; the archive names it REPOSITORY:VERSION")
	version := fs.String("version", "", "the release (the VERSION file's)")
	revision := fs.String("revision", "", "the git commit (with -dirty for a changed tree)")
	created := fs.Int64("created", -1, "the commit's time, seconds since 1970 (SOURCE_DATE_EPOCH)")
	source := fs.String("source", "https://github.com/ipvsproxy/ipvsproxy", "the repository's address")
	out := fs.String("o", "", "the OCI archive to write")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ipvsproxy-release image [flags] OS/ARCH=ROOTFS.tar...")
		fs.PrintDefaults()
	}
	fs.Parse(args)
	if *out == "" || *created < 0 || fs.NArg() == 0 {
		fs.Usage()
		return errors.New("-o, -created and at least one platform are required")
	}
	spec := image.Spec{Version: *version, Revision: *revision, Source: *source, Created: time.Unix(*created, 0).UTC()}
	for _, a := range fs.Args() {
		p, rootfs, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("%q: want OS/ARCH=ROOTFS.tar", a)
		}
		platform, err := image.ParsePlatform(p)
		if err != nil {
			return err
		}
		spec.Platforms = append(spec.Platforms, image.PlatformRootfs{Platform: platform, Rootfs: rootfs})
	}
	ref, err := name.NewTag(*nameFlag + ":" + *version)
	if err != nil {
		return err
	}
	idx, err := image.Build(spec)
	if err != nil {
		return err
	}
	if err := image.WriteArchive(*out, idx, ref); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", ref.Name(), d)
	return nil
}

func digestCmd(args []string) error {
	fs := flag.NewFlagSet("digest", flag.ExitOnError)
	archive := fs.String("archive", "", "the OCI archive")
	fs.Parse(args)
	a, err := image.ReadArchive(*archive)
	if err != nil {
		return err
	}
	defer a.Close()
	d, err := a.Index.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", a.Ref.Name(), d)
	return nil
}

func pushCmd(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	archive := fs.String("archive", "", "the OCI archive")
	registry := fs.String("registry", "", "where to push: REGISTRY/ipvsproxy:TAG, TAG the archive's")
	fs.Parse(args)
	if *archive == "" || *registry == "" {
		return errors.New("-archive and -registry are required")
	}
	a, err := image.ReadArchive(*archive)
	if err != nil {
		return err
	}
	defer a.Close()
	dest, err := name.NewTag(strings.TrimSuffix(*registry, "/") + "/ipvsproxy:" + a.Ref.TagStr())
	if err != nil {
		return err
	}
	want, err := a.Index.Digest()
	if err != nil {
		return err
	}
	got, err := image.Push(context.Background(), a.Index, dest)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("the registry holds %s under %s, the archive %s", got, dest, want)
	}
	fmt.Printf("%s@%s\n", dest.Name(), got)
	return nil
}

func extractCmd(args []string) error {
	fs := flag.NewFlagSet("extract", flag.ExitOnError)
	archive := fs.String("archive", "", "the OCI archive")
	platform := fs.String("platform", "linux/amd64", "which image of the index")
	path := fs.String("path", image.Binary, "the file to extract")
	out := fs.String("o", "", "where to write it")
	fs.Parse(args)
	a, err := image.ReadArchive(*archive)
	if err != nil {
		return err
	}
	defer a.Close()
	b, err := fileOf(a.Index, *platform, *path)
	if err != nil {
		return err
	}
	return os.WriteFile(*out, b, 0o755)
}

// fileOf returns the content of path in the platform's image of idx.
func fileOf(idx v1.ImageIndex, platform, path string) ([]byte, error) {
	img, err := platformImage(idx, platform)
	if err != nil {
		return nil, err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	want := strings.TrimPrefix(path, "/")
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s has no %s", platform, path)
		}
		if err != nil {
			return nil, err
		}
		if strings.TrimPrefix(h.Name, "./") == want && h.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
	}
}

func platformImage(idx v1.ImageIndex, platform string) (v1.Image, error) {
	want, err := image.ParsePlatform(platform)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the image has no %s", platform)
}

func releaseCmd(args []string) error {
	fs := flag.NewFlagSet("release", flag.ExitOnError)
	archive := fs.String("archive", "", "the OCI archive `make image` wrote")
	repo := fs.String("repo", "..", "the repository's top directory")
	out := fs.String("o", "", "the release directory to write (emptied first)")
	distro := fs.String("distro", "", "the Debian release of the packages, as purl writes it (debian-12)")
	fs.Parse(args)
	if *archive == "" || *out == "" {
		return errors.New("-archive and -o are required")
	}
	a, err := image.ReadArchive(*archive)
	if err != nil {
		return err
	}
	defer a.Close()
	digest, err := a.Index.Digest()
	if err != nil {
		return err
	}
	version := a.Ref.TagStr()
	img := bundle.Image{Repository: a.Ref.Context().Name(), Digest: digest.String()}
	created, err := createdOf(a.Index)
	if err != nil {
		return err
	}

	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	prefix := filepath.Join(*out, "ipvsproxy-"+version)
	if err := copyFile(*archive, prefix+".oci.tar"); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "IMAGE"), []byte(a.Ref.Name()+"@"+digest.String()+"\n"), 0o644); err != nil {
		return err
	}

	// The bill of materials, from the archive's own files.
	in := sbom.Input{Name: "ipvsproxy", Version: version, Digest: digest.String(), Created: created, Distro: *distro}
	m, err := a.Index.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range m.Manifests {
		platform := d.Platform.OS + "/" + d.Platform.Architecture
		bin, err := fileOf(a.Index, platform, image.Binary)
		if err != nil {
			return err
		}
		bi, err := sbom.ReadBinary(bytes.NewReader(bin))
		if err != nil {
			return fmt.Errorf("%s's %s: %w", platform, image.Binary, err)
		}
		list, err := fileOf(a.Index, platform, "/usr/share/doc/ipvsproxy/packages.txt")
		if err != nil {
			return err
		}
		pkgs, err := sbom.ReadPackages(bytes.NewReader(list))
		if err != nil {
			return err
		}
		in.Platforms = append(in.Platforms, sbom.Platform{Name: platform, Binary: bi, Packages: pkgs})
	}
	bom, err := sbom.Build(in)
	if err != nil {
		return err
	}
	var sb bytes.Buffer
	if err := sbom.Encode(&sb, bom); err != nil {
		return err
	}
	if err := os.WriteFile(prefix+".cdx.json", sb.Bytes(), 0o644); err != nil {
		return err
	}

	deployDir := filepath.Join(*repo, "deploy")
	dirs, err := bundle.Kustomizations(deployDir)
	if err != nil {
		return err
	}
	if err := bundle.RenderManifests(filepath.Join(*out, "manifests"), dirs, img); err != nil {
		return err
	}
	if err := bundle.CopyKustomizeTree(deployDir, filepath.Join(*out, "kustomize"), img); err != nil {
		return err
	}
	if _, err := bundle.PackageChart(filepath.Join(deployDir, "helm", "ipvsproxy"), *out, version, img, created); err != nil {
		return err
	}
	if err := copyDir(filepath.Join(deployDir, "monitoring"), filepath.Join(*out, "monitoring")); err != nil {
		return err
	}
	changelog, err := os.ReadFile(filepath.Join(*repo, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	notes, err := bundle.ChangelogSection(changelog, version)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "CHANGELOG.md"), []byte(notes), 0o644); err != nil {
		return err
	}
	if err := bundle.WriteSums(*out); err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", a.Ref.Name(), digest)
	return nil
}

// createdOf is the images' creation time (the commit's); every image of
// the index has the same.
func createdOf(idx v1.ImageIndex) (time.Time, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return time.Time{}, err
	}
	var t time.Time
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return time.Time{}, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return time.Time{}, err
		}
		if !t.IsZero() && !t.Equal(cf.Created.Time) {
			return time.Time{}, fmt.Errorf("the images were created at %v and %v", t, cf.Created.Time)
		}
		t = cf.Created.Time
	}
	if t.IsZero() {
		return t, errors.New("the images carry no creation time")
	}
	return t, nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// copyDir copies the regular files of from (one level) into to.
func copyDir(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := copyFile(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
