//go:build e2e

package suite

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
)

// Traffic corners where kube-proxy's IPVS mode went wrong (node addresses as
// Service addresses, source ranges, health-check node ports), each on a
// Service of its own with web on node1 as its endpoint.

// Curl fetches url from where with a short timeout (-g: an IPv6 address in
// brackets is no glob). Its answer is the body's hostname= and
// client_address= lines, each followed by a space, or curl's message; its
// status is curl's (28: timed out, no reply; 7: refused or unreachable).
func (v *V) Curl(where, url string) Answer {
	return v.Ask(where, "curl -gsS --max-time 3 "+url+" | grep -E '^(hostname|client_address)=' | tr '\\n' ' '; exit ${PIPESTATUS[0]}")
}

// ExpectServed fails the step unless a answered and holds every want.
func (v *V) ExpectServed(a Answer, want ...string) {
	if a.Status != 0 {
		v.Errorf("%s: curl exit %d, want an answer", v.last(), a.Status)
		return
	}
	for _, w := range want {
		if !strings.Contains(a.Out, w) {
			v.Errorf("%s: want %s", v.last(), w)
		}
	}
}

// ExpectSilence fails the step unless curl timed out: no reply, no RST, no ICMP.
func (v *V) ExpectSilence(a Answer) {
	if a.Status != 28 {
		v.Errorf("%s: curl exit %d, want 28 (a silent drop)", v.last(), a.Status)
	}
}

// last is the last command recorded, with its answer.
func (v *V) last() string {
	if len(v.asked) == 0 {
		return ""
	}
	return v.asked[len(v.asked)-1]
}

// LoadBalance makes the load balancer forward VIP:port to both nodes (with
// hc, weighted by each node's health check) until the scenario ends.
func (v *V) LoadBalance(port int, hc string) { v.loadBalance(4, port, hc) }

// LoadBalance6 is LoadBalance for VIP6 to the nodes' IPv6 addresses.
func (v *V) LoadBalance6(port int, hc string) { v.loadBalance(6, port, hc) }

func (v *V) loadBalance(f ipFamily, port int, hc string) {
	add, del := "lb-add", "lb-del"
	if f == 6 {
		add, del = "lb6-add", "lb6-del"
	}
	args := []string{add, "tcp", strconv.Itoa(port)}
	if hc != "" {
		args = append(args, hc)
	}
	v.Must(topology(args...))
	t := v.s.t
	t.Cleanup(func() {
		if err := topology(del, "tcp", strconv.Itoa(port)); err != nil {
			t.Errorf("clean-up: %v", err)
		}
	})
}

// metric is a metric's value on the node's /metrics, summed over its label
// sets; ok is false when the node does not export it.
func metric(node, name string) (float64, bool) {
	a := run(node, "curl -s --max-time 5 http://127.0.0.1:10249/metrics")
	var sum float64
	found := false
	for _, l := range strings.Split(a.Out, "\n") {
		key, val, _ := strings.Cut(l, " ")
		if key == name || strings.HasPrefix(key, name+"{") {
			f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err == nil {
				sum, found = sum+f, true
			}
		}
	}
	return sum, found
}

// corner writes a Service from manifest with web on node1 as its endpoint.
func (v *V) corner(name, manifest string) *v1.Service {
	svc := v.ApplyService(manifest)
	v.Show("-", "e2ectl apply-service "+name+".yaml", serviceInfo(svc, "TYPE", "CLUSTER_IP", "EXTERNAL_TRAFFIC_POLICY", "HEALTH_CHECK_NODE_PORT"))
	v.SetEndpoints(svc, "web@node1")
	v.Show("-", "e2ectl set-endpoints "+name+" "+podIP("web")+"@node1", "")
	return svc
}

// scenarioNodeAddress: a Service address the node already has (k3s
// ServiceLB, kube-vip and bare metal give a node's own address as external
// or LB IP). node2 gets a second address on eth0, as kube-vip would, and the
// client routes it to node2. A Service with that external IP answers on it,
// yet the address is never bound on node2's kube-ipvs0 nor put in
// KUBE-IPVS-IPS, so node2's other ports on it (the proxier's /healthz on
// 10256, as ssh or the kubelet would be) still answer instead of being
// rejected by KUBE-IPVS-FILTER (kubernetes#115019, k3s#7183). Not node2's
// primary address: node1 would bind that one and answer ARP for it.
func scenarioNodeAddress(s *S) {
	const nodeVIP = "203.0.113.152"
	s.Step("external-ip-held-by-node", "external IP "+nodeVIP+" held by node2's eth0: the Service answers, node2's :10256 on it answers 200, the address is not on kube-ipvs0 nor in KUBE-IPVS-IPS", func(v *V) {
		v.Heading("An external IP that node2 already holds: served, and node2's own ports on it still answer")
		full, _ := metric("node2", "ipvsproxy_sync_full_total")
		if a := run("-", "ip -n node2 addr add "+nodeVIP+"/32 dev eth0 && ip -n client route replace "+nodeVIP+"/32 via "+node2Addr); a.Status != 0 {
			v.Fatalf("add %s to node2: %s", nodeVIP, a.Out)
		}
		s.t.Cleanup(func() {
			run("-", "ip -n client route del "+nodeVIP+"/32; ip -n node2 addr del "+nodeVIP+"/32 dev eth0")
		})
		v.Show("node2", "ip addr add "+nodeVIP+"/32 dev eth0  # as kube-vip would", "")
		// The daemon learns the node's addresses on a full sync (at most
		// --ipvs-sync-period). Wait for two: the first to end may have read
		// the addresses before the one above was added.
		v.WaitUntil(30*time.Second, "node2 did not finish two full syncs", func() (bool, string) {
			n, _ := metric("node2", "ipvsproxy_sync_full_total")
			return n > full+1, fmt.Sprintf("ipvsproxy_sync_full_total %v, was %v", n, full)
		})
		svc := v.corner("corner-nodeaddr", service("{name: corner-nodeaddr}", "type: ClusterIP", "externalIPs: ["+nodeVIP+"]",
			"ports: [{port: 8012, targetPort: 8080, protocol: TCP}]"))
		v.WaitRealServers("node2", ipvs.TCP, nodeVIP, 8012, podIP("web")+":8080")
		v.ExpectServed(v.Curl("client", "http://"+nodeVIP+":8012/"), "hostname=web")
		healthz := "curl -sS --max-time 3 -o /dev/null -w '%{http_code}' http://" + nodeVIP + ":10256/healthz"
		if a := v.Ask("client", healthz); a.Status != 0 || a.Out != "200" {
			v.Errorf("%s: want 200 from node2's own /healthz", v.last())
		}
		bound, inIPs, err := boundOrListed("node2", nodeVIP)
		v.Must(err)
		v.Show("node2", "ip addr show dev kube-ipvs0; ipset test KUBE-IPVS-IPS "+nodeVIP+"  # read with the netif and ipset packages",
			fmt.Sprintf("on kube-ipvs0: %v; in KUBE-IPVS-IPS: %v", bound, inIPs))
		if bound || inIPs {
			v.Errorf("want %s neither on kube-ipvs0 (%v) nor in KUBE-IPVS-IPS (%v)", nodeVIP, bound, inIPs)
		}
		v.DeleteService(svc)
		v.Show("-", "e2ectl delete-service corner-nodeaddr", "")
		if a := v.Ask("client", healthz); a.Status != 0 || a.Out != "200" {
			v.Errorf("%s: after the Service is gone, want 200", v.last())
		}
	})
}

// boundOrListed: whether addr is on the node's kube-ipvs0 and whether it is
// in KUBE-IPVS-IPS, read with the project's netif and ipset packages.
func boundOrListed(node, addr string) (bound, listed bool, err error) {
	a := netip.MustParseAddr(addr)
	err = inNamespace(node, func(h netns.NsHandle) error {
		k, err := netif.NewInNamespace("kube-ipvs0", h)
		if err != nil {
			return err
		}
		// Close is not part of Interface (the proxier keeps its handle for life).
		if c, ok := k.(interface{ Close() error }); ok {
			defer c.Close()
		}
		addrs, err := k.DummyAddresses()
		if err != nil {
			return err
		}
		bound = slices.Contains(addrs, a)
		return nil
	})
	if err != nil {
		return false, false, err
	}
	listed, err = inSet(node, "KUBE-IPVS-IPS", ipset.Entry{IP: a})
	return bound, listed, err
}

// scenarioSourceRangesAll: loadBalancerSourceRanges [0.0.0.0/0] means
// everyone, as in kube-proxy. (The kernel refuses a /0 member of
// KUBE-LOAD-BALANCER-SRC-CIDR; when that was written, every sync failed and
// KUBE-IPVS-FILTER dropped all traffic to the LB.)
func scenarioSourceRangesAll(s *S) {
	s.Step("source-ranges-open", "loadBalancerSourceRanges [0.0.0.0/0]: the client reaches "+vip+":8013 through both nodes; no failed kernel write", func(v *V) {
		v.Heading("loadBalancerSourceRanges 0.0.0.0/0: everyone reaches the LB, syncs do not fail")
		f1, _ := metric("node1", "ipvsproxy_kernel_write_failures_total")
		f2, _ := metric("node2", "ipvsproxy_kernel_write_failures_total")
		svc := v.corner("corner-allow-all", service("{name: corner-allow-all}", "type: LoadBalancer", "loadBalancerSourceRanges: [0.0.0.0/0]",
			"ports: [{port: 8013, targetPort: 8080, nodePort: 30113, protocol: TCP}]"))
		v.SetLoadBalancerIngress(svc, vip)
		v.WaitRealServers("node1", ipvs.TCP, vip, 8013, podIP("web")+":8080")
		v.WaitRealServers("node2", ipvs.TCP, vip, 8013, podIP("web")+":8080")
		v.LoadBalance(8013, "")
		for range 2 { // the load balancer alternates between the nodes
			v.ExpectServed(v.Curl("client", "http://"+vip+":8013/"), "hostname=web")
		}
		time.Sleep(time.Second)
		g1, _ := metric("node1", "ipvsproxy_kernel_write_failures_total")
		g2, _ := metric("node2", "ipvsproxy_kernel_write_failures_total")
		v.Show("-", fmt.Sprintf("kernel write failures node1 %v -> %v, node2 %v -> %v", f1, g1, f2, g2), "")
		if g1 != f1 || g2 != f2 {
			v.Errorf("kernel write failures grew: node1 %v -> %v, node2 %v -> %v", f1, g1, f2, g2)
		}
	})
}

// scenarioHealthCheckLBIP: health-check node ports. A cloud probe to
// LB-IP:healthCheckNodePort reaches the health server instead of
// KUBE-IPVS-FILTER's REJECT (kube-proxy's regression fixed by
// kubernetes#117723): through the load balancer node1 answers 200 (it has the
// endpoint) and node2 503. On a node whose INPUT policy is DROP, the probe
// to the node's address still answers (accepted ahead of the host's rules,
// as kube-proxy does), while another port (10256) is dropped, and so is the
// Service's own node port: the host's INPUT rules decide Service traffic,
// as under kube-proxy (--accept-service-traffic would accept it).
func scenarioHealthCheckLBIP(s *S) {
	s.Step("health-check-via-lb-ip", "healthCheckNodePort: through "+vip+" node1 200 and node2 503; node1 under INPUT DROP answers the probe and drops :10256 and the Service's node port", func(v *V) {
		v.Heading("healthCheckNodePort through the LB IP, and under an INPUT policy of DROP")
		svc := v.corner("corner-hc", service("{name: corner-hc}", "type: LoadBalancer", "externalTrafficPolicy: Local",
			"ports: [{port: 8014, targetPort: 8080, nodePort: 30114, protocol: TCP}]"))
		hc := int(svc.Spec.HealthCheckNodePort)
		v.SetLoadBalancerIngress(svc, vip)
		v.WaitRealServers("node1", ipvs.TCP, vip, 8014, podIP("web")+":8080")
		v.WaitUntil(30*time.Second, "node2's health check does not answer 503", func() (bool, string) {
			a := run("node2", fmt.Sprintf("curl -s -o /dev/null -w '%%{http_code}' --max-time 2 localhost:%d/healthz", hc))
			return a.Out == "503", a.Out
		})
		// The probe's path: the load balancer forwards VIP:hc to each node in turn.
		v.LoadBalance(hc, "")
		var codes []string
		for range 2 {
			codes = append(codes, v.Ask("client", fmt.Sprintf("curl -sS --max-time 3 -o /dev/null -w '%%{http_code}' http://%s:%d/healthz", vip, hc)).Out)
		}
		if !slices.Contains(codes, "200") || !slices.Contains(codes, "503") {
			v.Errorf("probes to %s:%d answered %q, want 200 (node1) and 503 (node2)", vip, hc, codes)
		}
		// node1 with INPUT policy DROP (and the usual ESTABLISHED and loopback accepts).
		drop := "iptables -A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT && iptables -A INPUT -i lo -j ACCEPT && iptables -P INPUT DROP"
		if a := run("node1", drop); a.Status != 0 {
			v.Fatalf("node1: %s: %s", drop, a.Out)
		}
		s.t.Cleanup(func() {
			run("node1", "iptables -P INPUT ACCEPT; iptables -D INPUT -i lo -j ACCEPT; iptables -D INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")
		})
		v.Show("node1", "iptables -P INPUT DROP  # with ESTABLISHED and lo accepted", "")
		if a := v.Ask("client", fmt.Sprintf("curl -sS --max-time 3 -o /dev/null -w '%%{http_code}' http://%s:%d/healthz", node1Addr, hc)); a.Status != 0 || a.Out != "200" {
			v.Errorf("%s: want 200 under INPUT DROP", v.last())
		}
		if a := v.Ask("client", "curl -sS --max-time 3 -o /dev/null -w '%{http_code}' http://"+node1Addr+":10256/healthz"); a.Status != 28 {
			v.Errorf("%s: want a timeout (the policy drops other ports)", v.last())
		}
		if a := v.Ask("client", "curl -sS --max-time 3 -o /dev/null -w '%{http_code}' http://"+node1Addr+":30114/"); a.Status != 28 {
			v.Errorf("%s: want a timeout (the host's policy decides the node port, as under kube-proxy)", v.last())
		}
	})
}

// scenarioNodeSourceRanges: loadBalancerSourceRanges hold for traffic the
// node sends itself (kube-proxy's KUBE-IPVS-OUT-FILTER, kubernetes#119656).
// The ranges admit only the outside client: the client is served, node1's
// own curl to the LB IP is refused locally, a pod is dropped. With node1's
// range added, node1 is served.
func scenarioNodeSourceRanges(s *S) {
	s.Step("source-ranges-node-traffic", "loadBalancerSourceRanges ["+clientAddr+"/32]: client served, node1 refused, pod c1 dropped; with 198.51.100.0/24 added node1 is served", func(v *V) {
		v.Heading("Source ranges apply to the node's own traffic to the LB IP")
		manifest := func(ranges string) string {
			return service("{name: corner-ranges}", "type: LoadBalancer",
				"ports: [{port: 8015, targetPort: 8080, nodePort: 30115, protocol: TCP}]", "loadBalancerSourceRanges: ["+ranges+"]")
		}
		svc := v.corner("corner-ranges", manifest(clientAddr+"/32"))
		v.SetLoadBalancerIngress(svc, vip)
		v.WaitRealServers("node1", ipvs.TCP, vip, 8015, podIP("web")+":8080")
		v.WaitRealServers("node2", ipvs.TCP, vip, 8015, podIP("web")+":8080")
		v.LoadBalance(8015, "")
		url := "http://" + vip + ":8015/"
		v.ExpectServed(v.Curl("client", url), "hostname=web")
		if a := v.Curl("node1", url); a.Status == 0 {
			v.Errorf("%s: node1 is outside the ranges, want no answer", v.last())
		}
		v.ExpectSilence(v.Curl("c1", url))

		v.ApplyService(manifest(clientAddr + "/32, 198.51.100.0/24"))
		v.Show("-", "e2ectl apply-service corner-ranges.yaml  # loadBalancerSourceRanges: ["+clientAddr+"/32, 198.51.100.0/24]", "")
		member := ipset.Entry{IP: netip.MustParseAddr(vip), Protocol: "tcp", Port: 8015, Net: netip.MustParsePrefix("198.51.100.0/24")}
		v.WaitUntil(30*time.Second, "node1's KUBE-LOAD-BALANCER-SRC-CIDR lacks "+member.String(ipset.HashIPPortNet), func() (bool, string) {
			ok, err := inSet("node1", "KUBE-LOAD-BALANCER-SRC-CIDR", member)
			if err != nil {
				return false, err.Error()
			}
			return ok, "not in the set"
		})
		v.ExpectServed(v.Curl("node1", url), "hostname=web")
	})
}

// scenarioLocalNoEndpoints: externalTrafficPolicy Local on a node without
// local endpoints. node2 has no endpoint of the Service (web runs on node1).
// Pods and processes on node2 that call the Service by its external address
// (node2's NodePort, an external IP node2 receives) reach the cluster
// endpoint, as with kube-proxy (kubernetes#97081); a client outside the
// cluster sees a silent drop: no answer, no RST, no ICMP (curl times out,
// exit 28, instead of being refused, exit 7).
func scenarioLocalNoEndpoints(s *S) {
	const extIP = "203.0.113.151"
	s.Step("local-policy-no-endpoints", "Local policy, node2 without endpoints: c2 and node2 reach web through node2's NodePort and external IP; the outside client times out (no RST, no ICMP); node1 keeps "+clientAddr, func(v *V) {
		v.Heading("Local policy, no endpoint on node2: in-cluster sources served, outsiders silently dropped")
		v.corner("corner-local", service("{name: corner-local}", "type: NodePort", "externalTrafficPolicy: Local", "externalIPs: ["+extIP+"]",
			"ports: [{port: 8011, targetPort: 8080, nodePort: 30111, protocol: TCP}]"))
		v.WaitRealServers("node1", ipvs.TCP, extIP, 8011, podIP("web")+":8080")
		// The client reaches the external IP through node2, as a router would send it.
		if a := run("-", "ip -n client route replace "+extIP+"/32 via "+node2Addr); a.Status != 0 {
			v.Fatalf("route %s via node2: %s", extIP, a.Out)
		}
		s.t.Cleanup(func() { run("-", "ip -n client route del "+extIP+"/32") })
		// No endpoint on node2: its virtual server holds the cluster endpoint.
		v.WaitRealServers("node2", ipvs.TCP, node2Addr, 30111, podIP("web")+":8080")
		nodePort2 := "http://" + node2Addr + ":30111/"
		external := "http://" + extIP + ":8011/"
		for _, from := range []string{"c2", "node2"} {
			v.ExpectServed(v.Curl(from, nodePort2), "hostname=web")
			v.ExpectServed(v.Curl(from, external), "hostname=web")
		}
		v.ExpectSilence(v.Curl("client", nodePort2))
		v.ExpectSilence(v.Curl("client", external))
		// node1 has the endpoint: Local as usual, the client's address kept.
		v.ExpectServed(v.Curl("client", "http://"+node1Addr+":30111/"), "hostname=web", "client_address="+clientAddr)
	})
}
