//go:build e2e

package suite

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	v1 "k8s.io/api/core/v1"
)

// The seed tutorial, "Using Source IP": which client address a pod sees
// through each Service type, and how the proxy mode and scheduler answer.

// scenarioClusterIP: packets sent to a ClusterIP from inside the cluster are
// never source-NATed: the pod sees the client pod's address, whether the
// client runs on the endpoint's node or on the other one.
func scenarioClusterIP(s *S) {
	s.Step("tutorial-clusterip", "ClusterIP: client_address is the client pod's IP from the same node and from the other", func(v *V) {
		v.Heading("Type=ClusterIP: the pod sees the client pod's address")
		svc := v.ApplyService(service("{name: clusterip, labels: {app: source-ip-app}}", "type: ClusterIP", httpPort))
		ip := svc.Spec.ClusterIP
		v.Show("-", "e2ectl apply-service clusterip.yaml  # ClusterIP, port 80 -> 8080", serviceInfo(svc, "TYPE", "CLUSTER_IP"))
		v.Show("-", "e2ectl set-endpoints clusterip "+podIP("web")+"@node1  # pod web on node1", "")
		v.SetEndpoints(svc, "web@node1")
		v.WaitRealServers("node1", ipvs.TCP, ip, 80, podIP("web")+":8080")
		v.WaitRealServers("node2", ipvs.TCP, ip, 80, podIP("web")+":8080")
		v.Note("ClusterIP is %s; c1 runs on node1 (like web), c2 on node2.", ip)
		for _, c := range []string{"c1", "c2"} {
			got := v.Ask(c, "curl -s --max-time 5 "+ip+" | grep client_address").Out
			if want := "client_address=" + podIP(c); got != want {
				v.Errorf("from %s: got %q, want %s", c, got, want)
			}
		}
	})
}

// scenarioNodePort: with the default externalTrafficPolicy Cluster every
// node answers and the pod sees a node's address (SNAT); with Local only the
// node with the endpoint answers, and the pod sees the client's address.
func scenarioNodePort(s *S) {
	const nodePort = 30080
	var svc *v1.Service
	s.Step("tutorial-nodeport", "NodePort Cluster: both nodes answer, client_address is a node's address", func(v *V) {
		v.Heading("Type=NodePort, externalTrafficPolicy Cluster: every node answers, source NATed")
		svc = v.ApplyService(service("{name: nodeport, labels: {app: source-ip-app}}", "type: NodePort",
			fmt.Sprintf("ports: [{port: 80, targetPort: 8080, nodePort: %d, protocol: TCP}]", nodePort)))
		v.Show("-", fmt.Sprintf("e2ectl apply-service nodeport.yaml  # type NodePort, nodePort %d", nodePort),
			serviceInfo(svc, "TYPE", "CLUSTER_IP", "NODE_PORT_80", "EXTERNAL_TRAFFIC_POLICY"))
		v.Show("-", "e2ectl set-endpoints nodeport "+podIP("web")+"@node1", "")
		v.SetEndpoints(svc, "web@node1")
		v.WaitRealServers("node1", ipvs.TCP, node1Addr, nodePort, podIP("web")+":8080")
		v.WaitRealServers("node2", ipvs.TCP, node2Addr, nodePort, podIP("web")+":8080")
		for _, n := range []string{node1Addr, node2Addr} {
			got := v.Ask("client", fmt.Sprintf("curl -s --max-time 5 %s:%d | grep -i client_address", n, nodePort)).Out
			if got != "client_address="+node1Addr && got != "client_address="+node2Addr {
				v.Errorf("through %s: got %q, want client_address=%s or %s", n, got, node1Addr, node2Addr)
			}
		}
	})
	s.Step("tutorial-nodeport-local", "NodePort Local: only node1 answers, client_address="+clientAddr+"; node2 gives nothing", func(v *V) {
		v.Heading("Type=NodePort, externalTrafficPolicy Local: only the endpoint's node answers, with the client's address")
		svc = v.SetExternalTrafficPolicy(svc, v1.ServiceExternalTrafficPolicyLocal)
		v.Show("-", `e2ectl patch-etp nodeport Local  # kubectl patch svc nodeport -p '{"spec":{"externalTrafficPolicy":"Local"}}'`,
			serviceInfo(svc, "EXTERNAL_TRAFFIC_POLICY"))
		// node2 has no local endpoint: its virtual server keeps the cluster
		// endpoint for in-cluster sources only; outsiders are dropped.
		v.WaitInSet("node2", "KUBE-LOCAL-NO-ENDPOINTS", node2Addr, "tcp", nodePort)
		all := v.Ask("client", fmt.Sprintf("for node in %s %s; do curl --connect-timeout 1 --max-time 3 -s $node:%d | grep -i client_address; done", node1Addr, node2Addr, nodePort)).Out
		other := v.Ask("client", fmt.Sprintf("curl --connect-timeout 1 --max-time 3 -s %s:%d | grep -i client_address", node2Addr, nodePort)).Out
		if all != "client_address="+clientAddr {
			v.Errorf("from both nodes got %q, want exactly one line client_address=%s (from node1)", all, clientAddr)
		}
		if other != "" {
			v.Errorf("node2 answered %q, want nothing", other)
		}
	})
}

// scenarioLoadBalancer: the load balancer (namespace lb, IPVS direct routing,
// see e2e/topology) forwards the VIP to the nodes and keeps the client's
// address. Under Cluster the node source-NATs; under Local the API server
// allocates healthCheckNodePort, the node without an endpoint fails its
// health check, the load balancer drops it, and the pod sees the client.
func scenarioLoadBalancer(s *S) {
	const nodePort = 30090
	var svc *v1.Service
	lbPort := ""
	// The load balancer's virtual server goes with the scenario.
	s.t.Cleanup(func() {
		if lbPort != "" {
			if err := topology("lb-del", "tcp", "80"); err != nil {
				s.t.Errorf("clean-up: %v", err)
			}
		}
	})
	s.Step("tutorial-loadbalancer", "LoadBalancer Cluster: "+vip+" answers, client_address is a node's address", func(v *V) {
		v.Heading("Type=LoadBalancer, externalTrafficPolicy Cluster: answers, source NATed")
		svc = v.ApplyService(service("{name: loadbalancer, labels: {app: source-ip-app}}", "type: LoadBalancer",
			fmt.Sprintf("ports: [{port: 80, targetPort: 8080, nodePort: %d, protocol: TCP}]", nodePort)))
		v.Show("-", "e2ectl apply-service loadbalancer.yaml  # type LoadBalancer, port 80", serviceInfo(svc, "TYPE", "CLUSTER_IP", "EXTERNAL_TRAFFIC_POLICY"))
		v.Show("-", "e2ectl set-endpoints loadbalancer "+podIP("web")+"@node1", "")
		v.SetEndpoints(svc, "web@node1")
		// No cloud controller runs: write the ingress IP into the status as one would.
		v.SetLoadBalancerIngress(svc, vip)
		v.Show("-", `curl -X PATCH .../services/loadbalancer/status -d '{"status":{"loadBalancer":{"ingress":[{"ip":"`+vip+`"}]}}}'  # as a cloud controller would`, "EXTERNAL-IP "+vip)
		v.WaitRealServers("node1", ipvs.TCP, vip, 80, podIP("web")+":8080")
		v.WaitRealServers("node2", ipvs.TCP, vip, 80, podIP("web")+":8080")
		v.Must(topology("lb-add", "tcp", "80"))
		lbPort = "80"
		// Round robin in the load balancer: four requests reach each node twice.
		for range 4 {
			got := v.Ask("client", "curl -s --max-time 5 "+vip+" | grep -i client_address").Out
			if got != "client_address="+node1Addr && got != "client_address="+node2Addr {
				v.Errorf("through the LB got %q, want client_address=%s or %s", got, node1Addr, node2Addr)
			}
		}
	})
	s.Step("tutorial-loadbalancer-local", "LoadBalancer Local: healthCheckNodePort 200/localEndpoints 1 on node1, 503/0 on node2; LB keeps "+clientAddr, func(v *V) {
		v.Heading("Type=LoadBalancer, externalTrafficPolicy Local: health checks steer the load balancer")
		svc = v.SetExternalTrafficPolicy(svc, v1.ServiceExternalTrafficPolicyLocal)
		hc := strconv.Itoa(int(svc.Spec.HealthCheckNodePort))
		v.Show("-", "e2ectl patch-etp loadbalancer Local | grep HEALTH_CHECK_NODE_PORT", "HEALTH_CHECK_NODE_PORT="+hc)
		// node2 has no local endpoint once its proxier saw the change:
		// outsiders are dropped there and its health check says 503.
		v.WaitInSet("node2", "KUBE-LOCAL-NO-ENDPOINTS", vip, "tcp", 80)
		v.WaitUntil(30*time.Second, "node2's health check does not answer 503", func() (bool, string) {
			a := run("node2", "curl -s -o /dev/null -w '%{http_code}' --max-time 2 localhost:"+hc+"/healthz")
			return a.Out == "503", a.Out
		})
		for _, h := range []struct{ node, endpoints, code string }{{"node1", "1", "200"}, {"node2", "0", "503"}} {
			a := v.Ask(h.node, "curl -s -w ' %{http_code}' localhost:"+hc+"/healthz")
			// The body is kube-proxy's indented JSON: compare without white space.
			got := strings.Join(strings.Fields(a.Out), "")
			if !strings.Contains(got, `"localEndpoints":`+h.endpoints) || !strings.HasSuffix(got, "}"+h.code) {
				v.Errorf("%s health check: got %q, want localEndpoints %s and %s", h.node, got, h.endpoints, h.code)
			}
		}
		// The load balancer now weighs each node by its health check (200 -> 1, else 0).
		v.Must(topology("lb-del", "tcp", "80"))
		lbPort = ""
		v.Must(topology("lb-add", "tcp", "80", hc))
		lbPort = "80"
		v.WaitUntil(30*time.Second, "the load balancer's weights are not node1 1, node2 0", func() (bool, string) {
			rss, err := realServers("lb", ipvs.TCP, vip, 80)
			if err != nil {
				return false, err.Error()
			}
			weights := map[string]int{}
			for _, rs := range rss {
				weights[rs.Address.String()] = int(rs.Weight)
			}
			w1, ok1 := weights[node1Addr]
			w2, ok2 := weights[node2Addr]
			return ok1 && ok2 && w1 == 1 && w2 == 0, fmt.Sprint(weights)
		})
		v.Ask("lb", "ipvsadm -Ln -t "+vip+":80")
		for range 4 {
			got := v.Ask("client", "curl -s --max-time 5 "+vip+" | grep -i client_address").Out
			if got != "client_address="+clientAddr {
				v.Errorf("through the LB got %q, want client_address=%s", got, clientAddr)
			}
		}
	})
}

// scenarioProxyMode: the seeds ask "curl localhost:10249/proxyMode" on a
// node. Their kube-proxy answered iptables; this one answers ipvs, and its
// virtual servers use the twos scheduler (wrr on a kernel without it).
func scenarioProxyMode(s *S) {
	s.Step("tutorial-proxy-mode", "proxyMode answers ipvs on both nodes; every virtual server uses twos (wrr where the kernel has no twos)", func(v *V) {
		v.Heading("The proxy mode, asked on each node")
		// A Service of its own, so each node has a virtual server to look at.
		svc := v.ApplyService(service("{name: proxymode}", httpPort))
		v.SetEndpoints(svc, "web@node1")
		for _, n := range []string{"node1", "node2"} {
			v.WaitRealServers(n, ipvs.TCP, svc.Spec.ClusterIP, 80, podIP("web")+":8080")
			if got := v.Ask(n, "curl -s localhost:10249/proxyMode").Out; got != "ipvs" {
				v.Errorf("%s's proxyMode: got %q, want ipvs", n, got)
			}
			vss, err := virtualServers(n)
			v.Must(err)
			var lines, other []string
			for _, vs := range vss {
				lines = append(lines, vs.String()+" "+vs.Scheduler)
				if vs.Scheduler != defaultScheduler() {
					other = append(other, vs.String()+" "+vs.Scheduler)
				}
			}
			slices.Sort(lines)
			v.Show(n, "ipvsadm -Ln  # each virtual server and its scheduler, read with the ipvs package", strings.Join(lines, "\n"))
			if len(other) > 0 {
				v.Errorf("%s: not %s: %s", n, defaultScheduler(), strings.Join(other, ", "))
			}
		}
	})
}

// scenarioSpread: the seed's iptables rules split a Service three ways with
// probabilities 1/3, 1/2, 1. IPVS's twos scheduler must spread new
// connections over three endpoints too: 600 requests, each on a new
// connection, from a pod; each endpoint's share must lie in [100, 300]
// (expected 200; a binomial standard deviation is about 12, so a failure
// means a skew, not bad luck).
func scenarioSpread(s *S) {
	s.Step("spread-over-endpoints", "600 requests over three endpoints: each gets between 100 and 300", func(v *V) {
		v.Heading("Three endpoints share the load")
		svc := v.ApplyService(service("{name: spread}", httpPort))
		ip := svc.Spec.ClusterIP
		v.Show("-", fmt.Sprintf("e2ectl apply-service spread.yaml && e2ectl set-endpoints spread %s@node1 %s@node1 %s@node2", podIP("web"), podIP("s3"), podIP("s2")), "CLUSTER_IP="+ip)
		v.SetEndpoints(svc, "web@node1", "s3@node1", "s2@node2")
		v.WaitRealServers("node1", ipvs.TCP, ip, 80, podIP("web")+":8080", podIP("s3")+":8080", podIP("s2")+":8080")
		// Connection: close makes curl open a new connection per URL, so each one is scheduled.
		a := v.Ask("c1", "curl -s -H 'Connection: close' 'http://"+ip+"/?n=[1-600]' | grep ^hostname= | sort | uniq -c")
		counts := map[string]int{}
		for _, l := range strings.Split(a.Out, "\n") {
			f := strings.Fields(l)
			if len(f) == 2 {
				n, _ := strconv.Atoi(f[0])
				counts[strings.TrimPrefix(f[1], "hostname=")] = n
			}
		}
		total := 0
		for _, name := range []string{"web", "s3", "s2"} {
			total += counts[name]
			if counts[name] < 100 || counts[name] > 300 {
				v.Errorf("%s got %d, want 100..300", name, counts[name])
			}
		}
		if total != 600 {
			v.Errorf("only %d of 600 requests answered", total)
		}
	})
}
