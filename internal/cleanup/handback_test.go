package cleanup

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters/adapterstest"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// kube-proxy's IPVS mode after its first sync on ipvsproxy's state: it
// declared the chains whose names it shares with ipvsproxy (which flushes
// them) and wrote its own rules, matching only the sets of its own names.
const kubeProxyTookOver = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set %[1]sCLUSTER-IP dst,dst -j ACCEPT
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
COMMIT
*filter
:KUBE-IPVS-FILTER - [0:0]
:KUBE-FORWARD - [0:0]
-A KUBE-IPVS-FILTER -m set --match-set %[1]sCLUSTER-IP dst,dst -j RETURN
COMMIT
`

// kubeProxySyncs writes kubeProxyTookOver to both families' iptables, as
// kube-proxy's first sync after it took the node back.
func kubeProxySyncs(t *testing.T, node *adapterstest.Fakes) {
	t.Helper()
	for _, ipt := range []struct {
		restore func([]byte) error
		prefix  string
	}{{node.IPT4.Restore, "KUBE-"}, {node.IPT6.Restore, "KUBE-6-"}} {
		if err := ipt.restore([]byte(fmt.Sprintf(kubeProxyTookOver, ipt.prefix))); err != nil {
			t.Fatal(err)
		}
	}
}

// The rollback to kube-proxy's IPVS mode: refused, changing nothing, while
// ipvsproxy's rules are in place; once kube-proxy has rewritten the chains,
// the mangle filter, ipvsproxy's own sets (the ownership record last) and
// the Service CIDR routes go, and the virtual servers, kube-ipvs0 and every
// set of a name kube-proxy uses stay. A second run removes nothing.
func TestCleanupAfterKubeProxyIPVS(t *testing.T) {
	node := adapterstest.NewFakes()
	cfg := config(true, v1.IPv4Protocol, v1.IPv6Protocol)
	web := servicetest.Service("web", "10.96.0.10")
	web.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
	lb := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30080, "203.0.113.140"))
	lb.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
	serving(t, node, cfg, web, lb)
	virtualServers, _ := node.IPVS.VirtualServers()
	if len(virtualServers) < 3 || !strings.Contains(node.IPT4.Dump(), owned.ChainIPVSOutFilter) {
		t.Fatalf("the state to hand over is not there: %d virtual servers,\n%s", len(virtualServers), node.IPT4.Dump())
	}

	before := node.Writes()
	removed, err := AfterKubeProxyIPVS(node.Kernel(), cfg.Families)
	if !errors.Is(err, ErrKubeProxyNotRunning) || len(removed) != 0 || node.Writes() != before {
		t.Fatalf("before kube-proxy took over: removed %v, %d writes, err %v; want a refusal and nothing written", removed, node.Writes()-before, err)
	}
	t.Logf("refused: %v", err)

	kubeProxySyncs(t, node)
	removed, err = AfterKubeProxyIPVS(node.Kernel(), cfg.Families)
	if err != nil {
		t.Fatalf("%v\nremoved:\n%s", err, strings.Join(removed, "\n"))
	}
	t.Logf("removed:\n%s", strings.Join(removed, "\n"))
	for _, rules := range []string{node.IPT4.Dump(), node.IPT6.Dump()} {
		if strings.Contains(rules, owned.ChainIPVSOutFilter) && strings.Contains(rules, "*mangle") && strings.Contains(rules[strings.Index(rules, "*mangle"):], owned.ChainIPVSOutFilter) {
			t.Errorf("mangle %s left:\n%s", owned.ChainIPVSOutFilter, rules)
		}
		if !strings.Contains(rules, "CLUSTER-IP dst,dst -j ACCEPT") {
			t.Errorf("kube-proxy's rule removed:\n%s", rules)
		}
	}
	sets := node.IPSet.Dump()
	for _, gone := range []string{"KUBE-IPVS-OWNED", "KUBE-6-IPVS-OWNED", "KUBE-SERVICE-CIDRS", "KUBE-6-SERVICE-CIDRS", "KUBE-LOAD-BALANCER-NO-NODE", "KUBE-IPVS-SERVICES"} {
		if strings.Contains(sets, "set "+gone+" ") {
			t.Errorf("ipvsproxy's own set %s left:\n%s", gone, sets)
		}
	}
	for _, kept := range []string{"set KUBE-CLUSTER-IP ", "set KUBE-6-CLUSTER-IP ", "set KUBE-LOAD-BALANCER-FW ", "set KUBE-IPVS-IPS "} {
		if !strings.Contains(sets, kept) {
			t.Errorf("%q, a name kube-proxy uses, removed:\n%s", kept, sets)
		}
	}
	if after, _ := node.IPVS.VirtualServers(); len(after) != len(virtualServers) {
		t.Errorf("%d virtual servers after, %d before: they are kube-proxy's now", len(after), len(virtualServers))
	}
	if routes, err := node.Netif.ServiceRoutes(); err != nil || len(routes) != 0 {
		t.Errorf("Service CIDR routes left: %v (%v)", routes, err)
	}
	if !strings.HasPrefix(node.Netif.Dump(), "dummy "+owned.DummyInterface) {
		t.Errorf("%s removed:\n%s", owned.DummyInterface, node.Netif.Dump())
	}
	if again, err := AfterKubeProxyIPVS(node.Kernel(), cfg.Families); err != nil || len(again) != 0 {
		t.Errorf("second run removed %v (%v), want nothing", again, err)
	}
}

// A node handed back to kube-proxy's IPVS mode keeps kube-proxy's state
// through a later plain `ipvsproxy cleanup` (a rollback pod run again, an
// uninstall job): with ipvsproxy's record and its own sets gone, the
// virtual servers, kube-ipvs0 with kube-proxy's bound addresses, and the
// chains and sets of the names the two share are kube-proxy's. The
// ownership rule once took every virtual server on a kube-ipvs0 address
// for ipvsproxy's when kube-proxy-named sets stood without the record, and
// the clean-up deleted them with kube-ipvs0.
func TestCleanupAfterHandoverLeavesKubeProxysState(t *testing.T) {
	node := adapterstest.NewFakes()
	cfg := config(true, v1.IPv4Protocol, v1.IPv6Protocol)
	web := servicetest.Service("web", "10.96.0.10", servicetest.NodePort(30080))
	web.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
	lb := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30081, "203.0.113.140"))
	serving(t, node, cfg, web, lb)
	kubeProxySyncs(t, node)
	if _, err := AfterKubeProxyIPVS(node.Kernel(), cfg.Families); err != nil {
		t.Fatal(err)
	}
	// kube-proxy binds every address it serves on kube-ipvs0, cluster
	// IPs included (it knows no Service CIDR route).
	all, _ := node.IPVS.VirtualServers()
	host, _ := node.Netif.HostAddresses()
	for _, vs := range all {
		if !slices.Contains(host, vs.Address) {
			node.Netif.AddDummyAddress(vs.Address)
		}
	}
	if len(all) < 6 {
		t.Fatalf("%d virtual servers handed over, want those of two Services on two families", len(all))
	}
	before, writes := node.Dump(), node.Writes()
	if err := Installed(node.Kernel(), cfg.Families); err != nil {
		t.Fatal(err)
	}
	if after := node.Dump(); after != before || node.Writes() != writes {
		t.Fatalf("cleanup after the handover wrote %d times; before:\n%s\nafter:\n%s", node.Writes()-writes, before, after)
	}
}

// A node that never ran ipvsproxy, with kube-proxy's IPVS mode's state:
// `ipvsproxy cleanup` (a rollback pod on the wrong node) changes nothing.
func TestCleanupLeavesKubeProxyIPVSModeAlone(t *testing.T) {
	node := adapterstest.NewFakes()
	for _, name := range []string{"KUBE-CLUSTER-IP", "KUBE-NODE-PORT-TCP", "KUBE-EXTERNAL-IP-LOCAL", "KUBE-NODE-PORT-LOCAL-TCP", "KUBE-LOAD-BALANCER-FW"} {
		if err := node.IPSet.CreateSet(ipset.Set{Name: name, Type: ipset.HashIPPort, Family: ipset.IPv4}); err != nil {
			t.Fatal(err)
		}
	}
	if err := node.IPSet.CreateSet(ipset.Set{Name: "KUBE-LOAD-BALANCER-SOURCE-CIDR", Type: ipset.HashIPPortNet, Family: ipset.IPv4}); err != nil {
		t.Fatal(err)
	}
	if err := node.IPT4.Restore([]byte(fmt.Sprintf(kubeProxyIPVSMode, "KUBE-", "KUBE-LOAD-BALANCER-SOURCE-CIDR"))); err != nil {
		t.Fatal(err)
	}
	web := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80}
	node.Netif.EnsureDummy()
	node.Netif.AddDummyAddress(web.Address)
	node.IPVS.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: web, Scheduler: "rr"})
	node.IPVS.AddRealServer(web, ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.1.5"), Port: 8080}, Weight: 1})
	nodePort := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: servicetest.Node1IP, Port: 30080}
	node.IPVS.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: nodePort, Scheduler: "rr"})
	before, writes := node.Dump(), node.Writes()
	if err := Installed(node.Kernel(), []v1.IPFamily{v1.IPv4Protocol}); err != nil {
		t.Fatal(err)
	}
	if after := node.Dump(); after != before || node.Writes() != writes {
		t.Fatalf("cleanup on kube-proxy's node wrote %d times; before:\n%s\nafter:\n%s", node.Writes()-writes, before, after)
	}
}
