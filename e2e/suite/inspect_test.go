//go:build e2e

package suite

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
)

// scenarioInspect: `ipvsproxy inspect` on a node running the seeds' kind of
// Services. inspect: the table names each Service and its endpoints, with a
// non-zero flow count after traffic; inspect-check: --check exits 1 after a
// real server is deleted by hand with ipvsadm, 0 after the next sync;
// inspect-trace: `inspect trace` of a ClusterIP from a pod, confirmed by real
// traffic (inspect-trace-local-nodeport and inspect-trace-source-ranges,
// scenarios of their own, trace a Local NodePort and a source-ranged LB).
// Every Service here and there is the scenario's own (ports 81/30085/30086
// clash with nothing else). The daemon's own binary runs in the node as an
// operator would run it.
func scenarioInspect(s *S) {
	inspect := ipvsproxyBin() + " inspect"
	var ip string // inspect-web's cluster IP, for 31 and 32
	s.Step("inspect", "inspect on node1 names default/inspect-web:http, both endpoints with their nodes, flows > 0 after 6 requests", func(v *V) {
		v.Heading("inspect: the kernel's virtual servers named by Service, with flows after traffic")
		svc := v.ApplyService(service("{name: inspect-web}", "type: ClusterIP", "ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]"))
		ip = svc.Spec.ClusterIP
		v.SetEndpoints(svc, "web@node1", "s2@node2")
		v.WaitRealServers("node1", ipvs.TCP, ip, 80, podIP("web")+":8080", podIP("s2")+":8080")
		for range 6 {
			v.Ask("c1", "curl -s --max-time 5 -o /dev/null -w '%{http_code}' "+ip)
		}
		// IPVS reports connection counts its estimator summed from per-CPU counters, every 2 s: wait
		// for them rather than read a count that lags the requests.
		waitUntil(10*time.Second, func() (bool, string) {
			vs, _ := inspectClusterIP(run("node1", inspect+" -o json --service default/inspect-web").Out)
			return vs != nil && vs.Stats.Connections >= 6, ""
		})
		table := v.Ask("node1", inspect+" --service default/inspect-web").Out
		os.WriteFile(filepath.Join(guest.logs, "inspect-node1-table.txt"), []byte(table+"\n"), 0o644)
		out := v.Ask("node1", inspect+" -o json --service default/inspect-web").Out
		// The whole node, as a person first types it (kept for README).
		os.WriteFile(filepath.Join(guest.logs, "inspect-node1-all.txt"), []byte(run("node1", inspect).Out+"\n"), 0o644)
		os.WriteFile(filepath.Join(guest.logs, "inspect-node1.yaml"), []byte(run("node1", inspect+" -o yaml --service default/inspect-web").Out+"\n"), 0o644)

		if !inOrder(table, "default/inspect-web:http", "ClusterIP", "TCP "+ip+":80") {
			v.Errorf("table lacks default/inspect-web:http ClusterIP TCP %s:80", ip)
		}
		if !inOrder(table, podIP("web")+":8080", "ready on node1") || !inOrder(table, podIP("s2")+":8080", "ready on node2") {
			v.Errorf("table lacks the endpoints with their nodes")
		}
		if !strings.Contains(table, "sync: last full") {
			v.Errorf("table lacks the sync status")
		}
		vs, err := inspectClusterIP(out)
		switch {
		case err != nil:
			v.Errorf("inspect -o json: %v", err)
		case vs == nil:
			v.Errorf("inspect -o json has no ClusterIP virtual server")
		case vs.Flows <= 0 || vs.Stats.Connections < 6:
			v.Errorf("flows=%d connections=%d, want flows > 0 and connections >= 6", vs.Flows, vs.Stats.Connections)
		}
	})

	s.Step("inspect-check", "inspect --check: exit 0 before, 1 after ipvsadm -d (missing real server), 0 after the next sync, 2 without the daemon", func(v *V) {
		v.Heading("inspect --check: 0 when the kernel agrees, 1 after ipvsadm -d, 0 again after the next sync")
		before := v.Ask("node1", inspect+" --check").Status
		// The daemon's periodic full sync may repair the real server between the deletion and the
		// check (the VM takes a second or two to start inspect): delete it again, up to three times.
		var deleted Answer
		for range 3 {
			deleted = v.Ask("node1", fmt.Sprintf("ipvsadm -d -t %s:80 -r %s:8080 && %s --check", ip, podIP("s2"), inspect))
			if deleted.Status != 0 {
				break
			}
		}
		t0 := time.Now()
		// The next full sync (every --ipvs-sync-period) re-reads the kernel and repairs it.
		waitUntil(60*time.Second, func() (bool, string) { return run("node1", inspect+" --check").Status == 0, "" })
		repaired := v.Ask("node1", inspect+" --check").Status
		took := seconds(time.Since(t0))
		unreachable := v.Ask("node1", inspect+" --check --daemon 127.0.0.1:1").Status
		v.about = fmt.Sprintf("inspect --check: exit %d before, %d after ipvsadm -d (missing real server), %d after the next sync (%ss), %d without the daemon", before, deleted.Status, repaired, took, unreachable)
		if before != 0 {
			v.Errorf("--check before the deletion exited %d, want 0", before)
		}
		if deleted.Status != 1 {
			v.Errorf("--check after ipvsadm -d exited %d, want 1", deleted.Status)
		}
		if want := fmt.Sprintf("missing real server %s:8080 of TCP %s:80 (default/inspect-web:http)", podIP("s2"), ip); !strings.Contains(deleted.Out, want) {
			v.Errorf("--check did not name the missing real server (%s)", want)
		}
		if repaired != 0 {
			v.Errorf("--check after the repair exited %d, want 0", repaired)
		}
		if unreachable != 2 {
			v.Errorf("--check without a daemon exited %d, want 2", unreachable)
		}
	})

	s.Step("inspect-trace", "trace c1 -> the cluster IP :80: load-balanced to both endpoints, not masqueraded; c1 is seen as itself", func(v *V) {
		v.Heading("inspect trace: a ClusterIP from a pod is load-balanced, not masqueraded")
		trace := v.Ask("node1", fmt.Sprintf("%s trace %s %s:80/tcp", inspect, podIP("c1"), ip)).Out
		os.WriteFile(filepath.Join(guest.logs, "inspect-trace-clusterip.txt"), []byte(trace+"\n"), 0o644)
		seen := v.Ask("c1", "curl -s --max-time 5 "+ip+" | grep client_address").Out
		v.about = fmt.Sprintf("trace c1 -> %s:80: load-balanced to both endpoints, not masqueraded; c1 is seen as itself", ip)
		if !strings.Contains(trace, "verdict: load-balanced") {
			v.Errorf("want verdict load-balanced")
		}
		if !strings.Contains(trace, "-> "+podIP("web")+":8080 on node1 (ready): not masqueraded") || !strings.Contains(trace, "-> "+podIP("s2")+":8080 on node2 (ready): not masqueraded") {
			v.Errorf("want both real servers, not masqueraded")
		}
		if !strings.Contains(trace, "kernel: virtual server TCP "+ip+":80 is in the kernel with the same real servers") {
			v.Errorf("want the kernel check to agree")
		}
		if seen != "client_address="+podIP("c1") {
			v.Errorf("real traffic: got '%s', want client_address=%s", seen, podIP("c1"))
		}
	})

}

// scenarioInspectLocalNodePort: `inspect trace` of a Local NodePort from
// outside: dropped silently on the node without endpoints, load-balanced
// with the client's address on the node with one; real traffic agrees.
func scenarioInspectLocalNodePort(s *S) {
	const npLocal = 30085
	inspect := ipvsproxyBin() + " inspect"
	s.Step("inspect-trace-local-nodeport", fmt.Sprintf("trace client -> node2:%d dropped silently (Local, no endpoint on node2); -> node1 load-balanced with the client's address; real traffic agrees", npLocal), func(v *V) {
		v.Heading("inspect trace: a Local NodePort from outside on the node without endpoints is dropped")
		svc := v.ApplyService(service("{name: inspect-local}", "type: NodePort", "externalTrafficPolicy: Local",
			fmt.Sprintf("ports: [{name: http, port: 80, targetPort: 8080, nodePort: %d, protocol: TCP}]", npLocal)))
		v.SetEndpoints(svc, "web@node1")
		v.WaitRealServers("node1", ipvs.TCP, node1Addr, npLocal, podIP("web")+":8080")
		// Without a local endpoint node2 keeps the cluster endpoints for in-cluster sources
		// (kubernetes#97081); its filter drops everyone else.
		v.WaitRealServers("node2", ipvs.TCP, node2Addr, npLocal, podIP("web")+":8080")
		trace2 := v.Ask("node2", fmt.Sprintf("%s trace %s %s:%d", inspect, clientAddr, node2Addr, npLocal)).Out
		os.WriteFile(filepath.Join(guest.logs, "inspect-trace-local-nodeport.txt"), []byte(trace2+"\n"), 0o644)
		trace1 := v.Ask("node1", fmt.Sprintf("%s trace %s %s:%d", inspect, clientAddr, node1Addr, npLocal)).Out
		via2 := v.Ask("client", fmt.Sprintf(`curl -s --connect-timeout 2 --max-time 3 -o /dev/null -w '%%{http_code}' %s:%d; echo " rc=$?"`, node2Addr, npLocal)).Out
		via1 := v.Ask("client", fmt.Sprintf("curl -s --max-time 5 %s:%d | grep client_address", node1Addr, npLocal)).Out
		if !inOrder(trace2, fmt.Sprintf("verdict: dropped: KUBE-IPVS-FILTER drops it: %s:%d has traffic policy Local and no endpoint on this node", node2Addr, npLocal), "dropped silently") {
			v.Errorf("node2: want verdict dropped silently by KUBE-IPVS-FILTER (Local, no endpoint on node2)")
		}
		if !strings.Contains(trace1, "verdict: load-balanced") || !strings.Contains(trace1, "-> "+podIP("web")+":8080 on node1 (ready): not masqueraded (a node port of a Service with externalTrafficPolicy Local") {
			v.Errorf("node1: want load-balanced to web, not masqueraded")
		}
		// curl exit 28 is a timeout: no reply, no RST, no ICMP (7 would be a refusal).
		if via2 != "000 rc=28" {
			v.Errorf("real traffic to node2: got '%s', want no answer at all (000 rc=28)", via2)
		}
		if via1 != "client_address="+clientAddr {
			v.Errorf("real traffic to node1: got '%s', want client_address=%s", via1, clientAddr)
		}
	})

}

// scenarioInspectSourceRanges: `inspect trace` of a LoadBalancer with
// loadBalancerSourceRanges: a pod outside them dropped by KUBE-IPVS-FILTER,
// one inside load-balanced; real traffic agrees.
func scenarioInspectSourceRanges(s *S) {
	const lbNodePort = 30086
	inspect := ipvsproxyBin() + " inspect"
	s.Step("inspect-trace-source-ranges", "trace c1 (10.244.1.20, outside 10.244.2.0/24) -> "+vip+":81 dropped by KUBE-IPVS-FILTER; c2 allowed; real traffic agrees", func(v *V) {
		v.Heading("inspect trace: a load balancer with source ranges drops a forbidden client")
		svc := v.ApplyService(service("{name: inspect-ranged}", "type: LoadBalancer", "loadBalancerSourceRanges: [10.244.2.0/24]",
			fmt.Sprintf("ports: [{name: http, port: 81, targetPort: 8080, nodePort: %d, protocol: TCP}]", lbNodePort)))
		v.SetEndpoints(svc, "web@node1")
		v.SetLoadBalancerIngress(svc, vip)
		v.WaitRealServers("node1", ipvs.TCP, vip, 81, podIP("web")+":8080")
		v.WaitRealServers("node2", ipvs.TCP, vip, 81, podIP("web")+":8080")
		forbidden := v.Ask("node1", fmt.Sprintf("%s trace %s %s:81", inspect, podIP("c1"), vip)).Out
		os.WriteFile(filepath.Join(guest.logs, "inspect-trace-source-ranges.txt"), []byte(forbidden+"\n"), 0o644)
		allowed := v.Ask("node2", fmt.Sprintf("%s trace %s %s:81", inspect, podIP("c2"), vip)).Out
		c1HTTP := v.Ask("c1", "curl -s --connect-timeout 2 --max-time 3 -o /dev/null -w '%{http_code}' "+vip+":81").Out
		c2HTTP := v.Ask("c2", "curl -s --max-time 5 -o /dev/null -w '%{http_code}' "+vip+":81").Out
		if !strings.Contains(forbidden, fmt.Sprintf("verdict: dropped: KUBE-IPVS-FILTER drops it: load balancer %s:81 has loadBalancerSourceRanges and %s is outside them", vip, podIP("c1"))) ||
			!strings.Contains(forbidden, "KUBE-LOAD-BALANCER-SRC-CIDR dst,dst,src -j DROP") {
			v.Errorf("c1: want dropped by the source-range rule")
		}
		if !strings.Contains(forbidden, "kernel: virtual server TCP "+vip+":81 is in the kernel with the same real servers") {
			v.Errorf("c1: want the kernel check to agree")
		}
		if !strings.Contains(allowed, "verdict: load-balanced") {
			v.Errorf("c2: want load-balanced")
		}
		if c1HTTP != "000" {
			v.Errorf("real traffic from c1: got HTTP '%s', want none", c1HTTP)
		}
		if c2HTTP != "200" {
			v.Errorf("real traffic from c2: got HTTP '%s', want 200", c2HTTP)
		}
	})
}

// inspectedVirtualServer is what the checks read of one virtual server in
// `inspect -o json`.
type inspectedVirtualServer struct {
	Type  string `json:"type"`
	Flows int    `json:"flows"`
	Stats struct {
		Connections int `json:"connections"`
	} `json:"stats"`
}

// inspectClusterIP is the ClusterIP virtual server of `inspect -o json`'s
// output; nil when there is none.
func inspectClusterIP(out string) (*inspectedVirtualServer, error) {
	var doc struct {
		VirtualServers []inspectedVirtualServer `json:"virtualServers"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, err
	}
	var found *inspectedVirtualServer
	for i, vs := range doc.VirtualServers {
		if vs.Type == "ClusterIP" && (found == nil || vs.Stats.Connections > found.Stats.Connections) {
			found = &doc.VirtualServers[i]
		}
	}
	return found, nil
}

// inOrder: s holds each of parts, in this order (bash's
// [[ $s == *a*b*c* ]]).
func inOrder(s string, parts ...string) bool {
	for _, p := range parts {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}
