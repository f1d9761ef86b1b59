package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The daemon's binary reaches the API through internal/kubeapi alone: linking
// client-go's clientset, its informer factory or the all-groups scheme puts
// every API group's code back in every node's memory (about 17 MiB of the
// daemon's start, docs/performance.md). Tests may use the clientset's fake.
func TestDaemonLinksNoAllGroupsClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps named %d packages: %q", len(deps), deps)
	}
	for _, d := range deps {
		if d == "k8s.io/client-go/kubernetes" || d == "k8s.io/client-go/informers" || d == "k8s.io/client-go/kubernetes/scheme" ||
			strings.HasPrefix(d, "k8s.io/client-go/kubernetes/typed/") || strings.HasPrefix(d, "k8s.io/client-go/informers/") {
			t.Errorf("the daemon links %s", d)
		}
	}
}
