//go:build e2e

package suite

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The address guard with real traffic: no address a Service names, in any
// field, may cut the nodes off each other or off the API server. The
// daemons dial the API server through a VIP (apiVIP, DNATed in the VM's
// root namespace, e2e/topology/topology.sh) that is no endpoint of
// default/kubernetes, as an HA cluster's nodes dial a load balancer.

// apiVIP is the address the daemons dial the API server at.
func apiVIP() string { return os.Getenv("E2E_API_VIP") }

// apiEndpoint waits until default/kubernetes's EndpointSlice names the API
// server (its lease reconciler writes the address it advertises) and
// returns that address.
func (v *V) apiEndpoint() string {
	var addr string
	v.WaitUntil(60*time.Second, "default/kubernetes's EndpointSlice names no API server", func() (bool, string) {
		ctx, cancel := v.s.ctx()
		defer cancel()
		s, err := guest.client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range s.Endpoints {
			if len(e.Addresses) > 0 {
				addr = e.Addresses[0]
				return true, ""
			}
		}
		return false, "no endpoint"
	})
	v.Show("-", "kubectl get endpointslice -n default kubernetes -o jsonpath='{.endpoints[*].addresses}'  # written by the API server", addr)
	return addr
}

// lastLogLine is the last line of the node's daemon log holding text.
func lastLogLine(node, text string) string {
	lines := strings.Split(readFile(proxierLog(node)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], text) {
			return lines[i]
		}
	}
	return ""
}

// readyzThroughVIP asks the API server's /readyz through the VIP from
// where, as a kubelet dialling it would; "ok" when it answers.
func readyzThroughVIP(v *V, where string) Answer {
	pki := os.Getenv("E2E_PKI")
	return v.Ask(where, fmt.Sprintf("curl -sS --max-time 5 --cacert %[1]s/ca.crt --cert %[1]s/admin.crt --key %[1]s/admin.key https://%[2]s:6443/readyz", pki, apiVIP()))
}

// hostPrefix is the one-address prefix of addr.
func hostPrefix(addr string) netip.Prefix {
	a := netip.MustParseAddr(addr)
	return netip.PrefixFrom(a, a.BitLen())
}

// servedOn lists the node's virtual servers whose address is one of addrs.
func servedOn(node string, addrs ...string) ([]string, error) {
	vss, err := virtualServers(node)
	var out []string
	for _, vs := range vss {
		if slices.Contains(addrs, vs.Address.String()) {
			out = append(out, vs.VirtualServerKey.String())
		}
	}
	return out, err
}

// scenarioServiceLBNodeAddresses: a LoadBalancer Service as k3s's
// ServiceLB publishes it, every node's address (IPv4 and IPv6) as an
// ingress IP, port 8080. Without the guard each node bound the other's
// addresses on kube-ipvs0: node1 → node2's sshd was refused both ways, and
// the Service answered on one node's address only. With it: each node
// serves its own addresses without binding them, refuses the other's with a
// LoadBalancerIPRefused Event, the nodes reach each other's sshd stand-ins
// and the API through its VIP, and the client outside is answered through
// every node address, both families.
func scenarioServiceLBNodeAddresses(s *S) {
	s.Step("servicelb-node-addresses", "ServiceLB-shaped LoadBalancer (ingress = both nodes' IPv4 and IPv6 addresses, :8080): each node serves its own addresses unbound and refuses the other's with an Event; node1 and node2 still reach each other's sshd and the API through its VIP; the client is answered through every node address, both families", func(v *V) {
		v.Heading("A ServiceLB-shaped LoadBalancer: each node serves its own address, none takes another's")
		v.checkServiceLBNodeAddresses("servicelb")
	})
}

// checkServiceLBNodeAddresses is servicelb-node-addresses's check, on a
// Service of this name.
func (v *V) checkServiceLBNodeAddresses(name string) {
	const port = 8080
	nodes := []string{"node1", "node2"}
	other := map[string]string{"node1": "node2", "node2": "node1"}
	for _, n := range nodes {
		v.Background(n, "socat TCP-LISTEN:22,fork,reuseaddr SYSTEM:'echo sshd-"+n+"'")
		v.Background(n, "socat TCP6-LISTEN:22,ipv6only=1,fork,reuseaddr SYSTEM:'echo sshd-"+n+"'")
		v.WaitListening(n, 22)
	}
	v.Show("-", "socat TCP-LISTEN:22 ... and TCP6-LISTEN:22 ...  # an sshd stand-in on each node, both families", "")
	svc := v.ApplyService(service("{name: "+name+"}", "type: LoadBalancer", "ipFamilyPolicy: RequireDualStack",
		fmt.Sprintf("ports: [{port: %d, targetPort: 8080, protocol: TCP}]", port)))
	v.SetEndpoints(svc, "web@node1", "s2@node2", v6.pod("web")+"@node1", v6.pod("s2")+"@node2")
	ingress := []string{node1Addr, node2Addr, v6.node("node1"), v6.node("node2")}
	v.SetIngresses(svc, "", ingress...)
	v.Show("-", "e2ectl apply-service "+name+".yaml  # LoadBalancer, RequireDualStack, :8080, endpoints web and s2; ingress "+strings.Join(ingress, " "), "")
	for _, n := range nodes {
		for _, f := range families {
			v.WaitRealServers(n, ipvs.TCP, f.node(n), port, hostPort(f.pod("web"), 8080), hostPort(f.pod("s2"), 8080))
		}
	}
	for _, n := range nodes {
		theirs := []string{ipFamily(4).node(other[n]), v6.node(other[n])}
		for _, a := range theirs {
			v.WaitEvent(name, "LoadBalancerIPRefused", "load balancer ingress IP "+a+" is an address of Node "+other[n])
		}
		bound, err := boundIn(n, hostPrefix(node1Addr), hostPrefix(node2Addr), hostPrefix(v6.node("node1")), hostPrefix(v6.node("node2")))
		v.Show(n, "ip -o addr show dev kube-ipvs0 | grep -E ' (198.51.100.[12]|2001:db8:1::[12])/'  # read with the netif package", fmt.Sprint(joined(bound), " ", errText(err)))
		if err != nil || len(bound) > 0 {
			v.Errorf("%s's kube-ipvs0 holds node addresses %v %s", n, bound, errText(err))
		}
		served, err := servedOn(n, theirs...)
		v.Show(n, "ipvsadm -Ln | grep -E '"+strings.Join(theirs, "|")+"'  # read with the ipvs package", fmt.Sprint(strings.Join(served, " "), " ", errText(err)))
		if err != nil || len(served) > 0 {
			v.Errorf("%s has virtual servers on %s's addresses: %v %s", n, other[n], served, errText(err))
		}
	}
	for _, n := range nodes {
		for _, f := range families {
			if a := v.Ask(n, "socat -T2 - TCP:"+hostPort(f.node(other[n]), 22)+",connect-timeout=2 </dev/null"); a.Out != "sshd-"+other[n] {
				v.Errorf("%s: '%s', want %s's sshd", v.last(), a.Out, other[n])
			}
		}
		if a := readyzThroughVIP(v, n); a.Out != "ok" {
			v.Errorf("%s: '%s', want the API server's ok through its VIP", v.last(), a.Out)
		}
	}
	// Traffic through each node's own address, from outside and from a pod of the other node.
	for _, n := range nodes {
		for _, f := range families {
			for _, from := range []string{"client", map[string]string{"node1": "c2", "node2": "c1"}[n]} {
				v.ExpectServed(v.Curl(from, httpURL(f.node(n), port)), "hostname=")
			}
		}
	}
}

// scenarioAPIVIPClaim: a tenant claims the address the nodes dial the API
// server at (a VIP, no endpoint of default/kubernetes), port 6443, as an
// external IP and as a load balancer ingress IP. Without the guard, 10 s
// later both nodes' kube-ipvs0 held the VIP, /readyz through it failed to
// connect, and a Service made afterwards reached neither node within 30 s
// (the daemons had lost the API). With it: both claims refused with Events,
// no node binds or serves the VIP, /readyz through it answers from both
// nodes after two full syncs of each, and a Service created afterwards is
// programmed on both nodes and answers.
func scenarioAPIVIPClaim(s *S) {
	s.Step("api-vip-claim-refused", "a tenant Service claiming the API server's VIP (externalIPs and a load balancer ingress, :6443) is refused with Events; neither node binds or serves it; both nodes reach /readyz through the VIP; a Service created afterwards reaches both kernels and answers", func(v *V) {
		v.Heading("The API server's VIP, which the nodes dial, cannot be claimed by a Service")
		vip := apiVIP()
		if vip == "" {
			v.Fatalf("E2E_API_VIP is not set: the daemons dial no VIP (e2e/run.sh)")
		}
		full := map[string]float64{}
		for _, n := range []string{"node1", "node2"} {
			full[n], _ = metric(n, "ipvsproxy_sync_full_total")
		}
		grab := v.ApplyService(service("{name: api-grab}", "externalIPs: ["+vip+"]", "ports: [{port: 6443, targetPort: 8080, protocol: TCP}]"))
		v.SetEndpoints(grab, "s3@node1")
		lb := v.ApplyService(service("{name: api-grab-lb}", "type: LoadBalancer", "ports: [{port: 6443, targetPort: 8080, protocol: TCP}]"))
		v.SetEndpoints(lb, "s3@node1")
		v.SetLoadBalancerIngress(lb, vip)
		v.Show("-", "e2ectl apply-service api-grab.yaml api-grab-lb.yaml  # externalIPs ["+vip+"] and ingress ["+vip+"], :6443, endpoint s3", "")
		for _, n := range []string{"node1", "node2"} {
			v.WaitRealServers(n, ipvs.TCP, grab.Spec.ClusterIP, 6443, podIP("s3")+":8080")
			v.WaitRealServers(n, ipvs.TCP, lb.Spec.ClusterIP, 6443, podIP("s3")+":8080")
		}
		dials := "is an address of the API server (the host this node's ipvsproxy dials, https://" + vip + ":6443)"
		v.WaitEvent("api-grab", "ExternalIPRefused", "external IP "+vip+" "+dials)
		v.WaitEvent("api-grab-lb", "LoadBalancerIPRefused", "load balancer ingress IP "+vip+" "+dials)
		// Two full syncs of each node after the claims: a bound VIP would be in place by then.
		for _, n := range []string{"node1", "node2"} {
			v.WaitUntil(60*time.Second, n+" did not finish two full syncs", func() (bool, string) {
				now, _ := metric(n, "ipvsproxy_sync_full_total")
				return now > full[n]+1, fmt.Sprintf("ipvsproxy_sync_full_total %v, was %v", now, full[n])
			})
			bound, err := boundIn(n, hostPrefix(vip))
			served, err2 := servedOn(n, vip)
			v.Show(n, "ip -o addr show dev kube-ipvs0 | grep "+vip+"; ipvsadm -Ln | grep "+vip+"  # netif and ipvs packages", fmt.Sprint(joined(bound), " ", strings.Join(served, " "), " ", errText(err), errText(err2)))
			if err != nil || err2 != nil || len(bound) > 0 || len(served) > 0 {
				v.Errorf("%s binds %v or serves %v the API server's VIP %s %s", n, bound, served, errText(err), errText(err2))
			}
			if a := readyzThroughVIP(v, n); a.Out != "ok" {
				v.Errorf("%s: '%s', want the API server's ok through its VIP", v.last(), a.Out)
			}
		}
		after := v.ApplyService(service("{name: after-grab}", httpPort))
		v.SetEndpoints(after, "web@node1")
		v.Show("-", "e2ectl apply-service after-grab.yaml  # created after the claims, endpoint web", "")
		start := time.Now()
		for _, n := range []string{"node1", "node2"} {
			if ok, last := waitUntil(30*time.Second, hasRealServers(n, ipvs.TCP, after.Spec.ClusterIP, 80, []string{podIP("web") + ":8080"})); !ok {
				v.Errorf("%s: the Service created after the claims is not programmed within 30 s: %s", n, last)
			}
		}
		v.Show("-", "# both nodes programmed it within "+seconds(time.Since(start))+" s", "")
		v.ExpectServed(v.Curl("c2", "http://"+after.Spec.ClusterIP+"/"), "hostname=web")
	})
}
