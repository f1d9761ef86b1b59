//go:build e2e

package suite

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/cluster"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the proxier does to the node beyond IPVS: its Service-range routes,
// its guard of the node's own addresses, its conntrack reconcile, its health
// server under load.

// echoserver is the echo server binary guest.sh exports.
func echoserver() string { return os.Getenv("ECHOSERVER") }

// scenarioServiceCIDRRoute: the Service CIDR is local through one route on
// kube-ipvs0, not one bound address per cluster IP. The API server's default
// ServiceCIDR object ("kubernetes", from --service-cluster-ip-range
// 10.96.0.0/16) names the range. Traffic to a cluster IP from a pod on
// either node, from the node itself and from the endpoint itself (hairpin)
// is served as before; a port the node listens on is refused on an unused
// cluster IP and on a used one.
func scenarioServiceCIDRRoute(s *S) {
	const unusedClusterIP, hostPortNum = "10.96.255.250", 9099
	serviceRange := netip.MustParsePrefix("10.96.0.0/16")
	serviceRange6 := netip.MustParsePrefix("2001:db8:96::/112")
	s.Step("service-cidr-route", "Service CIDR route: one local route per node, cluster IPs unbound, pods/node/hairpin served, host port refused on cluster IPs", func(v *V) {
		v.Heading("Service CIDR routed local on kube-ipvs0: one route, no address per cluster IP")
		svc := v.ApplyService(service("{name: routed, labels: {app: source-ip-app}}", "type: ClusterIP", httpPort))
		ip := svc.Spec.ClusterIP
		v.SetEndpoints(svc, "web@node1")
		v.WaitRealServers("node1", ipvs.TCP, ip, 80, podIP("web")+":8080")
		v.WaitRealServers("node2", ipvs.TCP, ip, 80, podIP("web")+":8080")

		for _, want := range []struct {
			node  string
			route netip.Prefix
		}{{"node1", serviceRange}, {"node2", serviceRange}, {"node1", serviceRange6}} {
			routes, err := serviceRoutes(want.node)
			v.Show(want.node, "ip route show table local dev kube-ipvs0 proto 233  # read with the netif package", fmt.Sprint(joined(routes), " ", errText(err)))
			if !slices.Contains(routes, want.route) {
				v.Errorf("no local route of %s on %s's kube-ipvs0: %v %v", want.route, want.node, routes, errText(err))
			}
		}
		bound, err := boundIn("node1", serviceRange)
		v.Show("node1", "ip -4 addr show dev kube-ipvs0 | grep 10.96.  # read with the netif package", fmt.Sprint(joined(bound), " ", errText(err)))
		if err != nil || !slices.Equal(bound, []netip.Addr{serviceRange.Addr()}) {
			v.Errorf("node1's kube-ipvs0 holds %v of the range, want only the anchor %s/32 %s", bound, serviceRange.Addr(), errText(err))
		}

		for _, c := range []string{"c1", "c2"} {
			if a := v.Ask(c, "curl -s --max-time 5 "+ip+" | grep client_address"); a.Out != "client_address="+podIP(c) {
				v.Errorf("%s (%s) -> %s: '%s'", c, pods[c].node, ip, a.Out)
			}
		}
		// From the node itself: masqueraded (not from the cluster CIDR), answered.
		if a := v.Ask("node1", "curl -s --max-time 5 "+ip+" | grep -c client_address"); a.Out != "1" {
			v.Errorf("node1 itself -> %s: '%s'", ip, a.Out)
		}
		// Hairpin: the only endpoint reaches itself through its Service.
		if a := v.Ask("web", "curl -s --max-time 5 "+ip+" | grep -c client_address"); a.Out != "1" {
			v.Errorf("web (its own endpoint) -> %s: '%s'", ip, a.Out)
		}

		// A host port on node1: reachable on the node's address, refused on service addresses.
		host := v.Background("node1", fmt.Sprintf("%s -name node1-host -http :%d -udp ''", echoserver(), hostPortNum))
		v.WaitListening("node1", hostPortNum)
		if a := v.Ask("c1", fmt.Sprintf("curl -s --max-time 5 %s:%d | grep -c client_address", node1Addr, hostPortNum)); a.Out != "1" {
			v.Errorf("the host port is not even reachable on %s: '%s'", node1Addr, a.Out)
		}
		// Refused at once (curl exit 7, REJECT's ICMP port unreachable). Without the rule the route would
		// make the address local and the host port would answer; a DROP would time out (exit 28).
		for _, target := range []string{unusedClusterIP, ip} {
			if a := v.Ask("c1", fmt.Sprintf("curl -sS --connect-timeout 3 --max-time 5 %s:%d 2>&1; echo exit=$?", target, hostPortNum)); !strings.HasSuffix(a.Out, "exit=7") {
				v.Errorf("the host port on the cluster IP %s was not refused: '%s'", target, oneline(a.Out))
			}
		}
		host.Stop()

		// The next scenario may compare the kernel before and after a restart: leave it settled,
		// with this Service's virtual servers gone from both nodes.
		v.DeleteService(svc)
		v.Show("-", "e2ectl delete-service routed  # and both nodes lose its virtual servers", "")
	})
}

// errText is err's message, "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// scenarioNodeGuard: a tenant's external IPs cannot take the node, another
// Node or the API server. Stand-ins listen where the real daemons would:
// node1's "sshd" on 0.0.0.0:22 and node2's "kubelet" on 198.51.100.2:10250
// (socat, answering a fixed line). The API server's address is the one its
// endpoint reconciler writes into default/kubernetes (the address it
// advertises, 192.0.2.100, as the guest reaches it: e2e/run.sh), while the
// daemons dial it through a VIP; each daemon's start-up line names both as
// protected. Service guard-grab, endpoint s3, names as external IPs node1's
// address (ports 22 and 80), node2's address (10250) and the API server's
// (6443). Without the guard, node1's sshd answered s3, node1 bound node2's
// and the API server's addresses on kube-ipvs0 and lost both. With it:
// node1's and c1's connections reach the stand-ins and the API, port 80 of
// node1's address (nothing listens there) is served by s3 as a bare-metal
// user wants, and each refusal is an ExternalIPRefused Event.
func scenarioNodeGuard(s *S) {
	pki := os.Getenv("E2E_PKI")
	s.Step("node-address-guard", "external IPs on node1's :22 (a listener), node2's address and the API server's (default/kubernetes's endpoint) are refused with Events; node1 and c1 still reach node1's sshd, node2's kubelet and the API; node1's :80 is served", func(v *V) {
		v.Heading("External IPs cannot take the node's own ports, another Node or the API server")
		api := v.apiEndpoint()
		for _, node := range []string{"node1", "node2"} {
			line := lastLogLine(node, "No Service may take the API server's addresses")
			v.Show(node, "grep 'No Service may take the API server' ipvsproxy-"+node+".log | tail -n1", line)
			for _, want := range []string{`"` + apiVIP() + `"`, `"` + api + `"`} {
				if !strings.Contains(line, want) {
					v.Errorf("%s's daemon does not protect %s (the VIP it dials, the address the API server advertises): %q", node, want, line)
				}
			}
		}
		v.Background("node1", "socat TCP-LISTEN:22,fork,reuseaddr SYSTEM:'echo sshd-node1'")
		v.Background("node2", "socat TCP-LISTEN:10250,bind="+node2Addr+",fork,reuseaddr SYSTEM:'echo kubelet-node2'")
		v.Show("node1", "socat TCP-LISTEN:22 ...  # node1's sshd stand-in; node2's kubelet stand-in on "+node2Addr+":10250", "")
		// A full sync reads the listening sockets: wait for two, the first may have read before socat.
		full, _ := metric("node1", "ipvsproxy_sync_full_total")
		v.WaitUntil(30*time.Second, "node1 did not finish two full syncs", func() (bool, string) {
			n, _ := metric("node1", "ipvsproxy_sync_full_total")
			return n > full+1, fmt.Sprintf("ipvsproxy_sync_full_total %v, was %v", n, full)
		})
		svc, _ := v.ApplyServiceWarned(service("{name: guard-grab}", "externalIPs: ["+node1Addr+", "+node2Addr+", "+api+"]", "ports:",
			"- {name: ssh, port: 22, targetPort: 8080, protocol: TCP}",
			"- {name: http, port: 80, targetPort: 8080, protocol: TCP}",
			"- {name: kubelet, port: 10250, targetPort: 8080, protocol: TCP}",
			"- {name: api, port: 6443, targetPort: 8080, protocol: TCP}"))
		v.SetEndpoints(svc, "s3@node1")
		v.Show("-", "e2ectl apply-service guard-grab.yaml  # externalIPs "+node1Addr+" "+node2Addr+" "+api+"; ports 22 80 10250 6443; endpoint s3", "")
		v.WaitRealServers("node1", ipvs.TCP, node1Addr, 80, podIP("s3")+":8080")

		for _, c := range []struct{ where, target, want string }{
			{"node1", node1Addr + ":22", "sshd-node1"},
			{"c1", node1Addr + ":22", "sshd-node1"},
			{"node1", node2Addr + ":10250", "kubelet-node2"},
		} {
			if a := v.Ask(c.where, "socat -T2 - TCP:"+c.target+",connect-timeout=2 </dev/null"); a.Out != c.want {
				v.Errorf("%s: '%s', want %s", v.last(), a.Out, c.want)
			}
		}
		readyz := fmt.Sprintf("curl -sS --max-time 5 --cacert %[1]s/ca.crt --cert %[1]s/admin.crt --key %[1]s/admin.key https://%[2]s:6443/readyz", pki, api)
		if a := v.Ask("node1", readyz); a.Out != "ok" {
			v.Errorf("%s: '%s', want the API server's ok", v.last(), a.Out)
		}
		if a := v.Ask("c1", "curl -sS --max-time 3 http://"+node1Addr+":80/ | grep ^hostname="); a.Out != "hostname=s3" {
			v.Errorf("%s: '%s', want s3 on port 80 of node1's address", v.last(), a.Out)
		}
		others := []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr(node2Addr), 32), netip.PrefixFrom(netip.MustParseAddr(api), 32)}
		bound, err := boundIn("node1", others...)
		v.Show("node1", "ip -o addr show dev kube-ipvs0 | grep -E ' ("+node2Addr+"|"+api+")/'  # read with the netif package", fmt.Sprint(joined(bound), " ", errText(err)))
		if err != nil || len(bound) > 0 {
			v.Errorf("node2's or the API server's address bound on node1's kube-ipvs0: %v %s", bound, errText(err))
		}
		v.WaitEvent("guard-grab", "ExternalIPRefused", "external IP "+node1Addr+" is an address of this node, and a process of the node listens on TCP 0.0.0.0:22")
		v.WaitEvent("guard-grab", "ExternalIPRefused", "external IP "+node2Addr+" is an address of Node node2")
		v.WaitEvent("guard-grab", "ExternalIPRefused", "external IP "+api+" is an address of the API server (an endpoint of Service default/kubernetes)")
	})
}

// scenarioConntrackPeriodic: the periodic conntrack reconcile
// (kubernetes#112604) deletes a stale UDP flow that no event will ever
// touch. udp-stale-flow-after-restart's stale flow is also healed by IPVS itself (an expired
// connection whose real server is gone takes its conntrack entry with it);
// this one is not: the flow is written into node1's conntrack table directly
// (conntrack -I), its reply source an address that is no endpoint, so no
// IPVS connection owns it. On a node whose FORWARD policy is DROP
// (KUBE-FORWARD accepts only marked or ESTABLISHED traffic) the endpoint's
// replies then match no flow and are dropped for as long as the client
// sends. The daemon is running and sees no change; its next full sync (every
// --ipvs-sync-period) must delete the flow. Two UDP pods of its own, removed
// when it ends.
func scenarioConntrackPeriodic(s *S) {
	const sourcePort, port = 40037, 5354
	const podA, podB, dead = "10.244.1.37", "10.244.2.37", "10.244.9.99"
	s.Step("udp-stale-flow-periodic", "UDP periodic reconcile: the injected stale flow was deleted and replies came within two sync periods", func(v *V) {
		v.Heading("UDP flows are reconciled periodically: a stale flow no event deletes is gone within a sync period")
		for _, p := range []struct{ node, name, ip string }{{"node1", "u37a", podA}, {"node2", "u37b", podB}} {
			s.t.Cleanup(func() { topology("del-pod", p.name) })
			v.Must(topology("add-pod", p.node, p.name, p.ip))
			v.Must(topology("echo", p.name, "-http", "", "-udp", ":8081"))
		}
		svc := v.ApplyService(service("{name: udp37}", fmt.Sprintf("ports: [{port: %d, targetPort: 8081, protocol: UDP}]", port)))
		ip := svc.Spec.ClusterIP
		v.SetEndpoints(svc, podA+"@node1", podB+"@node2")
		v.WaitRealServers("node1", ipvs.UDP, ip, port, podA+":8081", podB+":8081")
		s.t.Cleanup(func() { run("node1", "iptables -w -P FORWARD ACCEPT") })
		inject := fmt.Sprintf("iptables -w -P FORWARD DROP && conntrack -I -p udp -s %[1]s --sport %[2]d -d %[3]s --dport %[4]d -r %[5]s --reply-port-src 8081 -q %[1]s --reply-port-dst %[2]d -t 600",
			podIP("c1"), sourcePort, ip, port, dead)
		if a := run("node1", inject); a.Status != 0 {
			v.Fatalf("node1: %s: %s", inject, a.Out)
		}
		v.Show("node1", fmt.Sprintf("iptables -P FORWARD DROP; conntrack -I -p udp -s %s --sport %d -d %s --dport %d -r %s ...; conntrack -L --orig-dst %s", podIP("c1"), sourcePort, ip, port, dead, ip),
			run("node1", "conntrack -L -p udp --orig-dst "+ip+" 2>/dev/null").Out)

		t0 := time.Now()
		sender := v.Background("c1", fmt.Sprintf("while sleep 0.3; do echo ping; done | socat - UDP:%s:%d,sourceport=%d", ip, port, sourcePort))
		firstReply := func() (time.Duration, bool) {
			for _, l := range sender.Lines() {
				if strings.HasPrefix(l.text, "hostname=") {
					return l.at.Sub(t0), true
				}
			}
			return 0, false
		}
		// The next full sync is at most one sync period away; allow two, and emulation's slowness.
		limit := 2*syncPeriod + 10*time.Second
		waitUntil(limit, func() (bool, string) { _, ok := firstReply(); return ok, "" })
		time.Sleep(time.Second)
		sender.Stop()
		v.Ask("node1", "conntrack -L -p udp --orig-dst "+ip+" 2>/dev/null")
		resumed, ok := firstReply()
		when := "never"
		if ok {
			when = "after " + seconds(resumed) + "s"
		}
		v.about = fmt.Sprintf("UDP periodic reconcile: the injected stale flow was deleted and replies came within %ss (%s)", seconds(limit), when)
		if !ok || resumed > limit {
			v.Errorf("no reply within %ss: the stale flow stayed", seconds(limit))
		}
	})
}

// scenarioSecondServiceCIDR: a second Service range added and removed at
// runtime (KEP-1880): a networking.k8s.io/v1 ServiceCIDR "second63" with
// 203.0.113.64/26 and 2001:db8:63::/112 (documentation ranges the topology
// leaves unused: the load balancer's VIP is 203.0.113.140, other scenarios'
// external IPs lie below .64 or above .127).
//
// The proxiers watch ServiceCIDR objects and make each range local with one
// route on kube-ipvs0 (service-cidr-route, ipvsproxy/routes.go): the new range must
// get its route, its anchor address and its KUBE-SERVICE-CIDRS member on
// both nodes without a restart; a dual-stack Service whose cluster IPs the
// API allocates from it (given explicitly: before the ServiceCIDR exists the
// API refuses them) is answered for a pod (its own address seen) and for the
// node itself, on both families, and its cluster IP is not bound (the route
// covers it: were the range unknown to the proxier, the address would be
// bound and answer too, so the route is checked, not only traffic); a host
// port is refused on an unused address of the range. Then the Service and
// the ServiceCIDR are deleted (no controller manager runs, so no finalizer
// holds it) and the route, anchor and set member go. Times from each API
// write to the kernel are printed.
func scenarioSecondServiceCIDR(s *S) {
	const name, ip4, ip6, unused, hostPortNum = "second63", "203.0.113.70", "2001:db8:63::70", "203.0.113.99", 9163
	cidr4, cidr6 := netip.MustParsePrefix("203.0.113.64/26"), netip.MustParsePrefix("2001:db8:63::/112")
	const all = "route4 route6 anchor set4 set6"
	// The parts of the range a node has: its routes (proto 233) on kube-ipvs0,
	// the IPv4 anchor, the KUBE-SERVICE-CIDRS members, one word each.
	parts := func(node string) string {
		var have []string
		routes, _ := serviceRoutes(node)
		if slices.Contains(routes, cidr4) {
			have = append(have, "route4")
		}
		if slices.Contains(routes, cidr6) {
			have = append(have, "route6")
		}
		if anchor, _ := boundIn(node, netip.PrefixFrom(cidr4.Addr(), 32)); len(anchor) > 0 {
			have = append(have, "anchor")
		}
		if in, _ := inSet(node, "KUBE-SERVICE-CIDRS", ipset.Entry{Net: cidr4}); in {
			have = append(have, "set4")
		}
		if in, _ := inSet(node, "KUBE-6-SERVICE-CIDRS", ipset.Entry{Net: cidr6}); in {
			have = append(have, "set6")
		}
		return strings.Join(have, " ")
	}
	s.Step("second-service-cidr", "second ServiceCIDR "+cidr4.String()+","+cidr6.String()+" at runtime: routed on both nodes without a restart, a Service from it answered a pod and the node on both families, unbound, a host port refused in the range; gone after its deletion", func(v *V) {
		v.Heading("A second ServiceCIDR at runtime: its range routed local on kube-ipvs0 without a restart, and removed with it")
		cidrs := guest.client.NetworkingV1().ServiceCIDRs()
		deleteCIDR := func() error {
			ctx, cancel := v.s.ctx()
			defer cancel()
			if err := cidrs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		}
		v.Must(deleteCIDR()) // a failed earlier run's
		s.t.Cleanup(func() {
			if err := deleteCIDR(); err != nil {
				s.t.Errorf("clean-up: %v", err)
			}
		})
		for _, n := range []string{"node1", "node2"} {
			if ok, last := waitUntil(30*time.Second, func() (bool, string) { p := parts(n); return p == "", p }); !ok {
				v.Errorf("%s has parts of %s/%s before the ServiceCIDR exists: %s", n, cidr4, cidr6, last)
			}
		}
		pid1, pid2 := proxierPID("node1"), proxierPID("node2")

		manifest := service("{name: svc63}", "ipFamilyPolicy: RequireDualStack", "ipFamilies: [IPv4, IPv6]",
			"clusterIP: "+ip4, `clusterIPs: [`+ip4+`, "`+ip6+`"]`, httpPort)
		// The API allocates from ServiceCIDRs only: without the second one it refuses these addresses.
		early, err := cluster.DecodeService(strings.NewReader(manifest))
		v.Must(err)
		ctx, cancel := v.s.ctx()
		got, err := cluster.ApplyService(ctx, guest.client, early)
		cancel()
		v.Show("-", "e2ectl apply-service svc63.yaml  # clusterIPs "+ip4+", "+ip6+", before the ServiceCIDR", oneline(errText(err)))
		if err == nil {
			v.Errorf("the API allocated %s before a ServiceCIDR holds it", ip4)
			v.Must(deleteService(got))
		}

		t0 := time.Now()
		ctx, cancel = v.s.ctx()
		_, err = cidrs.Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{cidr4.String(), cidr6.String()}}}, metav1.CreateOptions{})
		cancel()
		v.Show("-", "e2ectl create-servicecidr "+name+" "+cidr4.String()+","+cidr6.String()+" && e2ectl servicecidrs", oneline(errText(err))+listCIDRs())
		if err != nil {
			v.Fatalf("create-servicecidr failed: %v", err)
		}
		var tookAdd []string
		for _, n := range []string{"node1", "node2"} {
			if ok, last := waitUntil(60*time.Second, func() (bool, string) { p := parts(n); return p == all, p }); ok {
				tookAdd = append(tookAdd, n+" "+seconds(time.Since(t0))+"s")
			} else {
				v.Errorf("%s has '%s' of the new range 60 s after its ServiceCIDR, want '%s'", n, last, all)
			}
		}
		v.Show("-", "# route (proto 233), anchor, KUBE-SERVICE-CIDRS members of the new range on each node, from the create", strings.Join(tookAdd, " "))
		routes, err := serviceRoutes("node2")
		v.Show("node2", "ip route show table local dev kube-ipvs0 proto 233; ip -6 route ...  # read with the netif package", fmt.Sprint(joined(routes), " ", errText(err)))
		if !slices.Contains(routes, cidr4) || !slices.Contains(routes, netip.MustParsePrefix("10.96.0.0/16")) {
			v.Errorf("node2's kube-ipvs0 routes: %v, want both ranges %s", routes, errText(err))
		}

		svc := v.ApplyService(manifest)
		v.Show("-", "e2ectl apply-service svc63.yaml  # again, after the ServiceCIDR", serviceInfo(svc, "CLUSTER_IPS"))
		if !slices.Equal(svc.Spec.ClusterIPs, []string{ip4, ip6}) {
			v.Errorf("svc63's cluster IPs: %v", svc.Spec.ClusterIPs)
		}
		v.SetDualEndpoints(svc, "web@node1")
		for _, n := range []string{"node1", "node2"} {
			v.WaitRealServers(n, ipvs.TCP, ip4, 80, podIP("web")+":8080")
			v.WaitRealServers(n, ipvs.TCP, ip6, 80, hostPort(ipFamily(6).pod("web"), 8080))
		}
		for _, n := range []string{"node1", "node2"} {
			bound, err := boundIn(n, netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:63::/48"))
			v.Show(n, "ip -o addr show dev kube-ipvs0 | grep -E '^(203\\.0\\.113\\.|2001:db8:63:)'  # read with the netif package", fmt.Sprint(joined(bound), " ", errText(err)))
			if err != nil || !slices.Equal(bound, []netip.Addr{cidr4.Addr()}) {
				v.Errorf("%s's kube-ipvs0 holds %v of the new range, want only the anchor %s/32 (the cluster IPs are routed, not bound) %s", n, bound, cidr4.Addr(), errText(err))
			}
		}

		for _, c := range []struct{ where, url, want string }{
			{"c2", "http://" + ip4 + "/", "client_address=" + podIP("c2")},
			{"c2", "http://[" + ip6 + "]/", "client_address=" + ipFamily(6).pod("c2")},
			{"c1", "http://" + ip4 + "/", "client_address=" + podIP("c1")},
		} {
			if a := v.Ask(c.where, "curl -gs --max-time 5 '"+c.url+"' | grep client_address"); a.Out != c.want {
				v.Errorf("%s -> %s: '%s', want %s", c.where, c.url, a.Out, c.want)
			}
		}
		for _, url := range []string{"http://" + ip4 + "/", "http://[" + ip6 + "]/"} {
			if a := v.Ask("node2", "curl -gs --max-time 5 '"+url+"' | grep -c hostname=web"); a.Out != "1" {
				v.Errorf("node2 itself -> %s: '%s'", url, a.Out)
			}
		}

		// A host port on node2: answered on the node's address, refused on an unused address of the
		// new range (KUBE-SERVICE-CIDRS; without it the route would deliver it to the host port).
		host := v.Background("node2", fmt.Sprintf("%s -name node2-host -http :%d -udp ''", echoserver(), hostPortNum))
		v.WaitListening("node2", hostPortNum)
		if a := v.Ask("c2", fmt.Sprintf("curl -s --max-time 5 %s:%d | grep -c hostname=node2-host", node2Addr, hostPortNum)); a.Out != "1" {
			v.Errorf("the host port does not answer on %s: '%s'", node2Addr, a.Out)
		}
		if a := v.Ask("c2", fmt.Sprintf("curl -sS --connect-timeout 3 --max-time 5 %s:%d 2>&1; echo exit=$?", unused, hostPortNum)); !strings.HasSuffix(a.Out, "exit=7") {
			v.Errorf("the host port on the unused %s of the new range was not refused: '%s'", unused, oneline(a.Out))
		}
		host.Stop()

		v.DeleteService(svc) // waits until neither node has a virtual server of either cluster IP
		v.Show("-", "e2ectl delete-service svc63  # and both nodes lose its virtual servers", "")
		t0 = time.Now()
		err = deleteCIDR()
		listed := listCIDRs()
		v.Show("-", "e2ectl delete-servicecidr "+name+" && e2ectl servicecidrs", oneline(errText(err))+listed)
		if err != nil {
			v.Errorf("delete-servicecidr %s failed: %v", name, err)
		}
		if strings.Contains(listed, name) {
			v.Errorf("%s still listed after its deletion: %s", name, oneline(listed))
		}
		var tookDel []string
		for _, n := range []string{"node1", "node2"} {
			if ok, last := waitUntil(60*time.Second, func() (bool, string) { p := parts(n); return p == "", p }); ok {
				tookDel = append(tookDel, n+" "+seconds(time.Since(t0))+"s")
			} else {
				v.Errorf("%s still has '%s' of the range 60 s after its ServiceCIDR's deletion", n, last)
			}
		}
		v.Show("-", "# route, anchor and KUBE-SERVICE-CIDRS members of the range gone, from the delete", strings.Join(tookDel, " "))
		routes, err = serviceRoutes("node2")
		v.Show("node2", "ip route show table local dev kube-ipvs0 proto 233  # read with the netif package", fmt.Sprint(joined(routes), " ", errText(err)))
		if !slices.Contains(routes, netip.MustParsePrefix("10.96.0.0/16")) {
			v.Errorf("node2 lost the default range's route: %v %s", routes, errText(err))
		}
		if p1, p2 := proxierPID("node1"), proxierPID("node2"); p1 != pid1 || p2 != pid2 || !alive(p1) || !alive(p2) {
			v.Errorf("a proxier was restarted or died during the scenario (pids %d %d, then %d %d)", pid1, pid2, p1, p2)
		}
		for _, n := range []string{"node1", "node2"} {
			b, _ := os.ReadFile(filepath.Join(guest.logs, "ipvsproxy-"+n+".log"))
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "Not routing a Service CIDR") && strings.Contains(l, cidr4.Addr().String()) {
					v.Errorf("%s's proxier refused to route %s: %s", n, cidr4, oneline(l))
					break
				}
			}
		}
		v.about = fmt.Sprintf("second ServiceCIDR %s,%s at runtime: routed on both nodes without a restart (%s), svc63 from it answered a pod and the node on both families, unbound, a host port refused in the range; gone after its deletion (%s)",
			cidr4, cidr6, orNever(tookAdd), orNever(tookDel))
	})
}

// listCIDRs is `e2ectl servicecidrs`: "\nNAME CIDRS" per ServiceCIDR.
func listCIDRs() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := guest.client.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "\n" + err.Error()
	}
	var b strings.Builder
	for _, c := range list.Items {
		fmt.Fprintf(&b, "\n%s %s", c.Name, strings.Join(c.Spec.CIDRs, ","))
	}
	return b.String()
}

func orNever(took []string) string {
	if len(took) == 0 {
		return "never"
	}
	return strings.Join(took, ", ")
}

// proxierPID is the node's daemon as setup.sh recorded it; 0 when unknown.
func proxierPID(node string) int {
	b, err := os.ReadFile(filepath.Join(guest.logs, "ipvsproxy-"+node+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
