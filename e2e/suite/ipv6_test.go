//go:build e2e

package suite

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/cluster"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// IPv6 and dual-stack traffic. Every namespace of the topology has an IPv6
// address beside its IPv4 one (node N 2001:db8:1::N, pod 10.244.N.X also
// 2001:db8:244:N::X, client 2001:db8:1::79, VIP6 2001:db8:113::140), the API
// server's Service range is dual-stack and the daemons run with
// --ip-families auto (both families). Each scenario sends real packets over
// IPv6 and checks the address the echo server saw, as the IPv4 scenarios do.
// (10, cleanup, also checks that no IPv6 object is left.) NodePorts
// 30601-30603 clash with nothing.

// v6 is the IPv6 family: v6.pod("web") is web's IPv6 address, v6.node("node1") node1's.
const v6 = ipFamily(6)

// v6Service writes the Service and makes its endpoints these ("IP@NODE"; a
// pod's name stands for its IPv4 address).
func (v *V) v6Service(name, manifest string, endpoints ...string) *v1.Service {
	svc := v.ApplyService(manifest)
	v.Show("-", "e2ectl apply-service "+name+".yaml", serviceInfo(svc, "TYPE", "CLUSTER_IPS", "EXTERNAL_TRAFFIC_POLICY", "HEALTH_CHECK_NODE_PORT"))
	v.SetEndpoints(svc, endpoints...)
	v.Show("-", "e2ectl set-endpoints "+name+" "+strings.Join(endpoints, " "), "")
	return svc
}

// httpURL is http://IP:PORT/ with an IPv6 address in brackets.
func httpURL(ip string, port int) string { return "http://" + hostPort(ip, port) + "/" }

// scenarioDualStackClusterIP: a RequireDualStack ClusterIP answers on both
// cluster IPs, and web sees c1 and c2 (its own node and the other) as their
// own IPv4 and IPv6 addresses: no SNAT on either family.
func scenarioDualStackClusterIP(s *S) {
	s.Step("ipv6-dual-stack-clusterip", "RequireDualStack ClusterIP: c1 and c2 (same and other node) answered on both cluster IPs, seen as their own IPv4 and IPv6 address", func(v *V) {
		v.Heading("Dual-stack ClusterIP (RequireDualStack): both cluster IPs answer, pods keep their address")
		svc := v.v6Service("v6-dual", service("{name: v6-dual}", "ipFamilyPolicy: RequireDualStack", httpPort), podIP("web")+"@node1", v6.pod("web")+"@node1")
		ip4, ip6 := ipFamily(4).clusterIP(svc), v6.clusterIP(svc)
		if ip4 == "" || ip6 == "" {
			v.Fatalf("CLUSTER_IPS %v: want one of each family", svc.Spec.ClusterIPs)
		}
		v.about = fmt.Sprintf("RequireDualStack ClusterIP %s and [%s]: c1 and c2 (same and other node) answered on both, seen as their own IPv4 and IPv6 address", ip4, ip6)
		v.WaitRealServers("node1", ipvs.TCP, ip4, 80, hostPort(podIP("web"), 8080))
		v.WaitRealServers("node1", ipvs.TCP, ip6, 80, hostPort(v6.pod("web"), 8080))
		v.WaitRealServers("node2", ipvs.TCP, ip6, 80, hostPort(v6.pod("web"), 8080))
		for _, c := range []string{"c1", "c2"} {
			for _, f := range families {
				v.ExpectServed(v.Curl(c, httpURL(f.clusterIP(svc), 80)), "hostname=web", "client_address="+f.pod(c)+" ")
			}
		}
	})
}

// scenarioPreferDualStack: a PreferDualStack Service that lists IPv6 first
// gets its IPv6 cluster IP as the primary one and an IPv4 one too; an
// IPv6-only Service gets one IPv6 cluster IP. Both are served from the other
// node, the pods seen as their own addresses, and the cluster IPs are members
// of their family's KUBE-CLUSTER-IP set (KUBE-6-CLUSTER-IP for IPv6; read
// with the ipset package), the IPv6-only one with one virtual server.
func scenarioPreferDualStack(s *S) {
	s.Step("ipv6-prefer-dual-stack", "PreferDualStack (IPv6 primary) and IPv6-only: served from the other node, c1/c2 seen as their own addresses, the IPv6 cluster IPs in KUBE-6-CLUSTER-IP", func(v *V) {
		v.Heading("PreferDualStack (IPv6 first) and IPv6-only Services")
		prefer := v.v6Service("v6-prefer", service("{name: v6-prefer}", "ipFamilyPolicy: PreferDualStack", "ipFamilies: [IPv6, IPv4]", httpPort),
			podIP("s2")+"@node2", v6.pod("s2")+"@node2")
		p4, p6 := ipFamily(4).clusterIP(prefer), v6.clusterIP(prefer)
		if familyOf(prefer.Spec.ClusterIP) != 6 || p4 == "" || p6 == "" {
			v.Fatalf("v6-prefer CLUSTER_IP %s CLUSTER_IPS %v: want IPv6 first, then IPv4", prefer.Spec.ClusterIP, prefer.Spec.ClusterIPs)
		}
		only := v.v6Service("v6-only", service("{name: v6-only}", "ipFamilyPolicy: SingleStack", "ipFamilies: [IPv6]", httpPort), v6.pod("s3")+"@node1")
		if len(only.Spec.ClusterIPs) != 1 || familyOf(only.Spec.ClusterIPs[0]) != 6 {
			v.Fatalf("v6-only CLUSTER_IPS %v: want one IPv6 address", only.Spec.ClusterIPs)
		}
		o6 := only.Spec.ClusterIPs[0]
		v.about = fmt.Sprintf("PreferDualStack [%s] (primary) and %s, IPv6-only [%s]: served from the other node, c1/c2 seen as their own addresses, in KUBE-6-CLUSTER-IP", p6, p4, o6)
		v.WaitRealServers("node1", ipvs.TCP, p6, 80, hostPort(v6.pod("s2"), 8080))
		v.WaitRealServers("node1", ipvs.TCP, p4, 80, hostPort(podIP("s2"), 8080))
		v.WaitRealServers("node2", ipvs.TCP, o6, 80, hostPort(v6.pod("s3"), 8080))
		v.ExpectServed(v.Curl("c1", httpURL(p6, 80)), "hostname=s2", "client_address="+v6.pod("c1")+" ")
		v.ExpectServed(v.Curl("c1", httpURL(p4, 80)), "hostname=s2", "client_address="+podIP("c1")+" ")
		v.ExpectServed(v.Curl("c2", httpURL(o6, 80)), "hostname=s3", "client_address="+v6.pod("c2")+" ")

		// The IPv6-only Service: one virtual server, and its address in the IPv6 set.
		vss, err := virtualServers("node1")
		v.Must(err)
		var of []string
		for _, vs := range vss {
			if vs.Address.String() == o6 {
				of = append(of, vs.String())
			}
		}
		v.Show("node1", "ipvsadm -Ln | grep -F '["+o6+"]'  # read with the ipvs package", strings.Join(of, "\n"))
		if want := "TCP " + hostPort(o6, 80); len(of) != 1 || of[0] != want {
			v.Errorf("node1's virtual servers on %s: %v, want only %s", o6, of, want)
		}
		for _, m := range []struct{ set, ip string }{{"KUBE-6-CLUSTER-IP", o6}, {"KUBE-6-CLUSTER-IP", p6}, {"KUBE-CLUSTER-IP", p4}} {
			e := ipset.Entry{IP: netip.MustParseAddr(m.ip), Protocol: "tcp", Port: 80}
			var in bool
			ok, last := waitUntil(10*time.Second, func() (bool, string) {
				var err error
				in, err = inSet("node1", m.set, e)
				return in, errText(err)
			})
			v.Show("node1", "ipset test "+m.set+" "+e.String(ipset.HashIPPort)+"  # read with the ipset package", fmt.Sprint(in, " ", last))
			if !ok {
				v.Errorf("node1: %s not in %s", e.String(ipset.HashIPPort), m.set)
			}
		}
	})
}

// scenarioIPv6NodePort: a RequireDualStack NodePort on the nodes' IPv6
// addresses. Under Cluster either node answers and the pod sees the node
// that forwarded it (node1 itself, or node2's address on its way to the
// pod), IPv4 still served alike; patched to Local, node1 keeps the client's
// address and node2, without a local endpoint, drops the client silently
// (curl exit 28, no reset).
func scenarioIPv6NodePort(s *S) {
	const nodePort = 30601
	node1, node2 := v6.node("node1"), v6.node("node2")
	s.Step("ipv6-nodeport", fmt.Sprintf("IPv6 NodePort %d: Cluster seen as %s via node1 and %s via node2 (SNAT), IPv4 too; Local via node1 keeps %s, node2 without endpoint drops (curl 28)", nodePort, node1, node2, clientAddr6), func(v *V) {
		v.Heading("NodePort on the nodes' IPv6 addresses: Cluster SNATs, Local keeps the client")
		svc := v.v6Service("v6-nodeport", service("{name: v6-nodeport}", "type: NodePort", "ipFamilyPolicy: RequireDualStack",
			fmt.Sprintf("ports: [{port: 80, targetPort: 8080, nodePort: %d, protocol: TCP}]", nodePort)),
			podIP("web")+"@node1", v6.pod("web")+"@node1")
		web6 := hostPort(v6.pod("web"), 8080)
		v.WaitRealServers("node2", ipvs.TCP, node2, nodePort, web6)
		v.WaitRealServers("node1", ipvs.TCP, node1, nodePort, web6)
		v.ExpectServed(v.Curl("client", httpURL(node1, nodePort)), "hostname=web", "client_address="+node1+" ")
		v.ExpectServed(v.Curl("client", httpURL(node2, nodePort)), "hostname=web", "client_address="+node2+" ")
		// IPv4 still served the same way on this dual-stack Service.
		v.ExpectServed(v.Curl("client", httpURL(node2Addr, nodePort)), "hostname=web", "client_address="+node2Addr+" ")

		svc = v.SetExternalTrafficPolicy(svc, v1.ServiceExternalTrafficPolicyLocal)
		v.Show("-", "e2ectl patch-etp v6-nodeport Local", serviceInfo(svc, "EXTERNAL_TRAFFIC_POLICY"))
		// Both daemons see the change within a sync: node1 first keeps the client's address.
		if ok, last := waitUntil(30*time.Second, func() (bool, string) {
			a := run("client", "curl -gs --max-time 2 '"+httpURL(node1, nodePort)+"' | grep client_address=")
			return a.Out == "client_address="+clientAddr6, a.Out
		}); !ok {
			v.Errorf("node1 never kept the client's address after the patch to Local: %s", last)
		}
		time.Sleep(2 * time.Second)
		v.ExpectServed(v.Curl("client", httpURL(node1, nodePort)), "hostname=web", "client_address="+clientAddr6+" ")
		v.ExpectSilence(v.Curl("client", httpURL(node2, nodePort)))
	})
}

// scenarioIPv6LoadBalancer: an IPv6-only LoadBalancer, externalTrafficPolicy
// Local, with an IPv6 ingress IP: node1 binds it on kube-ipvs0 (read with the
// netif package); the healthCheckNodePort answers over IPv6 200 with
// localEndpoints 1 on node1 and 503 with 0 on node2; the load balancer,
// weighting each node by it, gives node1 1 and node2 0 (read with the ipvs
// package in lb), and through it the pod sees the client's IPv6 address.
func scenarioIPv6LoadBalancer(s *S) {
	const nodePort = 30602
	s.Step("ipv6-loadbalancer-local", "IPv6 LoadBalancer ["+vip6+"]:80 Local: healthCheckNodePort over IPv6 200/localEndpoints 1 on node1, 503/0 on node2; through the LB the pod sees "+clientAddr6, func(v *V) {
		v.Heading("LoadBalancer with an IPv6 ingress IP, Local: healthCheckNodePort over IPv6")
		svc := v.v6Service("v6-lb", service("{name: v6-lb}", "type: LoadBalancer", "externalTrafficPolicy: Local", "ipFamilyPolicy: SingleStack", "ipFamilies: [IPv6]",
			fmt.Sprintf("ports: [{port: 80, targetPort: 8080, nodePort: %d, protocol: TCP}]", nodePort)), v6.pod("web")+"@node1")
		hc := strconv.Itoa(int(svc.Spec.HealthCheckNodePort))
		v.SetLoadBalancerIngress(svc, vip6)
		v.Show("-", `curl -X PATCH .../services/v6-lb/status -d '{"status":{"loadBalancer":{"ingress":[{"ip":"`+vip6+`"}]}}}'`, "")
		v.about = fmt.Sprintf("IPv6 LoadBalancer [%s]:80 Local: healthCheckNodePort %s over IPv6 200/localEndpoints 1 on node1, 503/0 on node2; through the LB the pod sees %s", vip6, hc, clientAddr6)
		v.WaitRealServers("node1", ipvs.TCP, vip6, 80, hostPort(v6.pod("web"), 8080))
		var bound []netip.Addr
		ok, last := waitUntil(30*time.Second, func() (bool, string) {
			var err error
			bound, err = boundIn("node1", netip.MustParsePrefix(vip6+"/128"))
			return len(bound) == 1, errText(err)
		})
		v.Show("node1", "ip -6 addr show dev kube-ipvs0 | grep "+vip6+"/128  # read with the netif package", joined(bound)+" "+last)
		if !ok {
			v.Errorf("node1: %s not bound on kube-ipvs0", vip6)
		}
		healthz := func(node string) string { return httpURL(v6.node(node), int(svc.Spec.HealthCheckNodePort)) + "healthz" }
		// node2 has no local endpoint once its proxier saw the Service.
		waitUntil(30*time.Second, func() (bool, string) {
			a := run("lb", "curl -gs -o /dev/null -w '%{http_code}' --max-time 2 '"+healthz("node2")+"'")
			return a.Out == "503", a.Out
		})
		for _, h := range []struct{ node, endpoints, code string }{{"node1", "1", "200"}, {"node2", "0", "503"}} {
			a := v.Ask("lb", "curl -gs -w ' %{http_code}' --max-time 3 '"+healthz(h.node)+"'")
			// The body is kube-proxy's indented JSON: compare without white space.
			got := strings.Join(strings.Fields(a.Out), "")
			if !strings.Contains(got, `"localEndpoints":`+h.endpoints) || !strings.HasSuffix(got, "}"+h.code) {
				v.Errorf("%s's health check over IPv6: '%s', want localEndpoints %s and %s", h.node, got, h.endpoints, h.code)
			}
		}
		v.LoadBalance6(80, hc)
		var weights map[string]int
		if ok, last := waitUntil(30*time.Second, func() (bool, string) {
			rss, err := realServers("lb", ipvs.TCP, vip6, 80)
			if err != nil {
				return false, err.Error()
			}
			weights = map[string]int{}
			for _, rs := range rss {
				weights[rs.Address.String()] = int(rs.Weight)
			}
			w1, ok1 := weights[v6.node("node1")]
			w2, ok2 := weights[v6.node("node2")]
			return ok1 && ok2 && w1 == 1 && w2 == 0, fmt.Sprint(weights)
		}); !ok {
			v.Errorf("the load balancer's weights never became node1 1, node2 0: %s", last)
		}
		var shown []string
		for addr, w := range weights {
			shown = append(shown, fmt.Sprintf("%s weight %d", addr, w))
		}
		slices.Sort(shown)
		v.Show("lb", "ipvsadm -Ln -t ["+vip6+"]:80  # real servers and weights, read with the ipvs package", strings.Join(shown, ", "))
		for range 3 {
			v.ExpectServed(v.Curl("client", httpURL(vip6, 80)), "hostname=web", "client_address="+clientAddr6+" ")
		}
	})
}

// scenarioIPv6SourceRanges: an IPv6-only LoadBalancer with
// loadBalancerSourceRanges 2001:db8:1::79/128 (the client): the client is
// served through the load balancer by both nodes (Cluster: SNAT); pods,
// whose addresses lie outside the range, are dropped silently on their own
// node, where the VIP is local.
func scenarioIPv6SourceRanges(s *S) {
	const nodePort = 30603
	s.Step("ipv6-source-ranges", "IPv6 loadBalancerSourceRanges "+clientAddr6+"/128 on ["+vip6+"]:81: the client is served through both nodes, c1 and c2 are dropped (curl 28)", func(v *V) {
		v.Heading("loadBalancerSourceRanges with an IPv6 range")
		svc := v.v6Service("v6-ranged", service("{name: v6-ranged}", "type: LoadBalancer", "ipFamilyPolicy: SingleStack", "ipFamilies: [IPv6]",
			"loadBalancerSourceRanges: ["+clientAddr6+"/128]", fmt.Sprintf("ports: [{port: 81, targetPort: 8080, nodePort: %d, protocol: TCP}]", nodePort)),
			v6.pod("web")+"@node1")
		v.SetLoadBalancerIngress(svc, vip6)
		v.WaitRealServers("node1", ipvs.TCP, vip6, 81, hostPort(v6.pod("web"), 8080))
		v.WaitRealServers("node2", ipvs.TCP, vip6, 81, hostPort(v6.pod("web"), 8080))
		v.LoadBalance6(81, "")
		// Allowed: the client, through the load balancer to either node (round robin).
		for range 2 {
			v.ExpectServed(v.Curl("client", httpURL(vip6, 81)), "hostname=web")
		}
		// Forbidden: pods, outside the range, dropped on their own node.
		v.ExpectSilence(v.Curl("c1", httpURL(vip6, 81)))
		v.ExpectSilence(v.Curl("c2", httpURL(vip6, 81)))
	})
}

// scenarioIPv6ExternalIP: an IPv6 external IP (Local) that the network routes
// to node1, as a router or BGP speaker would: the pod sees the client's IPv6
// address; from a pod on the other node (cluster-internal traffic to an
// external IP) it is served too.
func scenarioIPv6ExternalIP(s *S) {
	const eip = "2001:db8:114::10"
	s.Step("ipv6-external-ip", "IPv6 externalIP ["+eip+"]:80 (Local) through node1: the pod sees "+clientAddr6+"; c2 is served", func(v *V) {
		v.Heading("externalIPs over IPv6")
		v.v6Service("v6-external", service("{name: v6-external}", "ipFamilyPolicy: SingleStack", "ipFamilies: [IPv6]", "externalTrafficPolicy: Local",
			"externalIPs: ["+eip+"]", httpPort), v6.pod("web")+"@node1")
		v.WaitRealServers("node1", ipvs.TCP, eip, 80, hostPort(v6.pod("web"), 8080))
		v.routeVia(eip, v6.node("node1"))
		v.Show("client", "ip -6 route add "+eip+"/128 via "+v6.node("node1"), "")
		v.ExpectServed(v.Curl("client", httpURL(eip, 80)), "hostname=web", "client_address="+clientAddr6+" ")
		v.ExpectServed(v.Curl("c2", httpURL(eip, 80)), "hostname=web")
	})
}

// scenarioIPv6UDP: UDP over IPv6 and stale conntrack, as udp-endpoint-removed for
// IPv4. Two UDP echo pods of the scenario's own (u61 on node1, u62 on
// node2); c1 sends a datagram every 0.3 s from one source port, so all
// belong to one flow and reach one endpoint. That endpoint's pod and
// endpoint are deleted: replies must come from the other within two sync
// periods, and node1's conntrack table (read with the conntrack package)
// must keep no IPv6 UDP flow to the cluster IP that involves the deleted
// endpoint. The echo server must see c1's IPv6 address and port.
func scenarioIPv6UDP(s *S) {
	const sourcePort = 40063
	udpPods := []struct{ node, name, ip4 string }{{"node1", "u61", "10.244.1.61"}, {"node2", "u62", "10.244.2.62"}}
	addr6 := map[string]string{"u61": "2001:db8:244:1::61", "u62": "2001:db8:244:2::62"}
	s.Step("ipv6-udp-endpoint-removed", "UDP over IPv6: after deleting the endpoint a flow reaches, replies from the other within two sync periods, no flow to it left", func(v *V) {
		v.Heading("UDP over IPv6: the flow of a deleted endpoint is cleaned up")
		for _, p := range udpPods {
			s.t.Cleanup(func() { topology("del-pod", p.name) })
			v.Must(topology("add-pod", p.node, p.name, p.ip4))
			v.Must(topology("echo", p.name, "-http", "", "-udp", ":8081"))
		}
		svc := v.v6Service("v6-udp", service("{name: v6-udp}", "ipFamilyPolicy: SingleStack", "ipFamilies: [IPv6]", "ports: [{port: 53, targetPort: 8081, protocol: UDP}]"),
			addr6["u61"]+"@node1", addr6["u62"]+"@node2")
		ip := svc.Spec.ClusterIP
		v.WaitRealServers("node1", ipvs.UDP, ip, 53, hostPort(addr6["u61"], 8081), hostPort(addr6["u62"], 8081))

		send := fmt.Sprintf("while sleep 0.3; do echo ping; done | socat - 'UDP6:[%s]:53,sourceport=%d'", ip, sourcePort)
		sender := v.Background("c1", send)
		// replies are the lines starting with prefix, the prefix dropped.
		replies := func(prefix string) []timedLine {
			var out []timedLine
			for _, l := range sender.Lines() {
				if rest, ok := strings.CutPrefix(l.text, prefix); ok {
					out = append(out, timedLine{l.at, rest})
				}
			}
			return out
		}
		distinct := func(lines []timedLine) []string {
			var out []string
			for _, l := range lines {
				if !slices.Contains(out, l.text) {
					out = append(out, l.text)
				}
			}
			slices.Sort(out)
			return out
		}
		v.WaitUntil(30*time.Second, "no reply to "+send, func() (bool, string) { return len(replies("hostname=")) > 0, "" })
		time.Sleep(time.Second)
		from, seen := distinct(replies("hostname=")), distinct(replies("client_address="))
		v.Show("c1", send+"  # replies so far", "hostname="+strings.Join(from, ",")+" client_address="+strings.Join(seen, ","))
		c1 := v6.pod("c1")
		if want := hostPort(c1, sourcePort); !slices.Equal(seen, []string{want}) && !slices.Equal(seen, []string{c1 + ":" + strconv.Itoa(sourcePort)}) {
			v.Errorf("the UDP server saw %q, want c1's %s", seen, want)
		}
		if len(from) != 1 || addr6[from[0]] == "" {
			v.Fatalf("one flow reaches one endpoint: replies from %q", from)
		}
		victim, survivor := from[0], map[string]string{"u61": "u62", "u62": "u61"}[from[0]]
		victimIP := addr6[victim]

		tDel := time.Now()
		v.Must(topology("del-pod", victim))
		ctx, cancel := v.s.ctx()
		err := cluster.RemoveEndpoint(ctx, guest.client, cluster.ServiceRef{Namespace: svc.Namespace, Name: svc.Name}, net.ParseIP(victimIP))
		cancel()
		v.Must(err)
		t0 := time.Now()
		v.Show("-", fmt.Sprintf("topology.sh del-pod %s && e2ectl delete-endpoint v6-udp %s  # took %ss", victim, victimIP, seconds(t0.Sub(tDel))), "")

		// Two periodic syncs: the longest the proxier may take to notice, were events missed.
		limit := 2 * syncPeriod
		resumed := func() (time.Duration, bool) {
			for _, r := range replies("hostname=") {
				if r.at.After(t0) && r.text == survivor {
					return r.at.Sub(t0), true
				}
			}
			return 0, false
		}
		for time.Since(t0) <= limit {
			if _, ok := resumed(); ok {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		sender.Stop()
		v.Show("c1", "# replies over time, seconds relative to the EndpointSlice update", replyRuns(replies("hostname="), t0))
		after, ok := resumed()
		when := "never"
		if ok {
			when = seconds(after) + "s"
		}
		if !ok || after > limit {
			v.Errorf("no reply from %s within %ss of the endpoint's deletion", survivor, seconds(limit))
		}

		flows, err := conntrackFlows("node1", 6)
		v.Must(err)
		var toService, stale []string
		dead := netip.MustParseAddr(victimIP)
		for _, f := range flows {
			if f.Protocol != conntrack.UDP || f.OrigDst.Addr().String() != ip {
				continue
			}
			toService = append(toService, f.String())
			if slices.Contains([]netip.Addr{f.OrigSrc.Addr(), f.ReplySrc.Addr(), f.ReplyDst.Addr()}, dead) {
				stale = append(stale, f.String())
			}
		}
		v.Show("node1", "conntrack -L -f ipv6 -p udp --orig-dst "+ip+"  # read with the conntrack package", strings.Join(toService, "\n"))
		if len(stale) > 0 {
			v.Errorf("node1 still has a flow to %s: %s", victimIP, strings.Join(stale, "; "))
		}
		v.about = fmt.Sprintf("UDP over IPv6 [%s]:53 from c1 port %d (seen as %s): after deleting %s, replies from %s after %s (limit %ss), no flow to it left",
			ip, sourcePort, strings.Join(seen, ","), victim, survivor, when, seconds(limit))
		v.DeleteService(svc)
	})
}

// scenarioIPv6Inspect: `ipvsproxy inspect` and `inspect trace` on an
// IPv6-only Service with endpoints on both nodes, after 4 requests from c1:
// the table names the Service, its cluster IP and both IPv6 endpoints with
// their nodes; the JSON counts at least 4 connections; the trace from c1's
// IPv6 address is load-balanced to both real servers, not masqueraded, and
// the kernel agrees; `inspect --check` exits 0.
func scenarioIPv6Inspect(s *S) {
	inspect := ipvsproxyBin() + " inspect"
	s.Step("ipv6-inspect", "inspect names default/v6-inspect with both IPv6 endpoints and connections >= 4; trace c1 -> the IPv6 cluster IP load-balanced, not masqueraded, kernel agrees; --check 0", func(v *V) {
		v.Heading("inspect and inspect trace for an IPv6 Service")
		svc := v.v6Service("v6-inspect", service("{name: v6-inspect}", "ipFamilyPolicy: SingleStack", "ipFamilies: [IPv6]",
			"ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]"), v6.pod("web")+"@node1", v6.pod("s2")+"@node2")
		ip := svc.Spec.ClusterIP
		web, s2 := hostPort(v6.pod("web"), 8080), hostPort(v6.pod("s2"), 8080)
		v.WaitRealServers("node1", ipvs.TCP, ip, 80, web, s2)
		for range 4 {
			v.ExpectServed(v.Curl("c1", httpURL(ip, 80)), "client_address="+v6.pod("c1")+" ")
		}
		table := v.Ask("node1", inspect+" --service default/v6-inspect").Out
		if !inOrder(table, "default/v6-inspect:http", "ClusterIP", ip) {
			v.Errorf("inspect table lacks default/v6-inspect:http ClusterIP %s", ip)
		}
		if !inOrder(table, v6.pod("web"), "ready on node1") || !inOrder(table, v6.pod("s2"), "ready on node2") {
			v.Errorf("inspect table lacks the IPv6 endpoints with their nodes")
		}
		// IPVS sums its per-CPU counters every 2 s: wait for them rather than read a count that lags.
		jsonCmd := inspect + " -o json --service default/v6-inspect"
		connections := func(out string) int {
			vs, _ := inspectClusterIP(out)
			if vs == nil {
				return -1
			}
			return vs.Stats.Connections
		}
		waitUntil(10*time.Second, func() (bool, string) { return connections(run("node1", jsonCmd).Out) >= 4, "" })
		if n := connections(v.Ask("node1", jsonCmd).Out); n < 4 {
			v.Errorf("inspect json: connections %d, want >= 4 after 4 requests", n)
		}
		trace := v.Ask("node1", fmt.Sprintf("%s trace %s '%s/tcp'", inspect, v6.pod("c1"), hostPort(ip, 80))).Out
		os.WriteFile(filepath.Join(guest.logs, "inspect-trace-ipv6.txt"), []byte(trace+"\n"), 0o644)
		if !strings.Contains(trace, "verdict: load-balanced") {
			v.Errorf("trace: want verdict load-balanced")
		}
		if !strings.Contains(trace, "-> "+web+" on node1 (ready): not masqueraded") || !strings.Contains(trace, "-> "+s2+" on node2 (ready): not masqueraded") {
			v.Errorf("trace: want both IPv6 real servers, not masqueraded")
		}
		if want := "kernel: virtual server TCP " + hostPort(ip, 80) + " is in the kernel with the same real servers"; !strings.Contains(trace, want) {
			v.Errorf("trace: want the kernel check to agree for TCP %s", hostPort(ip, 80))
		}
		if a := v.Ask("node1", inspect+" --check"); a.Status != 0 {
			v.Errorf("inspect --check exit %d with IPv6 Services, want 0", a.Status)
		}
		v.about = fmt.Sprintf("inspect names default/v6-inspect [%s]:80 with both IPv6 endpoints and connections >= 4; trace c1 [%s] -> [%s]:80 load-balanced, not masqueraded, kernel agrees; --check 0", ip, v6.pod("c1"), ip)
		v.DeleteService(svc)
	})
}

// scenarioIPv6TableRead: the full re-check takes the real servers from
// /proc/net/ip_vs (ipvs.RealServerTable) for IPv6 virtual servers too. An
// IPv6 real server deleted behind node1's daemon comes back at its next
// full sync, ipvsproxy_full_read_virtual_servers_total{read="table"} grew
// and {read="dump"} did not (no virtual server dumped one at a time),
// inspect's last full read says the same, and c1 reaches the restored pod
// again over IPv6.
func scenarioIPv6TableRead(s *S) {
	s.Step("ipv6-full-recheck", "IPv6 real server deleted behind node1's daemon: back at the next full re-check, read from /proc/net/ip_vs (table count grew, no dump); c1 reaches it again over IPv6", func(v *V) {
		v.Heading("the full re-check reads IPv6 real servers from /proc/net/ip_vs")
		svc := v.v6Service("v6-table", service("{name: v6-table}", "ipFamilyPolicy: SingleStack", "ipFamilies: [IPv6]",
			"ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]"), v6.pod("web")+"@node1", v6.pod("s2")+"@node2")
		ip := svc.Spec.ClusterIP
		web, s2 := hostPort(v6.pod("web"), 8080), hostPort(v6.pod("s2"), 8080)
		v.WaitRealServers("node1", ipvs.TCP, ip, 80, web, s2)
		const fromTable, dumped = `ipvsproxy_full_read_virtual_servers_total{read="table"}`, `ipvsproxy_full_read_virtual_servers_total{read="dump"}`
		table0, ok := metric("node1", fromTable)
		dump0, _ := metric("node1", dumped)
		if !ok {
			v.Errorf("node1 does not export %s", fromTable)
		}
		// The periodic full sync may put it back before the first check: the wait below tells.
		v.Ask("node1", fmt.Sprintf("ipvsadm -d -t %s -r %s", hostPort(ip, 80), s2))
		t0 := time.Now()
		v.WaitUntil(3*syncPeriod, fmt.Sprintf("the deleted real server %s of %s is not back on node1", s2, hostPort(ip, 80)), func() (bool, string) {
			return realServersAre("node1", ip, 80, []string{web, s2})
		})
		took := time.Since(t0)
		table, _ := metric("node1", fromTable)
		dump, _ := metric("node1", dumped)
		v.Show("node1", "curl 127.0.0.1:10249/metrics | grep ipvsproxy_full_read_virtual_servers_total", fmt.Sprintf("table %v (was %v), dump %v (was %v)", table, table0, dump, dump0))
		if table <= table0 {
			v.Errorf("%s is %v, was %v: no full read took real servers from the table", fromTable, table, table0)
		}
		if dump != dump0 {
			v.Errorf("%s is %v, was %v: a full read dumped virtual servers one at a time", dumped, dump, dump0)
		}
		last := v.Ask("node1", ipvsproxyBin()+" inspect | grep '^last full read:'").Out
		if !strings.Contains(last, "from /proc/net/ip_vs, 0 one dump each") || strings.Contains(last, "the table:") {
			v.Errorf("inspect's last full read is %q, want every virtual server from /proc/net/ip_vs and none dumped", last)
		}
		// The restored real server takes traffic again: c1 reaches s2 within a few connections.
		reached := 0
		for i := 0; i < 12 && reached == 0; i++ {
			a := v.Curl("c1", httpURL(ip, 80))
			v.ExpectServed(a, "client_address="+v6.pod("c1")+" ")
			if strings.Contains(a.Out, "hostname=s2 ") {
				reached = i + 1
			}
		}
		if reached == 0 {
			v.Errorf("c1 did not reach s2 through [%s]:80 in 12 connections after the repair", ip)
		}
		v.about = fmt.Sprintf("IPv6 real server %s deleted behind node1's daemon: back after %.1fs, read from /proc/net/ip_vs (table count %v -> %v, dumps %v -> %v); c1 reached s2 over IPv6 at connection %d", s2, took.Seconds(), table0, table, dump0, dump, reached)
		v.DeleteService(svc)
	})
}
