package controlplane

import (
	"os"
	"strings"
	"testing"
)

// The control plane and the conformance cluster build Kubernetes' binaries
// with the same settings and module versions, so that a cold `make test`
// compiles their shared packages once: one module version or build setting
// apart, and every package above it is compiled twice (build.sh says why).
func TestBuildsShareTheConformanceClustersSettings(t *testing.T) {
	ours, theirs := requires(t, "go.mod"), requires(t, "../conformance/go.mod")
	shared := 0
	for path, v := range ours {
		if w, ok := theirs[path]; ok {
			shared++
			if v != w {
				t.Errorf("%s is %s here and %s in e2e/conformance/go.mod", path, v, w)
			}
		}
	}
	if shared < 100 {
		t.Errorf("only %d modules in both go.mod files: did one stop listing its indirect requirements?", shared)
	}
	// The lines that build Kubernetes' binaries.
	for f, marker := range map[string]string{"build.sh": "./cmd/kube-apiserver", "../conformance/build.sh": "k8s_build() {"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, marker) && strings.Contains(line, " build ") {
				found = true
				if !strings.Contains(line, "CGO_ENABLED=0") || !strings.Contains(line, "-trimpath") {
					t.Errorf("%s builds without CGO_ENABLED=0 and -trimpath: %s", f, strings.TrimSpace(line))
				}
			}
		}
		if !found {
			t.Errorf("%s has no build line with %q", f, marker)
		}
	}
}

// make test's own Go commands (unit tests, vet, fuzz, the VM tests' binaries, the benchmark
// harness) build as the binaries above do, and the modules they share are at the same versions,
// so that a cold run compiles client-go, api and apimachinery once for all of them.
func TestMakeTestBuildsAsTheControlPlane(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	makefile := string(b)
	for _, line := range []string{"export CGO_ENABLED := 0", "export GOFLAGS := $(strip $(GOFLAGS) -trimpath)"} {
		if !strings.Contains(makefile, "\n"+line+"\n") {
			t.Errorf("the Makefile does not say %q", line)
		}
	}
	// Modules required at another version on purpose, and why.
	apart := map[string]string{
		// helm (the chart's tests) needs 1.0.10; few of Kubernetes' packages import it.
		"github.com/spf13/pflag": "helm",
	}
	ours := requires(t, "go.mod")
	for _, other := range []string{"../../go.mod", "../../benchmarks/harness/go.mod", "../suite/go.mod"} {
		shared := 0
		for path, v := range requires(t, other) {
			w, ok := ours[path]
			// v0.0.0 is a staging module that a replace directive pins.
			if !ok || v == "v0.0.0" || w == "v0.0.0" {
				continue
			}
			shared++
			if v != w && apart[path] == "" {
				t.Errorf("%s is %s in %s and %s here", path, v, other, w)
			}
		}
		if shared < 30 {
			t.Errorf("only %d modules in both %s and go.mod", shared, other)
		}
	}
}

// requires maps each module a go.mod file requires to its version.
func requires(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	block := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			block = true
			continue
		case block && line == ")":
			block = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !block:
			continue
		}
		if f := strings.Fields(line); len(f) >= 2 {
			out[f[0]] = f[1]
		}
	}
	return out
}
