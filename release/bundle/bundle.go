// Package bundle writes what a release ships beside its image: the
// kustomizations of deploy/ rendered with the image pinned by digest, the
// same kustomize tree to build on, the Helm chart packaged with the release
// as its version, the monitoring files, the release's CHANGELOG section,
// and SHA256SUMS over all of it. Every file is a function of the
// repository at the commit and the image's digest: no time of day, owner
// or order of a directory listing reaches it.
package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"

	"github.com/ipvsproxy/ipvsproxy/deploy"
)

// PlaceholderImage is the image name deploy/ uses: under the reserved
// .invalid domain, so a manifest nobody pinned never pulls anything.
const PlaceholderImage = "registry.invalid/ipvsproxy"

// Image is the released image: its repository (without tag) and the
// digest of its index.
type Image struct {
	Repository, Digest string
}

// Ref is the image by digest, as the manifests name it.
func (i Image) Ref() string { return i.Repository + "@" + i.Digest }

// Kustomizations are the directories of deploy/ rendered into
// manifests/NAME.yaml: the base and every overlay but the example, which
// names an example registry of its own (it is there to be copied).
func Kustomizations(deployDir string) ([]string, error) {
	dirs := []string{filepath.Join(deployDir, "base")}
	overlays, err := filepath.Glob(filepath.Join(deployDir, "overlays", "*", "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(overlays)
	for _, o := range overlays {
		if filepath.Base(filepath.Dir(o)) != "example" {
			dirs = append(dirs, filepath.Dir(o))
		}
	}
	return dirs, nil
}

// RenderManifests renders each kustomization with kustomize (deploy.Render)
// on top of an images: entry that pins the image by digest, into
// outDir/NAME.yaml (base.yaml, migrate.yaml...).
func RenderManifests(outDir string, dirs []string, img Image) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	repo, err := os.MkdirTemp("", "ipvsproxy-render-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(repo)
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		pin := filepath.Join(repo, filepath.Base(dir))
		if err := os.MkdirAll(pin, 0o755); err != nil {
			return err
		}
		rel, err := filepath.Rel(pin, abs)
		if err != nil {
			return err
		}
		k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\nimages:\n  - name: %s\n    newName: %s\n    digest: %s\n",
			rel, PlaceholderImage, img.Repository, img.Digest)
		if err := os.WriteFile(filepath.Join(pin, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			return err
		}
		objs, err := deploy.Render(pin)
		if err != nil {
			return fmt.Errorf("render %s pinned to %s: %w", dir, img.Ref(), err)
		}
		var out bytes.Buffer
		fmt.Fprintf(&out, "# deploy/%s of ipvsproxy, its image pinned by digest: %s\n", relToDeploy(abs), img.Ref())
		for _, o := range objs {
			b, err := yaml.Marshal(o.Object)
			if err != nil {
				return err
			}
			out.WriteString("---\n")
			out.Write(b)
		}
		if err := os.WriteFile(filepath.Join(outDir, filepath.Base(dir)+".yaml"), out.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// relToDeploy is "base" or "overlays/migrate" of a path under deploy/.
func relToDeploy(abs string) string {
	if i := strings.LastIndex(abs, "/deploy/"); i >= 0 {
		return abs[i+len("/deploy/"):]
	}
	return filepath.Base(abs)
}

// CopyKustomizeTree copies deploy/base, deploy/components and
// deploy/overlays into outDir, with the base's and the components'
// kustomizations pinning the image by digest: a user's kustomization builds
// on them (resources, components) and sets only newName, the digest kept.
func CopyKustomizeTree(deployDir, outDir string, img Image) error {
	for _, sub := range []string{"base", "components", "overlays"} {
		src := filepath.Join(deployDir, sub)
		if _, err := os.Stat(src); os.IsNotExist(err) {
			continue
		}
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(deployDir, p)
			if err != nil {
				return err
			}
			dst := filepath.Join(outDir, rel)
			if d.IsDir() {
				return os.MkdirAll(dst, 0o755)
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s: not a regular file", p)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o644)
		})
		if err != nil {
			return err
		}
	}
	// The pin goes into the base and into every component: a component's
	// containers (the migration's init container) are added after the base
	// ran its own images: transformer.
	pins, err := filepath.Glob(filepath.Join(outDir, "components", "*", "kustomization.yaml"))
	if err != nil {
		return err
	}
	entry := "  - name: " + PlaceholderImage + "\n"
	if img.Repository != PlaceholderImage {
		entry += "    newName: " + img.Repository + "\n"
	}
	entry += "    digest: " + img.Digest + "\n"
	for _, k := range append([]string{filepath.Join(outDir, "base", "kustomization.yaml")}, pins...) {
		b, err := os.ReadFile(k)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("\nimages:")) {
			return fmt.Errorf("%s already has images:", k)
		}
		b = append(b, "# The release's image, by digest. In your kustomization, an images: entry\n# for "+PlaceholderImage+" with newName (your registry) keeps this digest.\nimages:\n"+entry...)
		if err := os.WriteFile(k, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

var valuesDigest = regexp.MustCompile(`(?m)^  digest: ""$`)
var valuesRepository = regexp.MustCompile(`(?m)^  repository: \S+$`)

// PackageChart packages the chart in chartDir as helm package does
// (chartutil.Save: Chart.yaml, values.yaml with its comments, the schema,
// the templates; .helmignore applied), with version and appVersion set to
// version and the image pinned: image.repository and image.digest in
// values.yaml. The archive's file times are mtime and its gzip header has
// none, so the same chart makes the same bytes. Returns the file's path.
func PackageChart(chartDir, outDir, version string, img Image, mtime time.Time) (string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return "", fmt.Errorf("load chart %s: %w", chartDir, err)
	}
	ch.Metadata.Version, ch.Metadata.AppVersion = version, version
	pinned := false
	for _, f := range ch.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		if len(valuesDigest.FindAll(f.Data, -1)) != 1 || len(valuesRepository.FindAll(f.Data, -1)) != 1 {
			return "", fmt.Errorf("chart %s: values.yaml needs one `  repository:` and one `  digest: \"\"` line under image:", chartDir)
		}
		f.Data = valuesDigest.ReplaceAll(f.Data, []byte(fmt.Sprintf("  digest: %q", img.Digest)))
		f.Data = valuesRepository.ReplaceAll(f.Data, []byte("  repository: "+img.Repository))
		pinned = true
	}
	if !pinned {
		return "", fmt.Errorf("chart %s has no values.yaml", chartDir)
	}
	tmp, err := os.MkdirTemp("", "ipvsproxy-chart-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	saved, err := chartutil.Save(ch, tmp)
	if err != nil {
		return "", fmt.Errorf("package chart %s: %w", chartDir, err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(outDir, filepath.Base(saved))
	if err := retime(saved, out, mtime); err != nil {
		return "", fmt.Errorf("package chart %s: %w", chartDir, err)
	}
	// What helm install reads: the packaged chart loads, with the pin.
	back, err := loader.Load(out)
	if err != nil {
		return "", fmt.Errorf("the packaged chart %s does not load: %w", out, err)
	}
	if got, _ := back.Values["image"].(map[string]any); got["digest"] != img.Digest || got["repository"] != img.Repository {
		return "", fmt.Errorf("the packaged chart's image values are %v, want %s", got, img.Ref())
	}
	return out, nil
}

// retime copies the gzipped tar in to out with every entry's times set to
// mtime and the gzip header's time and name left empty.
func retime(in, out string, mtime time.Time) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Header.Comment = "Helm"
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		h.ModTime, h.AccessTime, h.ChangeTime = mtime.UTC(), time.Time{}, time.Time{}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// ChangelogSection returns the section of CHANGELOG.md headed "## VERSION"
// (the heading may go on after the version: "## 0.1.0 - 2026-12-20"),
// heading included, up to the next "## " heading. A final version X.Y.Z
// without a section of its own takes its release candidate's, the newest
// "## X.Y.Z-rc.N": the candidate a release gate passed becomes the release
// without another change of the notes.
func ChangelogSection(changelog []byte, version string) (string, error) {
	sections := map[string]string{}
	var order []string
	var cur string
	var b strings.Builder
	flush := func() {
		if cur != "" {
			sections[cur] = strings.TrimRight(b.String(), "\n") + "\n"
			order = append(order, cur)
		}
		b.Reset()
	}
	for _, line := range strings.SplitAfter(string(changelog), "\n") {
		if strings.HasPrefix(line, "## ") {
			flush()
			fields := strings.Fields(strings.TrimPrefix(line, "## "))
			cur = strings.Trim(fields[0], "[]")
		}
		if cur != "" {
			b.WriteString(line)
		}
	}
	flush()
	if s, ok := sections[version]; ok {
		return s, nil
	}
	if !strings.Contains(version, "-") {
		for _, v := range order { // newest first, as the file is written
			if strings.HasPrefix(v, version+"-rc.") {
				return sections[v], nil
			}
		}
	}
	return "", fmt.Errorf("CHANGELOG.md has no section ## %s (its sections: %s)", version, strings.Join(order, ", "))
}

// WriteSums writes dir/SHA256SUMS: sha256sum's format ("HEX  PATH"), one
// line per file under dir in name order, so `sha256sum -c SHA256SUMS` run
// in dir checks every file.
func WriteSums(dir string) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && p != filepath.Join(dir, "SHA256SUMS") {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	var out bytes.Buffer
	for _, f := range files {
		sum, err := fileSHA256(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "%s  %s\n", sum, f)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), out.Bytes(), 0o644)
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
