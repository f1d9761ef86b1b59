package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// `ipvsproxy version` of a binary built by `make build` names the version
// of the VERSION file, the commit the checkout is at (dirty when git sees a
// change), the Go toolchain, and the Kubernetes release of the client-go in
// go.mod: each read back from the binary, compared with what the file, git,
// go and go.mod say.
func TestVersionNamesCommitGoAndKubernetes(t *testing.T) {
	for _, tool := range []string{"git", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to build as the Makefile does: %v", tool, err)
		}
	}
	bin := filepath.Join(t.TempDir(), "ipvsproxy")
	if out, err := exec.Command("make", "--no-print-directory", "-C", "../..", "build", "BIN="+bin).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	versionFile, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("ipvsproxy version: %v\n%s", err, out)
	}
	got := string(out)

	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	commit := strings.TrimSpace(string(head))
	if status, _ := exec.Command("git", "status", "--porcelain").Output(); len(status) > 0 {
		commit += "-dirty"
	}
	clientGo, err := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", "k8s.io/client-go").Output()
	if err != nil {
		t.Fatal(err)
	}
	cg := strings.TrimSpace(string(clientGo))
	for _, want := range []string{
		"ipvsproxy " + strings.TrimSpace(string(versionFile)) + "\n",
		"commit:      " + commit + "\n",
		"go:          " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n",
		"kubernetes:  v1." + strings.TrimPrefix(cg, "v0.") + " (k8s.io/client-go " + cg + ")\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ipvsproxy version printed:\n%s\nwant a line %q", got, want)
		}
	}
	if !regexp.MustCompile(`(?m)^commit time: \d{4}-\d\d-\d\dT`).MatchString(got) {
		t.Errorf("ipvsproxy version printed no commit time:\n%s", got)
	}
}

func TestKubernetesRelease(t *testing.T) {
	for in, want := range map[string]string{"v0.36.3": "v1.36.3", "v0.37.0-rc.1": "v1.37.0-rc.1", "v1.2.3": "", "": "", "v0.": ""} {
		if got := kubernetesRelease(in); got != want {
			t.Errorf("kubernetesRelease(%q) = %q, want %q", in, got, want)
		}
	}
}
