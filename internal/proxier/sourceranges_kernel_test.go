package proxier

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
)

// An IPv4-mapped loadBalancerSourceRange (::ffff:192.0.2.0/120) on this
// host's kernel: the proxier's sets hold 192.0.2.0/24 for the IPv4 load
// balancer, and its rules, the real iptables of a node namespace, let a
// client inside the range in and drop one outside it. A listener on the LB
// IP stands in for IPVS (the host has none): KUBE-IPVS-FILTER acts in INPUT,
// before IPVS would. Before the sync both clients connect, so a missing
// firewall shows. The range was once taken for IPv6, and the IPv4 load
// balancer had no firewall.
func TestMappedSourceRangeOnRealKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root")
	}
	node, path := netnstest.NewNamed(t, "ipvsproxy-sr-")
	sets, err := ipset.NewInNamespace(node)
	if err != nil {
		kerneltest.Skip(t, kerneltest.NoKernelFeature, "no ipset: %v", err)
	}
	t.Cleanup(func() { sets.Close() })
	ipt, err := iptables.New(iptables.IPv4, iptables.InNetNS(path))
	if err != nil {
		kerneltest.Skip(t, kerneltest.NoTool, "no iptables: %v", err)
	}
	lbIP := netip.MustParseAddr("203.0.113.140")
	inside, outside := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("198.51.100.79")

	// The client's namespace, one veth away; the LB IP on the node's lo.
	netnstest.LoopbackUp(t, node, lbIP)
	client := netnstest.New(t)
	netnstest.Veth(t, node, "uplink", []string{"192.0.2.1/24", "198.51.100.1/24"}, client, "eth0", []string{inside.String() + "/24", outside.String() + "/24"})
	netnstest.LoopbackUp(t, client)
	if err := netnstest.Handle(t, client).RouteAdd(&netlink.Route{Dst: &net.IPNet{IP: lbIP.AsSlice(), Mask: net.CIDRMask(32, 32)}, Gw: net.ParseIP("192.0.2.1")}); err != nil {
		t.Fatalf("route to the LB IP: %v", err)
	}
	ln := listenIn(t, node, netip.AddrPortFrom(lbIP, 80))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	connects := func(from netip.Addr) error {
		var err error
		netnstest.In(t, client, func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from.AsSlice()}, Timeout: time.Second}
			var c net.Conn
			if c, err = d.Dial("tcp", netip.AddrPortFrom(lbIP, 80).String()); err == nil {
				c.Close()
			}
		})
		return err
	}
	// Before the sync both connect (the veth may take a moment to come up).
	for _, from := range []netip.Addr{inside, outside} {
		var err error
		for try := 0; try < 5; try++ {
			if err = connects(from); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("before the sync, %s -> %s:80: %v; the test proves nothing", from, lbIP, err)
		}
	}

	k := adapters.Kernel{IPVS: ipvs.NewFake(), Netif: netif.NewFake(owned.DummyInterface), IPSet: sets, IPTables: map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: ipt}}
	p, err := New(testConfig(), servicetest.ThisNode, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := servicetest.Service("lb", "10.96.0.20", servicetest.LoadBalancer(30090, lbIP.String()), func(s *v1.Service) {
		s.Spec.LoadBalancerSourceRanges = []string{"::ffff:192.0.2.0/120"}
	})
	p.Tracker().SetService(svc)
	p.Tracker().SetEndpointSlice(servicetest.Slice(svc, "lb-a", 8080, "10.244.1.5@node1"))
	mustSync(t, p)

	for set, want := range map[string]string{owned.SetLBFirewall: "203.0.113.140,tcp:80", owned.SetLBSourceCIDR: "203.0.113.140,tcp:80,192.0.2.0/24"} {
		out, err := exec.Command("ip", "netns", "exec", strings.TrimPrefix(path, "/run/netns/"), "ipset", "list", set).CombinedOutput()
		if err != nil {
			t.Fatalf("ipset list %s: %v %s", set, err, out)
		}
		if !strings.Contains(string(out), "\n"+want+"\n") && !strings.HasSuffix(string(out), "\n"+want) {
			t.Errorf("%s lacks %s:\n%s", set, want, out)
		}
	}
	if err := connects(inside); err != nil {
		t.Errorf("%s, inside the range, -> %s:80: %v", inside, lbIP, err)
	}
	if err := connects(outside); err == nil {
		t.Errorf("%s, outside the range, reached %s:80: the load balancer is open", outside, lbIP)
	} else {
		t.Logf("%s, outside the range: %v", outside, err)
	}
}
