package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`^#+\s+(.*)$`)
	notAnchor = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
)

// anchors returns the heading anchors of a Markdown page as GitHub makes
// them: lower case, punctuation dropped, spaces to hyphens, repeats numbered.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		m := mdHeading.FindStringSubmatch(line)
		if inCode || m == nil {
			continue
		}
		base := strings.ReplaceAll(notAnchor.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), ""), " ", "-")
		a := base
		for i := 1; out[a]; i++ {
			a = base + "-" + strconv.Itoa(i)
		}
		out[a] = true
	}
	return out
}

// TestMarkdownLinksResolve: every relative link of a tracked Markdown file
// names a file of the repository, and an anchor a heading of that page.
func TestMarkdownLinksResolve(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "ls-files", "-z", "*.md")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	checked := 0
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" || skipped(name) || strings.HasPrefix(name, "benchmarks/results/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(link, "#")
			target := filepath.Join(root, filepath.Dir(name), path)
			if path == "" {
				target = filepath.Join(root, name)
			}
			checked++
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s: link %s: no such file", name, link)
				continue
			}
			if frag == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			page, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(string(page))[frag] {
				t.Errorf("%s: link %s: no heading with that anchor", name, link)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d links", checked)
	}
}

func TestAnchorsAreGitHubs(t *testing.T) {
	got := anchors("# Title\n## Service CIDRs: one local route per range (routes.go)\n```\n# not a heading\n```\n## Title\n## 10,000 Services beside kube-proxy\n")
	for _, want := range []string{"title", "service-cidrs-one-local-route-per-range-routesgo", "title-1", "10000-services-beside-kube-proxy"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block became a heading")
	}
}
