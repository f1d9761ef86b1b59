package deploy

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
)

// repoVersion is the repository's VERSION file: the one source of the
// version of the binary (the Makefile's -X main.version), the image (its
// tag and labels), the chart and the docs.
func repoVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-rc\.[0-9]+)?$`).MatchString(v) {
		t.Fatalf("VERSION %q: want X.Y.Z or X.Y.Z-rc.N", v)
	}
	return v
}

// The chart's version and appVersion, every image tag in deploy/, the
// CHANGELOG's newest release section and docs/install.md's VERSION= line
// are the VERSION file's.
func TestVersionIsOneEverywhere(t *testing.T) {
	v := repoVersion(t)
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != v || ch.Metadata.AppVersion != v {
		t.Errorf("Chart.yaml version %s appVersion %s, VERSION %s", ch.Metadata.Version, ch.Metadata.AppVersion, v)
	}

	tagged := regexp.MustCompile(`registry\.invalid/ipvsproxy:(\S+)|newTag: (\S+)`)
	found := 0
	err = filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range tagged.FindAllStringSubmatch(string(b), -1) {
			found++
			if tag := m[1] + m[2]; tag != v {
				t.Errorf("%s: %q, want the tag %s", p, m[0], v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 4 { // base, the migrate component's init container, the rollback pod, the example overlay
		t.Errorf("%d image tags found in deploy/, want at least 4", found)
	}

	if heading := newestChangelogRelease(t); heading != v {
		t.Errorf("CHANGELOG.md's newest release section is %q, VERSION %s", heading, v)
	}
	install, err := os.ReadFile("../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "VERSION=" + v + "\n"; !strings.Contains(string(install), want) {
		t.Errorf("docs/install.md has no line %q", strings.TrimSpace(want))
	}
}

// newestChangelogRelease is the version of the first "## X.Y.Z..." heading
// after "## Unreleased".
func newestChangelogRelease(t *testing.T) string {
	t.Helper()
	f, err := os.Open("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	sawUnreleased := false
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, "## ") {
			continue
		}
		first := strings.Fields(strings.TrimPrefix(line, "## "))[0]
		if first == "Unreleased" {
			sawUnreleased = true
			continue
		}
		if !sawUnreleased {
			t.Errorf("CHANGELOG.md: %q comes before ## Unreleased", line)
		}
		return first
	}
	t.Fatal("CHANGELOG.md has no release section")
	return ""
}
