//go:build e2e

package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsproxy/ipvsproxy/e2e/controlplane/cluster"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
)

// Scenarios on what the daemon is told: a node's daemon restarted with a
// flag of its own (or a role, or a configuration file), checked, and put
// back on the suite's flags.

// procForwards are the forwarding methods ("Masq", "Route", "Tunnel") of the
// node's real servers as its kernel prints them in /proc/net/ip_vs, keyed
// "VIRTUAL-SERVER -> REAL-SERVER" (procForwardKey): the ipvs package leaves
// the method out, since the proxier only ever masquerades.
func procForwards(node string) (map[string]string, error) {
	a := run(node, "cat /proc/net/ip_vs")
	if a.Status != 0 {
		return nil, fmt.Errorf("%s: /proc/net/ip_vs: %s", node, a.Out)
	}
	out := map[string]string{}
	vs := ""
	for _, l := range strings.Split(a.Out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[0] != "->":
			if ap, ok := procAddrPort(f[1]); ok {
				vs = strings.ToUpper(f[0]) + " " + ap.String()
			} else {
				vs = ""
			}
		case vs != "" && len(f) >= 3 && f[0] == "->":
			if ap, ok := procAddrPort(f[1]); ok {
				out[vs+" -> "+ap.String()] = f[2]
			}
		}
	}
	return out, nil
}

func procForwardKey(vs ipvs.VirtualServerKey, rs ipvs.RealServerKey) string {
	return strings.ToUpper(vs.Protocol.String()) + " " + netip.AddrPortFrom(vs.Address, vs.Port).String() + " -> " + rs.String()
}

// procAddrPort parses /proc/net/ip_vs's address: 8 hex digits and a hex
// port for IPv4 ("CB0071C9:0050"), the full IPv6 form in brackets and a hex
// port for IPv6.
func procAddrPort(s string) (netip.AddrPort, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(s[i+1:], 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	host := s[:i]
	var addr netip.Addr
	if strings.HasPrefix(host, "[") {
		if addr, err = netip.ParseAddr(strings.Trim(host, "[]")); err != nil {
			return netip.AddrPort{}, false
		}
	} else {
		n, err := strconv.ParseUint(host, 16, 32)
		if err != nil || len(host) != 8 {
			return netip.AddrPort{}, false
		}
		addr = netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	}
	return netip.AddrPortFrom(addr, uint16(port)), true
}

// scenarioExcludeCIDRs: --ipvs-exclude-cidrs means what it means in
// kube-proxy: it limits the clean-up, nothing else. node1's daemon is
// restarted with --ipvs-exclude-cidrs 10.96.200.0/24,203.0.113.200/29. A
// Service whose cluster IP (10.96.200.20) lies in an excluded range still
// gets its NodePort and cluster IP virtual servers (before the fix it got
// neither), and a virtual server someone else made in an excluded range,
// bound on kube-ipvs0 as a leftover would be, stays exactly as it was
// through the daemon's full sync.
func scenarioExcludeCIDRs(s *S) {
	const foreign, excludedIP, nodePort = "203.0.113.201", "10.96.200.20", 30200
	s.Step("exclude-cidrs", "exclude-cidrs: a Service whose cluster IP is excluded is served on its NodePort and cluster IP; a foreign virtual server there is untouched", func(v *V) {
		v.Heading("--ipvs-exclude-cidrs limits clean-up only (kube-proxy's meaning)")
		v.StopProxier("node1", syscall.SIGTERM)
		// Someone else's virtual server in an excluded range, its address on kube-ipvs0.
		add := fmt.Sprintf("ipvsadm -A -t %[1]s:80 -s rr; ipvsadm -a -t %[1]s:80 -r 192.0.2.9:80 -m -w 3; ip addr add %[1]s/32 dev kube-ipvs0", foreign)
		if a := run("node1", add); a.Status != 0 {
			v.Fatalf("node1: %s: %s", add, a.Out)
		}
		s.t.Cleanup(func() {
			run("node1", fmt.Sprintf("ipvsadm -D -t %[1]s:80; ip addr del %[1]s/32 dev kube-ipvs0", foreign))
		})
		v.Show("node1", add, "")
		v.StartProxier("node1", proxierRun{extra: []string{"--ipvs-exclude-cidrs", "10.96.200.0/24,203.0.113.200/29"}})
		svc := v.ApplyService(service("{name: excluded}", "type: NodePort", "clusterIP: "+excludedIP,
			fmt.Sprintf("ports: [{port: 80, targetPort: 8080, nodePort: %d, protocol: TCP}]", nodePort)))
		v.Show("-", fmt.Sprintf("e2ectl apply-service excluded.yaml  # clusterIP %s, nodePort %d", excludedIP, nodePort), serviceInfo(svc, "CLUSTER_IP", "NODE_PORT_80"))
		v.SetEndpoints(svc, "web@node1")
		v.WaitRealServers("node1", ipvs.TCP, node1Addr, nodePort, podIP("web")+":8080")
		if a := v.Ask("client", fmt.Sprintf("curl -s --max-time 5 %s:%d | grep ^hostname=", node1Addr, nodePort)).Out; a != "hostname=web" {
			v.Errorf("NodePort of the excluded-cluster-IP Service answered '%s', want hostname=web", a)
		}
		if a := v.Ask("c1", "curl -s --max-time 5 "+excludedIP+" | grep ^hostname=").Out; a != "hostname=web" {
			v.Errorf("its cluster IP answered '%s', want hostname=web", a)
		}
		key := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr(foreign), Port: 80}
		vs, err := virtualServer("node1", ipvs.TCP, foreign, 80)
		v.Must(err)
		rss, err := realServers("node1", ipvs.TCP, foreign, 80)
		v.Must(err)
		forwards, err := procForwards("node1")
		v.Must(err)
		var now []string
		for _, rs := range rss {
			now = append(now, fmt.Sprintf("-> %s %s %d", rs, forwards[procForwardKey(key, rs.RealServerKey)], rs.Weight))
		}
		listing := strings.Join(append([]string{vs.String() + " " + vs.Scheduler}, now...), "\n")
		v.Show("node1", "ipvsadm -Ln -t "+foreign+":80  # read with the ipvs package, the forwarding method from /proc/net/ip_vs", listing)
		if vs.Scheduler != "rr" || !slices.Equal(now, []string{"-> 192.0.2.9:80 Masq 3"}) {
			v.Errorf("foreign virtual server now: '%s', want rr with 192.0.2.9:80 Masq weight 3", oneline(listing))
		}

		v.StopProxier("node1", syscall.SIGTERM)
		run("node1", fmt.Sprintf("ipvsadm -D -t %[1]s:80; ip addr del %[1]s/32 dev kube-ipvs0", foreign))
		v.RestoreProxier("node1")
		// Deleted once node1 is back on the suite's flags: inside --ipvs-exclude-cidrs nothing
		// is ever cleaned up, the Service's own virtual server neither.
		v.DeleteService(svc)
	})
}

// scenarioResyncShares: --ipvs-resync-shares. node2's daemon is restarted
// with 3 shares (the suite's period is syncPeriod). Behind its back, one
// Service's virtual server is deleted and another's real server removed. A
// period between full ones lists the virtual servers, so the deleted one is
// back within one period and answers again; the real server is back within
// three periods (its share's, or the full one). Over four periods the
// daemon runs at most two full syncs (one every period with the default of
// 1 share).
func scenarioResyncShares(s *S) {
	s.Step("resync-shares", "resync shares: deleted virtual server back, removed real server back, answered again, at most 2 full syncs in 4 periods", func(v *V) {
		v.Heading("--ipvs-resync-shares 3: a deleted virtual server back within a period, a removed real server within three")
		var ips []string
		var svcs []*v1.Service
		for _, name := range []string{"resync-a", "resync-b"} {
			svc := v.ApplyService(service("{name: "+name+"}", "type: ClusterIP", httpPort))
			v.SetEndpoints(svc, "web@node1", "s2@node2")
			ips = append(ips, svc.Spec.ClusterIP)
			svcs = append(svcs, svc)
		}
		a, b := ips[0], ips[1]
		both := []string{podIP("web") + ":8080", podIP("s2") + ":8080"}

		v.RestartProxier("node2", proxierRun{extra: []string{"--ipvs-resync-shares", "3"}, syncWithin: 60 * time.Second})
		v.WaitRealServers("node2", ipvs.TCP, a, 80, both...)
		v.WaitRealServers("node2", ipvs.TCP, b, 80, both...)

		full0, _ := metric("node2", "ipvsproxy_sync_full_total")
		t0 := time.Now()
		v.Ask("node2", fmt.Sprintf("ipvsadm -D -t %s:80 && ipvsadm -d -t %s:80 -r %s:8080", a, b, podIP("s2")))
		v.WaitUntil(30*time.Second, fmt.Sprintf("the deleted virtual server %s:80 is not back on node2", a), func() (bool, string) {
			return realServersAre("node2", a, 80, both)
		})
		tookVS := time.Since(t0)
		v.WaitUntil(45*time.Second, fmt.Sprintf("the real server %s:8080 of %s:80 is not back on node2", podIP("s2"), b), func() (bool, string) {
			return realServersAre("node2", b, 80, both)
		})
		tookRS := time.Since(t0)
		if n := v.Ask("c2", "curl -s --max-time 5 "+a+" | grep -c client_address").Out; n != "1" {
			v.Errorf("c2 -> %s after its virtual server came back: '%s'", a, n)
		}
		// Four periods from the deletion: with 3 shares at most two of them are full.
		time.Sleep(time.Until(t0.Add(4 * syncPeriod)))
		full, _ := metric("node2", "ipvsproxy_sync_full_total")
		fulls := full - full0
		if fulls > 2 {
			v.Errorf("node2 ran %v full syncs in four periods, want at most 2 with 3 shares", fulls)
		}
		v.Show("node2", "curl 127.0.0.1:10249/metrics | grep ipvsproxy_sync_full_total  # four periods after the deletion", fmt.Sprintf("%v, was %v", full, full0))
		v.Note("virtual server back after %.1fs, real server after %.1fs; %v full syncs in four periods of %s", tookVS.Seconds(), tookRS.Seconds(), fulls, syncPeriod)
		v.about = fmt.Sprintf("resync shares: deleted virtual server back in %.1fs, removed real server in %.1fs, answered again, at most 2 full syncs in 4 periods", tookVS.Seconds(), tookRS.Seconds())

		v.RestoreProxierWithin("node2", 60*time.Second)
		// restart-under-load compares the kernel across a restart: leave it settled.
		for _, svc := range svcs {
			v.DeleteService(svc)
		}
	})
}

// realServersAre: the node's TCP virtual server addr:port has exactly want.
func realServersAre(node, addr string, port uint16, want []string) (bool, string) {
	rss, err := realServers(node, ipvs.TCP, addr, port)
	if err != nil {
		return false, err.Error()
	}
	var got []string
	for _, rs := range rss {
		got = append(got, rs.String())
	}
	slices.Sort(got)
	w := slices.Sorted(slices.Values(want))
	return slices.Equal(got, w), fmt.Sprintf("real servers %v", got)
}

// olderRole applies deploy/base's ClusterRole without its row for
// dropped, as ClusterRole name bound to ServiceAccount kube-system/name, and
// writes a kubeconfig with that account's token; it returns the file. The
// scenario deletes the role and its binding when it ends.
func (v *V) olderRole(name, dropped string) string {
	objs, err := cluster.ReadManifests(filepath.Join(guest.repo, "deploy/base"), "kube-system")
	v.Must(err)
	// The daemon's; deploy/base also holds the Node address publisher's.
	var roles []*unstructured.Unstructured
	for _, r := range cluster.FilterKinds(objs, []string{"ClusterRole"}) {
		if r.GetName() == "ipvsproxy" {
			roles = append(roles, r)
		}
	}
	if len(roles) != 1 {
		v.Fatalf("deploy/base has %d ClusterRoles named ipvsproxy, want 1", len(roles))
	}
	role := roles[0].DeepCopy()
	role.SetName(name)
	rules, _, err := unstructured.NestedSlice(role.Object, "rules")
	v.Must(err)
	var kept []any
	for _, r := range rules {
		resources, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
		if !slices.Contains(resources, dropped) {
			kept = append(kept, r)
		}
	}
	if len(kept) != len(rules)-1 {
		v.Fatalf("deploy/base's ClusterRole has no single row for %s", dropped)
	}
	v.Must(unstructured.SetNestedSlice(role.Object, kept, "rules"))
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind":       "ClusterRoleBinding",
		"metadata":   map[string]any{"name": name},
		"roleRef":    map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
		"subjects":   []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}},
	}}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("ADMIN_KUBECONFIG"))
	v.Must(err)
	ctx, cancel := v.s.ctx()
	defer cancel()
	v.Must(cluster.Apply(ctx, cfg, []*unstructured.Unstructured{role, binding}))
	t := v.s.t
	t.Cleanup(func() {
		ctx, cancel := v.s.ctx()
		defer cancel()
		_ = guest.client.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = guest.client.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	})
	out := v.accountKubeconfig(name)
	var rows []string
	for _, r := range kept {
		resources, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
		rows = append(rows, "resources: ["+strings.Join(resources, ",")+"]")
	}
	v.Show("-", "e2ectl apply-rbac --dir rbac49-"+name+"  # deploy/base's ClusterRole without the "+dropped+" row", fmt.Sprintf("%d rows: %s", len(kept), strings.Join(rows, " ")))
	return out
}

// accountKubeconfig writes a kubeconfig with a token of ServiceAccount
// kube-system/name (made if missing), for a process in a node's namespace,
// and returns the file.
func (v *V) accountKubeconfig(name string) string {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("ADMIN_KUBECONFIG"))
	v.Must(err)
	ctx, cancel := v.s.ctx()
	defer cancel()
	account := cluster.ProxierAccount{Namespace: "kube-system", Name: name}
	v.Must(cluster.EnsureServiceAccount(ctx, guest.client, account))
	token, err := cluster.MintToken(ctx, guest.client, account, 24*time.Hour)
	v.Must(err)
	ca := cfg.CAData
	if len(ca) == 0 {
		ca, err = os.ReadFile(cfg.CAFile)
		v.Must(err)
	}
	out := filepath.Join(guest.logs, name+".kubeconfig")
	v.Must(cluster.WriteKubeconfig(out, "https://"+os.Getenv("E2E_HOST_ADDR")+":6443", ca, account.Username(), cluster.Credentials{Token: token}))
	return out
}

// nodeEvents are the messages of the Events with this reason on the Node.
func nodeEvents(node, reason string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := guest.client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node + ",reason=" + reason})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		if !slices.Contains(out, e.Message) {
			out = append(out, e.Message)
		}
	}
	slices.Sort(out)
	return out, nil
}

// scenarioOlderClusterRole: node2 run under a ClusterRole written for an
// earlier version: deploy/base's role without its servicecidrs row (the
// ServiceCIDR informer is optional), then one without its endpointslices
// row (required). With the first, node2 must still sync and serve: the 403
// is "ServiceCIDRs not served" (cluster IPs bound one by one on
// kube-ipvs0), named by a start-up line, a Warning Event on the Node and
// ipvsproxy_api_permission_missing. (Before, one forbidden optional list
// kept the daemon in "Waiting for informers" for ever: no Service on the
// node.) With the second, /readyz and /healthz must name the failing list
// within seconds. node2 then returns to the suite's role.
func scenarioOlderClusterRole(s *S) {
	s.Step("older-clusterrole", "older ClusterRole: without servicecidrs node2 synced and served the cluster IP, bound on kube-ipvs0, with a metric, an Event and a log line; without endpointslices /readyz and /healthz named it", func(v *V) {
		v.Heading("An older ClusterRole: an optional list forbidden is served around; a required one is named on the health endpoints")
		noCIDRs := v.olderRole("ipvsproxy-older", "servicecidrs")
		noSlices := v.olderRole("ipvsproxy-no-slices", "endpointslices")
		svc := v.ApplyService(service("{name: rbac49}", httpPort))
		ip := svc.Spec.ClusterIP
		v.SetEndpoints(svc, "web@node1")

		// The optional list forbidden: node2 syncs and serves, and says what it lacks.
		v.StopProxier("node2", syscall.SIGTERM)
		t0 := time.Now()
		pid := v.LaunchProxier("node2", proxierRun{kubeconfig: noCIDRs})
		synced := "no"
		if err := waitProxierSynced("node2", pid, 120*time.Second); err == nil {
			synced = fmt.Sprintf("after %.1f s", time.Since(t0).Seconds())
		} else {
			v.Errorf("node2 never synced under the role without servicecidrs: %v", err)
		}
		v.Show("node2", "ipvsproxy run --kubeconfig ipvsproxy-older.kubeconfig ...  # first full sync", synced)
		if a := v.Ask("c2", "curl -s --max-time 5 http://"+ip+"/ | grep '^hostname='").Out; a != "hostname=web" {
			v.Errorf("c2 through node2 got '%s', want hostname=web", a)
		}
		bound, _, err := boundOrListed("node2", ip)
		v.Must(err)
		v.Show("node2", "ip addr show kube-ipvs0 | grep "+ip+"  # without ServiceCIDRs each cluster IP is bound; read with the netif package", fmt.Sprintf("bound: %v", bound))
		if !bound {
			v.Errorf("the cluster IP %s is not bound on node2's kube-ipvs0", ip)
		}
		missing, ok := metric("node2", "ipvsproxy_api_permission_missing")
		v.Show("node2", "curl 127.0.0.1:10249/metrics | grep ipvsproxy_api_permission_missing", fmt.Sprintf("%v (exported: %v)", missing, ok))
		if !ok || missing != 1 {
			v.Errorf("ipvsproxy_api_permission_missing is %v (exported: %v), want 1 (servicecidrs)", missing, ok)
		}
		var evs []string
		waitUntil(30*time.Second, func() (bool, string) {
			evs, _ = nodeEvents("node2", "APIPermissionMissing")
			return strings.Contains(strings.Join(evs, "\n"), "servicecidrs"), ""
		})
		v.Show("-", "kubectl get events -A --field-selector involvedObject.name=node2,reason=APIPermissionMissing", strings.Join(evs, "\n"))
		if !strings.Contains(strings.Join(evs, "\n"), "servicecidrs") {
			v.Errorf("no APIPermissionMissing Event on Node node2 naming servicecidrs")
		}
		logged := v.Ask("-", "grep -c 'missingRule=.*servicecidrs' "+proxierLog("node2")).Out
		if n, _ := strconv.Atoi(logged); n < 1 {
			v.Errorf("no log line names the missing servicecidrs rule")
		}

		// A required list forbidden: the health endpoints name it within seconds.
		v.StopProxier("node2", syscall.SIGTERM)
		t0 = time.Now()
		v.LaunchProxier("node2", proxierRun{kubeconfig: noSlices})
		named := "no"
		if ok, _ := waitUntil(30*time.Second, func() (bool, string) {
			return strings.Contains(run("node2", "curl -s --max-time 2 http://127.0.0.1:10256/readyz").Out, "endpointslices"), ""
		}); ok {
			named = fmt.Sprintf("after %.1f s", time.Since(t0).Seconds())
		} else {
			v.Errorf("/readyz did not name endpointslices within 30 s")
		}
		health := func(path string) string {
			return strings.ReplaceAll(run("node2", "curl -s --max-time 3 -w ' %{http_code}' http://127.0.0.1:10256"+path).Out, "\n", " ")
		}
		readyz, healthz := health("/readyz"), health("/healthz")
		cut := func(s string) string { return s[:min(len(s), 160)] }
		v.Show("node2", "curl 127.0.0.1:10256/readyz; curl 127.0.0.1:10256/healthz  # role without endpointslices",
			"named "+named+"; readyz: "+cut(readyz)+"; healthz: "+cut(healthz))
		if !strings.Contains(readyz, "endpointslices") || !strings.HasSuffix(readyz, " 503") {
			v.Errorf("/readyz is not 503 naming endpointslices: %s", readyz)
		}
		if !strings.Contains(healthz, "endpointslices") || !strings.HasSuffix(healthz, " 503") {
			v.Errorf("/healthz is not 503 naming endpointslices: %s", healthz)
		}

		v.RestoreProxier("node2")
		v.about = fmt.Sprintf("older ClusterRole: without servicecidrs node2 synced (%s) and served %s, bound on kube-ipvs0, with a metric, an Event and a log line; without endpointslices /readyz and /healthz named it (%s)", synced, ip, named)
	})
}

// kubeadmConfig is kubeadm v1.36's default config.conf
// (cmd/ipvsproxy/testdata/kubeadm-config.conf) edited as an IPVS cluster
// has it: this mode and scheduler, the suite's sync periods and kubeconfig,
// conntrack timeouts, and one Windows-only field the daemon must name in
// its start-up warning.
func kubeadmConfig(scheduler, mode string) (string, error) {
	b, err := os.ReadFile(filepath.Join(guest.repo, "cmd/ipvsproxy/testdata/kubeadm-config.conf"))
	if err != nil {
		return "", err
	}
	// section → line → replacement; section "" is any.
	edits := map[string]map[string]string{
		"": {
			"  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf": "  kubeconfig: " + os.Getenv("PROXIER_KUBECONFIG"),
			`mode: ""`: "mode: " + mode,
		},
		"ipvs": {
			`  scheduler: ""`:     "  scheduler: " + scheduler,
			"  syncPeriod: 0s":    "  syncPeriod: " + syncPeriod.String(),
			"  minSyncPeriod: 0s": "  minSyncPeriod: " + minSyncPeriod.String(),
		},
		"conntrack": {
			"  tcpEstablishedTimeout: null": "  tcpEstablishedTimeout: 2h",
			"  udpTimeout: 0s":              "  udpTimeout: 45s",
		},
		"winkernel": {"  enableDSR: false": "  enableDSR: true"},
	}
	lines := strings.Split(string(b), "\n")
	section := ""
	for i, l := range lines {
		if l != "" && l[0] != ' ' {
			section, _, _ = strings.Cut(l, ":")
		}
		if r, ok := edits[""][l]; ok {
			lines[i] = r
		} else if r, ok := edits[section][l]; ok {
			lines[i] = r
		}
	}
	return strings.Join(lines, "\n"), nil
}

// writeAtomically replaces path as a ConfigMap volume changes a file: a
// rename over it.
func writeAtomically(path, text string) error {
	if err := os.WriteFile(path+".tmp", []byte(text), 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// logSince is the node's daemon log from line from (1-based) on.
func logSince(node string, from int) string {
	lines := strings.Split(readFile(proxierLog(node)), "\n")
	if from-1 > len(lines) {
		return ""
	}
	return strings.Join(lines[from-1:], "\n")
}

// scheduler is the scheduler of the node's TCP virtual server addr:port
// ("" when there is none).
func scheduler(node, addr string, port uint16) string {
	vs, err := virtualServer(node, ipvs.TCP, addr, port)
	if err != nil {
		return ""
	}
	return vs.Scheduler
}

// scenarioConfigFile: kube-proxy's own configuration drives the daemon.
// node2's daemon is started the way kubeadm's kube-proxy DaemonSet starts
// kube-proxy: `--config config.conf --hostname-override NODE`, config.conf
// being kubeadmConfig. Then the file is changed twice, as a ConfigMap volume
// changes (an atomic rename): a broken edit is logged and waited out, a
// valid one, with fields this build does not know, restarts the daemon in
// place (same pid, exec) with the new scheduler and a warning naming those
// fields. node2 gets its usual daemon back at the end.
func scenarioConfigFile(s *S) {
	s.Step("kubeadm-config-file", "--config kubeadm's config.conf: refused for mode iptables; rr and conntrack timeouts applied; unhonoured field named; typo waited out; change with a newer release's fields restarts in place, naming them", func(v *V) {
		v.Heading("kube-proxy's config.conf drives the daemon; a change restarts it")
		dir := "/run/e2e-config40"
		v.Must(os.MkdirAll(dir, 0o755))
		s.t.Cleanup(func() { os.RemoveAll(dir) })
		conf := filepath.Join(dir, "config.conf")
		svc := v.ApplyService(service("{name: config40}", httpPort))
		ip := svc.Spec.ClusterIP
		v.SetEndpoints(svc, "s2@node2")

		// A file kube-proxy would refuse to run as IPVS is refused before anything is touched.
		text, err := kubeadmConfig("rr", "iptables")
		v.Must(err)
		v.Must(writeAtomically(filepath.Join(dir, "iptables.conf"), text))
		refused := v.Ask("node2", "timeout 20 ipvsproxy run --config "+dir+"/iptables.conf --hostname-override node2")
		if refused.Status == 0 || !strings.Contains(refused.Out, "implements only the ipvs mode") {
			v.Errorf("mode: iptables was not refused clearly: %s (exit %d)", oneline(refused.Out), refused.Status)
		}

		text, err = kubeadmConfig("rr", "ipvs")
		v.Must(err)
		v.Must(writeAtomically(conf, text))
		v.Show("-", "diff kubeadm-config.conf config.conf  # kubeadm v1.36's default, edited",
			run("-", "diff "+filepath.Join(guest.repo, "cmd/ipvsproxy/testdata/kubeadm-config.conf")+" "+conf+" | grep '^>'").Out)
		v.StopProxier("node2", syscall.SIGTERM)
		logFrom := strings.Count(readFile(proxierLog("node2")), "\n") + 1
		pid := v.LaunchProxier("node2", proxierRun{config: conf})
		if err := waitProxierSynced("node2", pid, 120*time.Second); err != nil {
			v.Errorf("the daemon started from the file never synced: %v", err)
		}
		waitUntil(30*time.Second, func() (bool, string) { return scheduler("node2", ip, 80) == "rr", "" })
		sched1 := scheduler("node2", ip, 80)
		v.Show("node2", "ipvsadm -Ln -t "+ip+":80  # read with the ipvs package", "scheduler "+sched1)
		if sched1 != "rr" {
			v.Errorf("scheduler from the file: '%s', want rr", sched1)
		}
		timeouts := strings.Join(strings.Fields(v.Ask("node2", "cat /proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established /proc/sys/net/netfilter/nf_conntrack_udp_timeout").Out), " ")
		if timeouts != "7200 45" {
			v.Errorf("conntrack timeouts: '%s', want 7200 45", timeouts)
		}
		if code := v.Ask("c2", "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://"+ip+"/").Out; code != "200" {
			v.Errorf("service answered %s", code)
		}
		warning := ""
		for _, l := range strings.Split(logSince("node2", logFrom), "\n") {
			if strings.Contains(l, "does not honour these KubeProxyConfiguration fields") {
				warning = l
				break
			}
		}
		v.Show("node2", "grep 'does not honour' ipvsproxy.log", warning)
		if !strings.Contains(warning, "winkernel.enableDSR=true") {
			v.Errorf("no start-up warning naming winkernel.enableDSR: '%s'", warning)
		}
		if strings.Contains(warning, "ipvs.") || strings.Contains(warning, "conntrack.") {
			v.Errorf("the warning names a field that is honoured: %s", warning)
		}

		// A broken edit (a known field in another case, which would be lost) is waited out;
		// the daemon keeps running as it was.
		v.Must(writeAtomically(conf, text+"ClusterCidr: 10.244.0.0/16\n"))
		waitUntil(20*time.Second, func() (bool, string) {
			return strings.Contains(logSince("node2", logFrom), "not valid; keeping the running configuration"), ""
		})
		keptLine := ""
		if i := strings.Index(logSince("node2", logFrom), "not valid; keeping"); i >= 0 {
			keptLine, _, _ = strings.Cut(logSince("node2", logFrom)[i:], "\n")
		}
		v.Show("node2", "echo 'ClusterCidr: 10.244.0.0/16' >> config.conf  # a typo", keptLine)
		if !alive(pid) || scheduler("node2", ip, 80) != "rr" {
			v.Errorf("a broken edit disturbed the running daemon")
		}
		if !strings.Contains(keptLine, `did you mean \"clusterCIDR\"`) {
			v.Errorf("the refusal does not name the field meant: %s", keptLine)
		}

		// A valid edit with fields of a newer release (as a newer kubeadm writes them)
		// restarts the daemon in place with the new scheduler and a warning naming them.
		t0 := time.Now()
		text, err = kubeadmConfig("wrr", "ipvs")
		v.Must(err)
		text = strings.Replace(text, "ipvs:\n", "ipvs:\n  connectionReuse: keep\n", 1) + "nodeProxyPolicy:\n  mode: Strict\n"
		v.Must(writeAtomically(conf, text))
		waitUntil(60*time.Second, func() (bool, string) { return scheduler("node2", ip, 80) == "wrr", "" })
		took := time.Since(t0)
		sched2 := scheduler("node2", ip, 80)
		v.Show("node2", fmt.Sprintf("ipvsadm -Ln -t %s:80  # after scheduler: wrr, %.1fs; read with the ipvs package", ip, took.Seconds()), "scheduler "+sched2)
		if sched2 != "wrr" {
			v.Errorf("after the change the scheduler is '%s', want wrr", sched2)
		}
		cmdline := strings.ReplaceAll(readFile(fmt.Sprintf("/proc/%d/cmdline", pid)), "\x00", " ")
		if !alive(pid) || !strings.Contains(cmdline, "run --config "+conf) {
			v.Errorf("the daemon did not restart in place (pid changed or gone)")
		}
		if n := strings.Count(logSince("node2", logFrom), "changed; restarting to apply it"); n != 1 {
			v.Errorf("restarts logged: %d, want 1", n)
		}
		waitProxierSynced("node2", pid, 120*time.Second)
		if code := v.Ask("c2", "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://"+ip+"/").Out; code != "200" {
			v.Errorf("service answered %s after the restart", code)
		}
		unknown := ""
		for _, l := range strings.Split(logSince("node2", logFrom), "\n") {
			if strings.Contains(l, "does not know these KubeProxyConfiguration fields") {
				unknown = l
			}
		}
		v.Show("node2", "grep 'does not know' ipvsproxy.log", unknown)
		if !strings.Contains(unknown, "ipvs.connectionReuse; nodeProxyPolicy") {
			v.Errorf("no start-up warning naming ipvs.connectionReuse and nodeProxyPolicy: '%s'", unknown)
		}

		// node2's usual daemon again, for the scenarios after this one.
		v.RestoreProxier("node2")
	})
}

// The load balancer of ipmode-proxy: a proxy (socat in namespace lb) on a
// VIP of each family, to node1's node port of that family.
const (
	proxyVIP      = "203.0.113.141"
	proxyVIP6     = "2001:db8:113::141"
	proxyPort     = 8139
	proxyNodePort = 30139
	lbAddr        = "198.51.100.140"
	lbAddr6       = "2001:db8:1::140"
)

// SetIngresses writes status.loadBalancer.ingress with these IPs, each with
// ipMode (VIP or Proxy, KEP-1860) when not "" (absent means VIP).
func (v *V) SetIngresses(svc *v1.Service, ipMode string, ips ...string) {
	var ingress []map[string]string
	for _, ip := range ips {
		e := map[string]string{"ip": ip}
		if ipMode != "" {
			e["ipMode"] = ipMode
		}
		ingress = append(ingress, e)
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": ingress}}})
	v.Must(err)
	ctx, cancel := v.s.ctx()
	defer cancel()
	if _, err := guest.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		v.Fatalf("set status.loadBalancer.ingress of %s: %v", svc.Name, err)
	}
	v.Show("-", "kubectl patch service "+svc.Name+" --subresource status --type merge -p '"+string(patch)+"'", "")
}

// familyOf is the family of an address.
func familyOf(addr string) ipFamily {
	if strings.Contains(addr, ":") {
		return 6
	}
	return 4
}

// waitRealServers waits up to 30 s until the node's TCP virtual server
// addr:port has exactly want (IP:PORT, [IP]:PORT for IPv6); a failure goes
// to the address family's verdict.
func (d *dual) waitRealServers(node, addr string, port uint16, want ...string) {
	ok, last := waitUntil(30*time.Second, func() (bool, string) { return realServersAre(node, addr, port, want) })
	if !ok {
		d.Errorf(familyOf(addr), "after 30s, %s's %s has not exactly %v: %s", node, hostPort(addr, int(port)), want, last)
	}
}

// addressState is "bound=N vs=N": whether addr is on the node's kube-ipvs0
// and how many virtual servers have it, read with the netif and ipvs
// packages.
func (v *V) addressState(node, addr string) string {
	a := netip.MustParseAddr(addr)
	bound := 0
	v.Must(inNamespace(node, func(h netns.NsHandle) error {
		k, err := netif.NewInNamespace("kube-ipvs0", h)
		if err != nil {
			return err
		}
		if c, ok := k.(interface{ Close() error }); ok {
			defer c.Close()
		}
		addrs, err := k.DummyAddresses()
		if slices.Contains(addrs, a) {
			bound = 1
		}
		return err
	}))
	vss, err := virtualServers(node)
	v.Must(err)
	n := 0
	for _, vs := range vss {
		if vs.Address == a {
			n++
		}
	}
	state := fmt.Sprintf("bound=%d vs=%d", bound, n)
	v.Show(node, "ip addr show dev kube-ipvs0 | grep -c "+addr+"; ipvsadm -Ln | grep -c "+addr+"  # read with the netif and ipvs packages", state)
	return state
}

// HTTPAsk is the body's client_address= and hostname= lines of url from
// where, sorted, on one line ("client_address=... hostname=web").
func (v *V) HTTPAsk(where, url string) string {
	return v.Ask(where, "curl -gsS --max-time 5 "+url+" | grep -E '^(hostname|client_address)=' | sort | tr '\\n' ' ' | sed 's/ $//'; exit ${PIPESTATUS[0]}").Out
}

// scenarioIPModeProxy: a LoadBalancer (externalTrafficPolicy Local) whose
// ingress has `ipMode: Proxy` (KEP-1860). Such a load balancer is a proxy
// that delivers to the node port itself, so kube-proxy does not make the
// ingress IP local on the nodes, and neither may ipvsproxy: were it bound,
// a pod's connection to the IP would be served by its own node and never
// reach the load balancer (its PROXY protocol, TLS, ...). The load balancer
// here is socat in namespace lb on a VIP of each family, forwarding to
// node1's node port; nodes and the lb route to each other for the pod's
// traffic. The server sees the proxy's address (Local policy keeps the
// source) from the outside client and from pod c1 alike. As a control the
// ingress then loses its ipMode (VIP): node1 binds the VIPs and c1's
// connection is served by node1 with c1's address, the very difference the
// first half measures.
func scenarioIPModeProxy(s *S) {
	s.DualStep("ipmode-proxy", "ipMode Proxy (Local): "+proxyVIP+" neither bound nor a virtual server on either node; the client and pod c1 both reach web through the lb's proxy and node1's node port; in VIP mode node1 serves c1 itself",
		"ipMode Proxy (Local) over IPv6: "+proxyVIP6+" neither bound nor a virtual server on either node; the client and pod c1 both reach web through the lb's proxy (web sees "+lbAddr6+") and node1's IPv6 node port; in VIP mode node1 serves c1 itself (web sees "+ipFamily(6).pod("c1")+")",
		func(v *V, d *dual) {
			v.Heading("ipMode Proxy: the load balancer's IPs are not local on the nodes; traffic comes through its node port")
			svc := v.ApplyService(service("{name: ipmode-proxy}", "type: LoadBalancer", "externalTrafficPolicy: Local", "ipFamilyPolicy: RequireDualStack",
				fmt.Sprintf("ports: [{port: %d, targetPort: 8080, nodePort: %d, protocol: TCP}]", proxyPort, proxyNodePort)))
			v.Show("-", fmt.Sprintf("e2ectl apply-service ipmode-proxy.yaml  # LoadBalancer, Local, port %d, nodePort %d, RequireDualStack", proxyPort, proxyNodePort),
				serviceInfo(svc, "TYPE", "CLUSTER_IPS", "EXTERNAL_TRAFFIC_POLICY", "HEALTH_CHECK_NODE_PORT"))
			v.SetIngresses(svc, "Proxy", proxyVIP, proxyVIP6)
			// The endpoints after the status: once their real server is programmed, the proxier
			// has seen the ingress too.
			v.SetDualEndpoints(svc, "web@node1")
			v.Show("-", "e2ectl set-endpoints ipmode-proxy "+podIP("web")+"@node1 "+ipFamily(6).pod("web")+"@node1", "")
			for _, f := range families {
				for _, node := range []string{"node1", "node2"} {
					d.waitRealServers(node, f.node(node), proxyNodePort, hostPort(f.pod("web"), 8080))
				}
			}

			// The load balancer: a proxy on each of its VIPs to node1's node port of that family.
			setup := []string{
				"ip -n lb addr add " + proxyVIP + "/32 dev lo",
				"ip -n lb addr add " + proxyVIP6 + "/128 dev lo nodad",
				"ip -n node1 route add " + proxyVIP + "/32 via " + lbAddr,
				"ip -n node1 route add " + proxyVIP6 + "/128 via " + lbAddr6,
				"ip -n lb route add 10.244.1.0/24 via " + node1Addr,
				"ip -n lb route add 2001:db8:244:1::/64 via " + ipFamily(6).node("node1"),
			}
			s.t.Cleanup(func() {
				for i := len(setup) - 1; i >= 0; i-- {
					run("-", strings.Replace(strings.Replace(setup[i], " add ", " del ", 1), " nodad", "", 1))
				}
			})
			for _, c := range setup {
				if a := run("-", c); a.Status != 0 {
					v.Fatalf("%s: %s", c, a.Out)
				}
			}
			lbLog := filepath.Join(guest.logs, "ipmode-proxy-lb.log")
			proxy4 := fmt.Sprintf("socat TCP-LISTEN:%d,bind=%s,reuseaddr,fork TCP:%s:%d", proxyPort, proxyVIP, node1Addr, proxyNodePort)
			proxy6 := fmt.Sprintf("socat TCP6-LISTEN:%d,bind=[%s],ipv6only=1,reuseaddr,fork TCP6:[%s]:%d", proxyPort, proxyVIP6, ipFamily(6).node("node1"), proxyNodePort)
			lb4 := startBackground(v, "lb", lbLog, proxy4)
			lb6 := startBackground(v, "lb", lbLog+"6", proxy6)
			v.Show("lb", proxy4+" & "+proxy6+" &  # the load balancer, a proxy", "")
			if ok, _ := waitUntil(10*time.Second, func() (bool, string) {
				return run("lb", fmt.Sprintf("ss -Hltn 'sport = :%d' | grep -c .", proxyPort)).Out == "2", ""
			}); !ok {
				d.Errorf(4, "the lb's proxies never both listened")
			}

			for _, node := range []string{"node1", "node2"} {
				for _, f := range families {
					vip := map[ipFamily]string{4: proxyVIP, 6: proxyVIP6}[f]
					if st := v.addressState(node, vip); st != "bound=0 vs=0" {
						d.Errorf(f, "%s: %s (ipMode Proxy) is local there: %s, want bound=0 vs=0", node, vip, st)
					}
				}
			}
			for _, f := range families {
				vip := map[ipFamily]string{4: proxyVIP, 6: proxyVIP6}[f]
				lb := map[ipFamily]string{4: lbAddr, 6: lbAddr6}[f]
				url := "http://" + hostPort(vip, proxyPort) + "/"
				want := "client_address=" + lb + " hostname=web"
				if a := v.HTTPAsk("client", url); a != want {
					d.Errorf(f, "client -> %s: '%s', want %s (through the lb's proxy)", hostPort(vip, proxyPort), a, want)
				}
				if a := v.HTTPAsk("c1", url); a != want {
					d.Errorf(f, "c1 -> %s: '%s', want %s (through the lb, not node1's IPVS)", hostPort(vip, proxyPort), a, want)
				}
			}

			// Control: ipMode VIP (the field dropped) makes node1 serve the IPs itself.
			v.SetIngresses(svc, "", proxyVIP, proxyVIP6)
			for _, f := range families {
				vip := map[ipFamily]string{4: proxyVIP, 6: proxyVIP6}[f]
				d.waitRealServers("node1", vip, proxyPort, hostPort(f.pod("web"), 8080))
				if st := v.addressState("node1", vip); st != "bound=1 vs=1" {
					d.Errorf(f, "node1 in VIP mode: %s %s, want bound=1 vs=1", vip, st)
				}
			}
			for _, f := range families {
				vip := map[ipFamily]string{4: proxyVIP, 6: proxyVIP6}[f]
				want := "client_address=" + f.pod("c1") + " hostname=web"
				if a := v.HTTPAsk("c1", "http://"+hostPort(vip, proxyPort)+"/"); a != want {
					d.Errorf(f, "c1 -> %s in VIP mode: '%s', want %s (node1's IPVS)", hostPort(vip, proxyPort), a, want)
				}
			}

			lb4.stop()
			lb6.stop()
			v.DeleteService(svc)
			for _, f := range families {
				vip := map[ipFamily]string{4: proxyVIP, 6: proxyVIP6}[f]
				d.waitGone(vip, 60*time.Second)
			}
		})
}

// waitGone waits until neither node has a virtual server at addr; a failure
// goes to the address family's verdict.
func (d *dual) waitGone(addr string, limit time.Duration) {
	a := netip.MustParseAddr(addr)
	for _, node := range []string{"node1", "node2"} {
		ok, last := waitUntil(limit, func() (bool, string) {
			vss, err := virtualServers(node)
			if err != nil {
				return false, err.Error()
			}
			for _, vs := range vss {
				if vs.Address == a {
					return false, "still has " + vs.String()
				}
			}
			return true, ""
		})
		if !ok {
			d.Errorf(familyOf(addr), "%s %s %s after its Service was deleted", node, last, limit)
		}
	}
}

// scenarioMasqueradeAll: --masquerade-all on node2: a pod's connection to a
// cluster IP is source-NATed, so web (on node1) sees node2's address where
// it saw c2's before; node1, without the flag, still keeps c1's. node2 goes
// back to the suite's flags and c2's address is kept again. On both
// families of a RequireDualStack Service.
func scenarioMasqueradeAll(s *S) {
	s.DualStep("masquerade-all", "masquerade-all on node2: web sees "+node2Addr+" for c2's cluster-IP connection (c2's own address before and after); c1 through node1 keeps its address",
		"masquerade-all on node2 over IPv6: web sees "+ipFamily(6).node("node2")+" for c2's connection to the IPv6 cluster IP (c2's own IPv6 address before and after); c1 through node1 keeps its IPv6 address",
		func(v *V, d *dual) {
			v.Heading("--masquerade-all: a pod's connection to a cluster IP is source-NATed, on both families")
			svc := v.ApplyService(service("{name: masq-all}", "type: ClusterIP", "ipFamilyPolicy: RequireDualStack", httpPort))
			v.SetDualEndpoints(svc, "web@node1")
			v.Show("-", "e2ectl apply-service masq-all.yaml && e2ectl set-endpoints masq-all "+podIP("web")+"@node1 "+ipFamily(6).pod("web")+"@node1  # ClusterIP 80 -> 8080, RequireDualStack",
				serviceInfo(svc, "CLUSTER_IPS"))
			waitBoth := func() {
				for _, f := range families {
					d.waitRealServers("node2", f.clusterIP(svc), 80, hostPort(f.pod("web"), 8080))
				}
			}
			check := func(where string, want func(ipFamily) string, when string) {
				for _, f := range families {
					url := "http://" + hostPort(f.clusterIP(svc), 80) + "/"
					if a := v.HTTPAsk(where, url); a != "client_address="+want(f)+" hostname=web" {
						d.Errorf(f, "%s -> %s %s: '%s', want client_address=%s hostname=web", where, f.clusterIP(svc), when, a, want(f))
					}
				}
			}
			c2 := func(f ipFamily) string { return f.pod("c2") }
			waitBoth()
			check("c2", c2, "before")

			v.RestartProxier("node2", proxierRun{extra: []string{"--masquerade-all"}})
			waitBoth()
			check("c2", func(f ipFamily) string { return f.node("node2") }, "with --masquerade-all on node2 (SNAT)")
			check("c1", func(f ipFamily) string { return f.pod("c1") }, "(node1 without the flag)")

			v.RestoreProxier("node2")
			check("c2", c2, "after node2's flags were restored")

			v.DeleteService(svc)
		})
}
