package iptables

import (
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"os"
	"strings"
	"testing"
)

// newTestNetNS creates a fresh named network namespace
// (/run/netns/ipvsproxy-ipt-RANDOM, the same as `ip netns add`) and removes
// it when the test ends. It returns the namespace's path.
func newTestNetNS(t *testing.T) string {
	t.Helper()
	_, path := netnstest.NewNamed(t, "ipvsproxy-ipt-")
	return path
}

// requireRoot skips a real-kernel test when not running as root.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "real-kernel iptables tests need root (they create a network namespace)")
	}
}

// createIPSet creates an ipset in the namespace with the ipset binary: a
// rule naming a set the kernel does not have is refused. The product never
// runs ipset; only these tests do.
func createIPSet(t *testing.T, nsPath string, family Family, name, typ string) {
	t.Helper()
	bin, err := lookBinary("ipset")
	if err != nil {
		kerneltest.Skip(t, kerneltest.NoTool, "ipset binary needed to create set %s for the rules under test: %v", name, err)
	}
	args := append([]string{"create", name}, strings.Fields(typ)...)
	if family == IPv6 && strings.HasPrefix(typ, "hash:") {
		args = append(args, "family", "inet6")
	}
	res, err := commandRunner{netnsPath: nsPath}.run(nil, bin, args...)
	if err != nil || res.exitCode != 0 {
		t.Fatalf("ipset %s: %v %s", strings.Join(args, " "), err, res.stderr)
	}
}
