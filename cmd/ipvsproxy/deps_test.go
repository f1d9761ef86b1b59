package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The daemon's binary reaches the API through internal/daemon/kubeapi alone: linking
// client-go's clientset, its informer factory or the all-groups scheme puts
// every API group's code back in every node's memory (about 17 MiB of the
// daemon's start, docs/performance.md); client-go's generic typed client
// (gentype) brings the fake clients' machinery (client-go/testing, managed
// fields), and its Event recorder (tools/record) the strategic merge patch
// with kube-openapi's OpenAPI models: 3.6 MB of a 31 MB binary together
// (internal/events writes Events instead). Tests may use the clientset's fake.
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
			d == "k8s.io/client-go/gentype" || d == "k8s.io/client-go/testing" || d == "k8s.io/client-go/tools/record" ||
			d == "k8s.io/apimachinery/pkg/util/strategicpatch" || strings.HasPrefix(d, "github.com/google/gnostic-models") ||
			strings.HasPrefix(d, "k8s.io/client-go/kubernetes/typed/") || strings.HasPrefix(d, "k8s.io/client-go/informers/") {
			t.Errorf("the daemon links %s", d)
		}
	}
}

// Every build of the daemon leaves out urfave/cli's man-page writer, which
// nothing calls but whose Markdown parser builds its tables at start (half a
// MB of every node's heap): the tag is in each place the binary is built.
func TestDaemonBuildsLeaveOutTheManPageWriter(t *testing.T) {
	const tag = "urfave_cli_no_docs"
	for _, f := range []string{"../../Makefile", "../../deploy/rootfs/build-rootfs.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tag) {
			t.Errorf("%s builds the daemon without -tags %s", f, tag)
		}
	}
	out, err := exec.Command("go", "list", "-deps", "-tags", tag, "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, d := range strings.Fields(string(out)) {
		if strings.Contains(d, "blackfriday") || strings.Contains(d, "go-md2man") {
			t.Errorf("with -tags %s the daemon still links %s", tag, d)
		}
	}
}

// No build that programs a node runs on the Fakes: -tags fakekernel is the
// simulations' alone (kernel_fake.go).
func TestReleaseBuildsProgramTheKernel(t *testing.T) {
	if fakeKernel {
		t.Fatal("this test binary was built with -tags fakekernel")
	}
	for _, f := range []string{"../../Makefile", "../../release/image.sh", "../../deploy/rootfs/build-rootfs.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "fakekernel") {
			t.Errorf("%s builds the daemon with -tags fakekernel", f)
		}
	}
}
