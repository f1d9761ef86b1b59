package bundle

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ipvsproxy/ipvsproxy/deploy"
)

var pinned = Image{Repository: "registry.example.com/team/ipvsproxy", Digest: "sha256:" + strings.Repeat("0123456789abcdef", 4)}

// Every container of every rendered kustomization, init containers
// included, runs the image by digest; nothing names the placeholder.
func TestRenderedManifestsPinTheDigest(t *testing.T) {
	dirs, err := Kustomizations("../../deploy")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 5 {
		t.Fatalf("kustomizations %v: want the base and the overlays", dirs)
	}
	out := t.TempDir()
	if err := RenderManifests(out, dirs, pinned); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		p := filepath.Join(out, filepath.Base(d)+".yaml")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(PlaceholderImage+":")) {
			t.Errorf("%s still names %s by tag", p, PlaceholderImage)
		}
		objs, err := deploy.ReadObjects(p)
		if err != nil {
			t.Fatal(err)
		}
		images := 0
		for _, o := range objs {
			for _, path := range [][]string{{"spec", "template", "spec", "containers"}, {"spec", "template", "spec", "initContainers"}} {
				list, _, _ := unstructured.NestedSlice(o.Object, path...)
				for _, c := range list {
					images++
					if img := c.(map[string]any)["image"]; img != pinned.Ref() {
						t.Errorf("%s: %s runs %v, want %s", p, o.GetName(), img, pinned.Ref())
					}
				}
			}
		}
		if images == 0 {
			t.Errorf("%s has no container", p)
		}
	}
	migrate, _ := os.ReadFile(filepath.Join(out, "migrate.yaml"))
	if n := bytes.Count(migrate, []byte("image: "+pinned.Ref())); n != 3 {
		t.Errorf("migrate.yaml runs the image %d times, want 3 (the proxy, its init container and the Node address publisher)", n)
	}
}

// The kustomize tree builds on: a user's kustomization with the release's
// base and components, setting only its registry, runs the release's digest.
func TestKustomizeTreeKeepsTheDigest(t *testing.T) {
	tree := t.TempDir()
	// The archive's name is the placeholder unless `make image IMAGE=...` named another.
	release := Image{Repository: PlaceholderImage, Digest: pinned.Digest}
	if err := CopyKustomizeTree("../../deploy", tree, release); err != nil {
		t.Fatal(err)
	}
	user := t.TempDir()
	rel, err := filepath.Rel(user, tree) // kustomize takes no absolute paths
	if err != nil {
		t.Fatal(err)
	}
	k := "resources:\n  - " + filepath.Join(rel, "base") + "\ncomponents:\n  - " + filepath.Join(rel, "components", "migrate") +
		"\n  - " + filepath.Join(rel, "components", "modprobe") +
		"\nimages:\n  - name: " + PlaceholderImage + "\n    newName: registry.example.org/mine/ipvsproxy\n"
	if err := os.WriteFile(filepath.Join(user, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.Render(user)
	if err != nil {
		t.Fatal(err)
	}
	want := "registry.example.org/mine/ipvsproxy@" + pinned.Digest
	n := 0
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		for _, path := range [][]string{{"spec", "template", "spec", "containers"}, {"spec", "template", "spec", "initContainers"}} {
			list, _, _ := unstructured.NestedSlice(o.Object, path...)
			for _, c := range list {
				n++
				if img := c.(map[string]any)["image"]; img != want {
					t.Errorf("%v runs %v, want %s", path, img, want)
				}
			}
		}
	}
	if n != 2 {
		t.Errorf("%d containers, want the proxy and the migration's init container", n)
	}
}

// The packaged chart has the release as version and appVersion and the
// image pinned, loads as helm install loads it, and two packagings at
// different times of day are the same bytes.
func TestPackageChartIsPinnedAndReproducible(t *testing.T) {
	mtime := time.Date(2026, 12, 6, 6, 34, 51, 0, time.UTC)
	var got [2][]byte
	for i := range got {
		out := t.TempDir()
		p, err := PackageChart("../../deploy/helm/ipvsproxy", out, "0.1.0", pinned, mtime)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(p) != "ipvsproxy-0.1.0.tgz" {
			t.Errorf("packaged as %s", p)
		}
		if got[i], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
		ch, err := loader.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Metadata.Version != "0.1.0" || ch.Metadata.AppVersion != "0.1.0" {
			t.Errorf("version %s appVersion %s", ch.Metadata.Version, ch.Metadata.AppVersion)
		}
		for _, f := range ch.Files {
			if strings.HasPrefix(f.Name, "ci/") {
				t.Errorf("the package holds %s (.helmignore)", f.Name)
			}
		}
		objs, err := deploy.RenderChart(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() == "DaemonSet" {
				list, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				if img := list[0].(map[string]any)["image"]; img != pinned.Ref() {
					t.Errorf("the packaged chart runs %v, want %s", img, pinned.Ref())
				}
			}
		}
		time.Sleep(1100 * time.Millisecond)
	}
	if !bytes.Equal(got[0], got[1]) {
		t.Errorf("two packagings of the chart differ")
	}
}

func TestChangelogSection(t *testing.T) {
	log := []byte("# Changelog\n\nintro\n\n## Unreleased\n\nNothing yet.\n\n## 0.2.0-rc.2\n\n### Added\n- b\n\n## 0.2.0-rc.1\n\n- old\n\n## [0.1.0] - 2026-01-01\n\n### Fixed\n- a\n")
	for version, want := range map[string]string{
		"0.1.0":      "## [0.1.0] - 2026-01-01\n\n### Fixed\n- a\n",
		"0.2.0-rc.1": "## 0.2.0-rc.1\n\n- old\n",
		"0.2.0":      "## 0.2.0-rc.2\n\n### Added\n- b\n", // the newest candidate's notes
	} {
		got, err := ChangelogSection(log, version)
		if err != nil || got != want {
			t.Errorf("section %s: %q, %v; want %q", version, got, err, want)
		}
	}
	for _, missing := range []string{"0.3.0", "0.2.0-rc.3", "0.1"} {
		if got, err := ChangelogSection(log, missing); err == nil {
			t.Errorf("section %s found: %q", missing, got)
		}
	}
	// The repository's own CHANGELOG has the VERSION file's section.
	v, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ChangelogSection(own, strings.TrimSpace(string(v))); err != nil {
		t.Error(err)
	}
}

func TestWriteSums(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "manifests"), 0o755)
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "manifests", "a.yaml"), []byte("a\n"), 0o644)
	if err := WriteSums(dir); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	// sha256sum's own output for these two files.
	want := "0263829989b6fd954f72baaf2fc64bc2e2f01d692d4de72986ea808f6e99813f  b.txt\n" +
		"87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7  manifests/a.yaml\n"
	if string(got) != want {
		t.Errorf("SHA256SUMS:\n%s\nwant:\n%s", got, want)
	}
}
