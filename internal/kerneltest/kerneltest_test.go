package kerneltest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSkipByPlace runs TestChildSkips in a child process per environment and
// reads its verdict: a skip outside CI, a failure under CI unless the reason
// is accepted there, and no accepted reason inside the VM.
func TestSkipByPlace(t *testing.T) {
	cases := []struct {
		env    []string
		reason Reason
		want   string
	}{
		{nil, NoTool, "--- SKIP"},
		{nil, NoIPVS, "--- SKIP"},
		{[]string{"CI=true"}, NoTool, "--- FAIL"},
		{[]string{"CI=true"}, NotRoot, "--- FAIL"},
		{[]string{"CI=true"}, NoKernelFeature, "--- FAIL"},
		{[]string{"CI=true"}, NoIPVS, "--- SKIP"},
		{[]string{"CI=true"}, NoDummy, "--- SKIP"},
		{[]string{"CI=true", "IPVSPROXY_IN_VM=1"}, NoIPVS, "--- FAIL"},
		{[]string{"IPVSPROXY_IN_VM=1"}, NoDummy, "--- FAIL"},
		{[]string{"IPVSPROXY_IN_VM=1"}, NoTool, "--- FAIL"},
	}
	for _, c := range cases {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildSkips$", "-test.v", "-test.count=1")
		cmd.Env = append(withoutPlace(os.Environ()), append(c.env, "KERNELTEST_CHILD_REASON="+string(c.reason))...)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), c.want+": TestChildSkips") {
			t.Errorf("%v, reason %q: want %s, got:\n%s", c.env, c.reason, c.want, out)
		}
	}
}

func withoutPlace(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, "IPVSPROXY_IN_VM=") {
			out = append(out, kv)
		}
	}
	return out
}

// TestChildSkips is TestSkipByPlace's child.
func TestChildSkips(t *testing.T) {
	reason := os.Getenv("KERNELTEST_CHILD_REASON")
	if reason == "" {
		t.Skip("run by TestSkipByPlace")
	}
	Skip(t, Reason(reason), "the child's %s", "reason")
}
