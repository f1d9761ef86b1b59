package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
)

// TestMain lets a test run this binary as `ipvsproxy` (IPVSPROXY_TEST_AS_MAIN=1),
// so that a command can run whole inside a network namespace via
// `ip netns exec`, without building the binary.
func TestMain(m *testing.M) {
	if os.Getenv("IPVSPROXY_TEST_AS_MAIN") == "1" {
		os.Args = append([]string{"ipvsproxy"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// `ipvsproxy cleanup` on a kernel without IPVS (this development host; or a
// node whose module is gone) still removes its ipsets and chains, and
// nothing else. On a kernel with IPVS it removes the same.
func TestCleanupCommandInNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, tool := range []string{"ip", "ipset", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	_, path := netnstest.NewNamed(t, "ipvsproxy-cl-")
	name := strings.TrimPrefix(path, "/run/netns/")
	sh := func(script string) string {
		t.Helper()
		out, err := exec.Command("ip", "netns", "exec", name, "sh", "-ec", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	sh(`ipset create KUBE-CLUSTER-IP hash:ip,port; ipset create KUBE-IPVS-IPS hash:ip; ipset create OTHER-SET hash:ip
iptables -t nat -N KUBE-SERVICES; iptables -t nat -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
iptables -t nat -N KUBE-POSTROUTING; iptables -t nat -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
iptables -t nat -N OTHER-CHAIN`)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", name, self, "cleanup")
	cmd.Env = append(os.Environ(), "IPVSPROXY_TEST_AS_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out)
	}
	sets := sh("ipset list -n")
	rules := sh("iptables-save -t nat")
	if strings.Contains(sets, "KUBE-") || strings.Contains(rules, "KUBE-") {
		t.Errorf("left after cleanup:\n%s\n%s\ncleanup said:\n%s", sets, rules, out)
	}
	if !strings.Contains(sets, "OTHER-SET") || !strings.Contains(rules, "OTHER-CHAIN") {
		t.Errorf("cleanup removed what it does not own:\n%s\n%s", sets, rules)
	}
}
