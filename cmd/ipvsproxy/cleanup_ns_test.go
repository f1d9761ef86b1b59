package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
)

// TestMain lets a test run this binary as `ipvsproxy` (IPVSPROXY_TEST_AS_MAIN=1),
// so that a command can run whole inside a network namespace via
// `ip netns exec`, without building the binary.
func TestMain(m *testing.M) {
	if path := os.Getenv("IPVSPROXY_TEST_HOLD_LOCK"); path != "" {
		holdNodeLock(path) // never returns
	}
	if limit := os.Getenv(hostileChildEnv); limit != "" {
		n, _ := strconv.ParseInt(limit, 10, 64)
		runHostileServiceChild(n) // never returns
	}
	if os.Getenv("IPVSPROXY_TEST_AS_MAIN") == "1" {
		os.Args = append([]string{"ipvsproxy"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// `ipvsproxy cleanup` on a kernel without IPVS (this development host; or a
// node whose module is gone) still removes its ipsets and chains, and
// nothing else. On a kernel with IPVS it removes the same. Without a set
// only ipvsproxy makes (its ownership record among them), the sets and
// chains of the names kube-proxy's IPVS mode shares are kube-proxy's
// (a node handed back to it) and stay.
func TestCleanupCommandInNamespace(t *testing.T) {
	kerneltest.RequireRootAndTools(t, "ip", "ipset", "iptables")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const shared = `ipset create KUBE-CLUSTER-IP hash:ip,port; ipset create KUBE-IPVS-IPS hash:ip; ipset create OTHER-SET hash:ip
iptables -t nat -N KUBE-SERVICES; iptables -t nat -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
iptables -t nat -N KUBE-POSTROUTING; iptables -t nat -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
iptables -t nat -N OTHER-CHAIN`
	for _, c := range []struct {
		name, setup string
		removed     bool
	}{
		{"ipvsproxy's state", shared + "\nipset create KUBE-IPVS-OWNED hash:ip,port", true},
		{"kube-proxy's IPVS-mode names alone", shared, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, path := netnstest.NewNamed(t, "ipvsproxy-cl-")
			name := strings.TrimPrefix(path, "/run/netns/")
			sh := netnstest.Shell(t, path)
			sh(c.setup)
			setsBefore := sh("ipset list -n")
			cmd := exec.Command("ip", "netns", "exec", name, self, "cleanup")
			cmd.Env = append(os.Environ(), "IPVSPROXY_TEST_AS_MAIN=1", "IPVSPROXY_LOCK_FILE="+filepath.Join(t.TempDir(), "ipvsproxy.lock"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("cleanup: %v\n%s", err, out)
			}
			sets := sh("ipset list -n")
			rules := sh("iptables-save -t nat")
			if !strings.Contains(sets, "OTHER-SET") || !strings.Contains(rules, "OTHER-CHAIN") {
				t.Errorf("cleanup removed what it does not own:\n%s\n%s", sets, rules)
			}
			switch {
			case c.removed && (strings.Contains(sets, "KUBE-") || strings.Contains(rules, "KUBE-")):
				t.Errorf("left after cleanup:\n%s\n%s\ncleanup said:\n%s", sets, rules, out)
			case !c.removed && (sets != setsBefore || !strings.Contains(rules, "-j KUBE-SERVICES") || !strings.Contains(rules, "-j KUBE-POSTROUTING")):
				t.Errorf("kube-proxy's names removed: sets\n%s(were\n%s)\n%s\ncleanup said:\n%s", sets, setsBefore, rules, out)
			}
		})
	}
}

// `ipvsproxy cleanup --kube-proxy-leftovers` on real iptables and ipset (a
// fresh network namespace): kube-proxy's iptables-mode chains, jumps and
// its ipvs-mode sets go; the chains and sets named like ipvsproxy's stay
// (KUBE-SERVICES is only emptied of kube-proxy's rules), and so do
// kubelet's and anyone else's. A second run changes nothing.
func TestCleanupKubeProxyLeftoversInNamespace(t *testing.T) {
	kerneltest.RequireRootAndTools(t, "ip", "ipset", "iptables", "iptables-restore")
	_, path := netnstest.NewNamed(t, "ipvsproxy-kpl-")
	name := strings.TrimPrefix(path, "/run/netns/")
	sh := netnstest.Shell(t, path)
	sh(`ipset create KUBE-CLUSTER-IP hash:ip,port; ipset create KUBE-LOAD-BALANCER-SOURCE-IP hash:ip,port,ip
ipset create KUBE-NODE-PORT-LOCAL-TCP bitmap:port range 0-65535; ipset create OTHER-SET hash:ip
iptables-restore --noflush <<'EOF2'
*nat
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-SVC-ABCDEFGHIJKLMNOP - [0:0]
:KUBE-SEP-QRSTUVWXYZ012345 - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:OTHER-CHAIN - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "default/web cluster IP" -m tcp --dport 80 -j KUBE-SVC-ABCDEFGHIJKLMNOP
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-SVC-ABCDEFGHIJKLMNOP -j KUBE-SEP-QRSTUVWXYZ012345
-A KUBE-SEP-QRSTUVWXYZ012345 -p tcp -m tcp -j DNAT --to-destination 10.244.1.5:8080
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
COMMIT
*filter
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-FIREWALL - [0:0]
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A INPUT -j KUBE-FIREWALL
-A KUBE-EXTERNAL-SERVICES -d 192.0.2.7/32 -p tcp -j REJECT --reject-with icmp-port-unreachable
COMMIT
*mangle
:KUBE-PROXY-CANARY - [0:0]
COMMIT
EOF2`)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	lockFile := filepath.Join(t.TempDir(), "ipvsproxy.lock")
	run := func() string {
		cmd := exec.Command("ip", "netns", "exec", name, self, "cleanup", "--kube-proxy-leftovers")
		cmd.Env = append(os.Environ(), "IPVSPROXY_TEST_AS_MAIN=1", "IPVSPROXY_LOCK_FILE="+lockFile)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cleanup --kube-proxy-leftovers: %v\n%s", err, out)
		}
		return string(out)
	}
	out := run()
	// Without iptables-save's "# Generated ... on <time>" lines: two dumps a second apart differ.
	save := "iptables-save | grep -v '^#'"
	rules := sh(save)
	sets := sh("ipset list -n")
	for _, gone := range []string{"KUBE-SVC-", "KUBE-SEP-", "KUBE-NODEPORTS", "KUBE-EXTERNAL-SERVICES", "KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY", "10.96.0.10/32"} {
		if strings.Contains(rules, gone) {
			t.Errorf("%s left:\n%s\ncleanup said:\n%s", gone, rules, out)
		}
	}
	for _, gone := range []string{"KUBE-LOAD-BALANCER-SOURCE-IP", "KUBE-NODE-PORT-LOCAL-TCP"} {
		if strings.Contains(sets, gone) {
			t.Errorf("ipset %s left:\n%s", gone, sets)
		}
	}
	for _, kept := range []string{":KUBE-SERVICES", ":KUBE-POSTROUTING", "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
		`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		`-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`,
		"-A INPUT -j KUBE-FIREWALL", ":OTHER-CHAIN"} {
		if !strings.Contains(rules, kept) {
			t.Errorf("%q removed:\n%s", kept, rules)
		}
	}
	if !strings.Contains(sets, "KUBE-CLUSTER-IP") || !strings.Contains(sets, "OTHER-SET") {
		t.Errorf("a set that is not kube-proxy's alone was removed:\n%s", sets)
	}
	if again := run(); !strings.Contains(again, `count=0`) || sh(save) != rules {
		t.Errorf("a second run changed something:\n%s", again)
	}
}
