//go:build e2e

package suite

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipset"
)

// What one object costs the others: two Services on one key, a virtual
// server someone else made, a real server the kernel refuses.

// scenarioConflictLoser: when two Services want the same virtual server the
// older keeps it and the loser programs nothing for it. The older Service
// "winner25" has an external IP with externalTrafficPolicy Local, so its pod
// must see the client's own address; the newer "loser25" names the same
// externalIP:port with policy Cluster, whose KUBE-EXTERNAL-IP member would
// masquerade the winner's traffic. The client reaches the external IP
// through node1 (a /32 route, as an upstream router would have).
func scenarioConflictLoser(s *S) {
	const ip = "203.0.113.25"
	s.Step("port-conflict-older-wins", "conflict loser: winner25's Local externalIP keeps "+clientAddr+", loser25 has no member for it and a PortConflict Event", func(v *V) {
		v.Heading("A conflict's loser programs nothing for the key it lost")
		winner := v.ApplyService(service("{name: winner25}", "type: ClusterIP", "externalIPs: ["+ip+"]", "externalTrafficPolicy: Local", httpPort))
		v.SetEndpoints(winner, "web@node1")
		v.WaitRealServers("node1", ipvs.TCP, ip, 80, podIP("web")+":8080")
		time.Sleep(time.Second) // created later: the loser
		loser := v.ApplyService(service("{name: loser25}", "type: ClusterIP", "externalIPs: ["+ip+"]", "externalTrafficPolicy: Cluster", httpPort))
		v.SetEndpoints(loser, "s2@node2")
		v.Show("-", "e2ectl apply-service winner25.yaml; sleep 1; e2ectl apply-service loser25.yaml  # both on "+ip+":80", "")
		// The loser's own cluster IP is programmed: its sync has happened.
		v.WaitRealServers("node1", ipvs.TCP, loser.Spec.ClusterIP, 80, podIP("s2")+":8080")
		v.routeVia(ip, node1Addr)
		member, err := inSet("node1", "KUBE-EXTERNAL-IP", ipset.Entry{IP: netip.MustParseAddr(ip), Protocol: "tcp", Port: 80})
		v.Must(err)
		v.Show("node1", "ipset test KUBE-EXTERNAL-IP "+ip+",tcp:80  # read with the ipset package", fmt.Sprint(member))
		if member {
			v.Errorf("the loser's KUBE-EXTERNAL-IP member %s,tcp:80 exists", ip)
		}
		if got := v.Ask("client", "curl -s --max-time 5 "+ip+" | grep client_address").Out; got != "client_address="+clientAddr {
			v.Errorf("through the winner's externalIP the pod saw %q, want client_address=%s (no SNAT under Local)", got, clientAddr)
		}
		v.WaitRealServers("node1", ipvs.TCP, ip, 80, podIP("web")+":8080") // the winner kept its real server
		v.WaitEvent("loser25", "PortConflict")
	})
}

// routeVia makes the client route addr (either family) via a node's
// address until the scenario ends, as a router or BGP speaker would.
func (v *V) routeVia(addr, node string) {
	host := addr + "/32"
	if familyOf(addr) == 6 {
		host = addr + "/128"
	}
	if a := run("-", "ip -n client route replace "+host+" via "+node); a.Status != 0 {
		v.Fatalf("route %s via %s: %s", addr, node, a.Out)
	}
	v.s.t.Cleanup(func() { run("-", "ip -n client route del "+host) })
}

// scenarioForeignVirtualServer: a virtual server someone else made is never
// adopted because a Service names its address. On node1 an operator's own
// IPVS service 203.0.113.26:80 (scheduler rr, real server s3) serves an
// address on lo; then Service "foreign26" names that address as an external
// IP. Across two full syncs the foreign virtual server keeps its scheduler
// and real server and keeps answering from s3, the Service gets a
// PortConflict Event, and nothing of the Service is bound or recorded for
// that key; deleting the Service leaves it too.
func scenarioForeignVirtualServer(s *S) {
	const ip = "203.0.113.26"
	key := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr(ip), Port: 80}
	s.Step("foreign-virtual-server-kept", "foreign virtual server: "+ip+":80 (rr, s3) unchanged across two full syncs and answering, foreign26 gets a PortConflict Event", func(v *V) {
		v.Heading("A foreign virtual server is never adopted")
		if a := run("node1", "ip addr add "+ip+"/32 dev lo"); a.Status != 0 {
			v.Fatalf("node1: ip addr add %s/32 dev lo: %s", ip, a.Out)
		}
		s.t.Cleanup(func() { run("node1", "ip addr del "+ip+"/32 dev lo") })
		// The operator's own virtual server, written as ipvsadm -A/-a would.
		v.Must(withIPVS("node1", func(k ipvs.Interface) error {
			if err := k.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: key, Scheduler: "rr"}); err != nil {
				return err
			}
			return k.AddRealServer(key, ipvs.RealServer{RealServerKey: ipvs.RealServerKey{Address: netip.MustParseAddr(podIP("s3")), Port: 8080}, Weight: 1})
		}))
		s.t.Cleanup(func() { _ = withIPVS("node1", func(k ipvs.Interface) error { return k.DeleteVirtualServer(key) }) })
		v.Show("node1", "ipvsadm -A -t "+ip+":80 -s rr; ipvsadm -a -t "+ip+":80 -r "+podIP("s3")+":8080 -m  # the operator's own", "")
		before, err := vsShape("node1", key)
		v.Must(err)
		svc := v.ApplyService(service("{name: foreign26}", "type: ClusterIP", "externalIPs: ["+ip+"]", httpPort))
		v.SetEndpoints(svc, "web@node1")
		v.WaitRealServers("node1", ipvs.TCP, svc.Spec.ClusterIP, 80, podIP("web")+":8080")
		// Two full syncs later (a full sync used to rewrite what it took for its own).
		full, _ := metric("node1", "ipvsproxy_sync_full_total")
		v.WaitUntil(40*time.Second, "node1 did not run two full syncs", func() (bool, string) {
			n, _ := metric("node1", "ipvsproxy_sync_full_total")
			return n >= full+2, fmt.Sprint(n)
		})
		after, err := vsShape("node1", key)
		v.Must(err)
		v.Show("node1", "ipvsadm -Ln -t "+ip+":80  # read with the ipvs package", after)
		if after != before {
			v.Errorf("the foreign virtual server changed: before %q after %q", before, after)
		}
		v.routeVia(ip, node1Addr)
		if got := v.Ask("client", "curl -s --max-time 5 "+ip+" | grep hostname").Out; got != "hostname=s3" {
			v.Errorf("the foreign virtual server answered %q, want hostname=s3", got)
		}
		bound, _, err := boundOrListed("node1", ip)
		v.Must(err)
		var recorded []string
		for _, set := range []string{"KUBE-IPVS-SERVICES", "KUBE-IPVS-OWNED"} {
			in, err := inSet("node1", set, ipset.Entry{IP: key.Address, Protocol: "tcp", Port: 80})
			v.Must(err)
			if in {
				recorded = append(recorded, set)
			}
		}
		v.Show("node1", "ip addr show kube-ipvs0; ipset test KUBE-IPVS-SERVICES|KUBE-IPVS-OWNED "+ip+",tcp:80  # read with the netif and ipset packages",
			fmt.Sprintf("on kube-ipvs0: %v; in: %v", bound, recorded))
		if bound || len(recorded) > 0 {
			v.Errorf("%s: bound on kube-ipvs0 %v, in %v; want neither", ip, bound, recorded)
		}
		v.WaitEvent("foreign26", "PortConflict", "did not create")
		v.DeleteService(svc)
		if now, err := vsShape("node1", key); err != nil || now != before {
			v.Errorf("deleting the Service changed the foreign virtual server: %q (%v)", now, err)
		}
	})
}

// vsShape is a virtual server's scheduler and real servers with their
// weights, without connection counts (traffic changes those).
func vsShape(node string, key ipvs.VirtualServerKey) (string, error) {
	vs, err := virtualServer(node, key.Protocol, key.Address.String(), key.Port)
	if err != nil {
		return "", err
	}
	rss, err := realServers(node, key.Protocol, key.Address.String(), key.Port)
	if err != nil {
		return "", err
	}
	lines := []string{vs.String() + " " + vs.Scheduler}
	for _, rs := range rss {
		lines = append(lines, fmt.Sprintf("-> %s weight %d", rs.String(), rs.Weight))
	}
	return strings.Join(lines, "\n"), nil
}

// scenarioFailingObject: one kernel object that keeps failing costs its own
// retries and nothing else. Service "bad27" has one endpoint,
// 198.51.100.255: a valid IPv4 address to the API server and the builder,
// but the broadcast address of node1's subnet, so node1's IPVS refuses the
// real server (ip_vs_new_dest wants RTN_UNICAST or RTN_LOCAL), a refusal
// only the kernel's routing table can tell. While it fails, on node1: the
// failure is one object in ipvsproxy_kernel_objects_failing and a SyncFailed
// Event on bad27; a new Service is programmed at once by a partial sync;
// over 25 s (more than two sync periods) syncs are not all full and /healthz
// stays 200.
func scenarioFailingObject(s *S) {
	s.Step("failing-object-isolated", "failing object: bad27's refused real server is one failing object with a SyncFailed Event; good27 programmed by a partial sync; /healthz 200; no extra full sync", func(v *V) {
		v.Heading("One failing object costs nothing else")
		bad := v.ApplyService(service("{name: bad27}", "type: ClusterIP", httpPort))
		v.SetEndpoints(bad, "198.51.100.255@node2")
		v.WaitUntil(30*time.Second, "node1 reports no failing object", func() (bool, string) {
			n, _ := metric("node1", "ipvsproxy_kernel_objects_failing")
			return n >= 1, fmt.Sprint(n)
		})
		v.Ask("node1", "curl -s --max-time 5 http://127.0.0.1:10249/metrics | grep '^ipvsproxy_kernel_objects_failing'")
		t0 := time.Now()
		full0, _ := metric("node1", "ipvsproxy_sync_full_total")
		partial0, _ := metric("node1", "ipvsproxy_sync_partial_total")
		good := v.ApplyService(service("{name: good27}", "type: ClusterIP", httpPort))
		v.SetEndpoints(good, "s3@node1")
		start := time.Now()
		v.WaitRealServers("node1", ipvs.TCP, good.Spec.ClusterIP, 80, podIP("s3")+":8080")
		v.Show("node1", "(good27 programmed after)", fmt.Sprintf("%.1f s", time.Since(start).Seconds()))
		if got := v.Ask("c1", "curl -s --max-time 5 "+good.Spec.ClusterIP+" | grep hostname").Out; got != "hostname=s3" {
			v.Errorf("good27 answered %q, want hostname=s3", got)
		}
		time.Sleep(25*time.Second - time.Since(t0))
		if got := v.Ask("node1", "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:10256/healthz").Out; got != "200" {
			v.Errorf("/healthz answered %q while one object fails, want 200", got)
		}
		full1, _ := metric("node1", "ipvsproxy_sync_full_total")
		partial1, _ := metric("node1", "ipvsproxy_sync_partial_total")
		elapsed := int(time.Since(t0).Seconds())
		v.Show("node1", fmt.Sprintf("(syncs in %d s)", elapsed), fmt.Sprintf("full +%v, partial +%v", full1-full0, partial1-partial0))
		// Periodic full syncs come every 10 s; a failure must not add any.
		if full1-full0 > float64(elapsed/10+1) {
			v.Errorf("%v full syncs in %d s: failures make syncs full", full1-full0, elapsed)
		}
		if partial1 <= partial0 {
			v.Errorf("no partial sync ran")
		}
		v.WaitEvent("bad27", "SyncFailed")
	})
}
