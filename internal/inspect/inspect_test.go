package inspect

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/rules"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// node is one node (node1, 198.51.100.1) whose proxier synced onto the
// fakes; inspect reads those same fakes, as it reads the kernel.
type node struct {
	ipvs      *ipvs.Fake
	netif     *netif.Fake
	ipset     *ipset.Fake
	conntrack *conntrack.Fake
	proxier   *proxier.Proxier
	objects   []any
}

var (
	webVS   = ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80}
	web1    = ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.1.5"), Port: 8080}
	web2    = ipvs.RealServerKey{Address: netip.MustParseAddr("10.244.2.7"), Port: 8080}
	created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func newNode(t *testing.T) *node {
	t.Helper()
	return newNodeWith(t, func(*ipvsproxy.Config) {})
}

// newNodeWith is newNode with the configuration changed by edit.
func newNodeWith(t *testing.T, edit func(*ipvsproxy.Config)) *node {
	t.Helper()
	n := &node{ipvs: ipvs.NewFake(), netif: netif.NewFake(owned.DummyInterface), ipset: ipset.NewFake(), conntrack: conntrack.NewFake()}
	n.netif.SetHostAddresses(netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("198.51.100.1"))
	cfg := ipvsproxy.DefaultConfig()
	cfg.ClusterCIDRs = []netip.Prefix{servicetest.PodCIDR}
	edit(&cfg)
	p, err := proxier.New(cfg, "node1", adapters.Kernel{
		IPVS: n.ipvs, Netif: n.netif, IPSet: n.ipset, Conntrack: n.conntrack, Sysctl: sysctl.NewFake(nil),
		IPTables: map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: iptables.NewFake(iptables.IPv4)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	web := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
			Ports:                 []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}},
	}
	ready, terminating := true, false
	node1, node2 := "node1", "node2"
	port, name, proto := int32(8080), "http", v1.ProtocolTCP
	slice := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-a", Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.244.1.5"}, NodeName: &node1, Conditions: discovery.EndpointConditions{Ready: &ready, Serving: &ready, Terminating: &terminating}},
			{Addresses: []string{"10.244.2.7"}, NodeName: &node2, Conditions: discovery.EndpointConditions{Ready: &ready, Serving: &ready, Terminating: &terminating}},
		},
	}
	n.objects = []any{web, slice}
	n.start(t, p)
	return n
}

// start feeds the objects to a proxier on the node's fakes and syncs it.
func (n *node) start(t *testing.T, p *proxier.Proxier) {
	t.Helper()
	n.proxier = p
	// Present in every live cluster; without it the proxier deletes
	// nothing. Headless: it adds nothing to the kernel.
	p.Tracker().SetService(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"}, Spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone}})
	for _, o := range n.objects {
		switch o := o.(type) {
		case *v1.Service:
			p.Tracker().SetService(o)
		case *discovery.EndpointSlice:
			p.Tracker().SetEndpointSlice(o)
		}
	}
	if res := p.Sync(); res.Err() != nil {
		t.Fatal(res.Err())
	}
}

// restart starts a new proxier on the same fakes: its first sync is full.
func (n *node) restart(t *testing.T) {
	t.Helper()
	p, err := proxier.New(n.proxier.Config(), "node1", adapters.Kernel{
		IPVS: n.ipvs, Netif: n.netif, IPSet: n.ipset, Conntrack: n.conntrack, Sysctl: sysctl.NewFake(nil),
		IPTables: map[v1.IPFamily]iptables.Interface{v1.IPv4Protocol: iptables.NewFake(iptables.IPv4)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.start(t, p)
}

func (n *node) kernel() Kernel {
	return Kernel{IPVS: n.ipvs, Addresses: n.netif, Sets: n.ipset, Flows: n.conntrack}
}

func (n *node) read(t *testing.T) KernelState {
	t.Helper()
	k, err := ReadKernel(n.kernel())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (n *node) report(t *testing.T) Report {
	t.Helper()
	snap := n.proxier.Snapshot()
	now := time.Now()
	// The fakes' sync ran on the wall clock: fix its times for golden files.
	snap.Status.LastFullSync, snap.Status.LastSyncDuration = now.Add(-5*time.Second), 3*time.Millisecond
	r := NewReport(n.read(t), &snap, "daemon http://127.0.0.1:10249/inspect/v1/snapshot", now)
	r.Time, r.Status.LastFullSync = created.Add(5*time.Second), created
	return r
}

// traffic: two connections through web1, one flow in conntrack.
func (n *node) traffic(t *testing.T) {
	t.Helper()
	if err := n.ipvs.AddTraffic(webVS, web1, ipvs.Stats{Connections: 2, PacketsIn: 12, PacketsOut: 10, BytesIn: 900, BytesOut: 4000}); err != nil {
		t.Fatal(err)
	}
	if err := n.ipvs.SetConnections(webVS, web1, 1, 1); err != nil {
		t.Fatal(err)
	}
	err := n.conntrack.AddFlow(conntrack.Flow{Protocol: conntrack.TCP, OrigSrc: netip.MustParseAddrPort("10.244.1.20:40000"),
		OrigDst: netip.MustParseAddrPort("10.96.0.10:80"), ReplySrc: netip.MustParseAddrPort("10.244.1.5:8080"),
		ReplyDst: netip.MustParseAddrPort("10.244.1.20:40000"), State: "ESTABLISHED", Timeout: 86399 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTableNamesEveryServiceAndEndpoint(t *testing.T) {
	n := newNode(t)
	n.traffic(t)
	var b bytes.Buffer
	if err := WriteTable(&b, n.report(t), TableOptions{Stats: true}); err != nil {
		t.Fatal(err)
	}
	servicetest.CheckGolden(t, filepath.Join("testdata", "table.txt"), b.String())
}

func TestTableWithoutNamesShowsTheKernel(t *testing.T) {
	n := newNode(t)
	r := NewReport(n.read(t), nil, "", created)
	var b bytes.Buffer
	if err := WriteTable(&b, r, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "unnamed kernel view") || !strings.Contains(out, "<unknown>") || strings.Contains(out, "default/web") || !strings.Contains(out, "TCP 10.96.0.10:80") {
		t.Fatalf("unnamed table:\n%s", out)
	}
	if err := r.Filter("default/web", ""); err == nil || !strings.Contains(err.Error(), "no names") {
		t.Fatalf("filter by Service without names: %v", err)
	}
}

// The JSON schema is versioned: this golden file is its contract
// (docs/inspect.md). A change that renames or removes a field needs a new
// APIVersion.
func TestJSONSchema(t *testing.T) {
	n := newNode(t)
	n.traffic(t)
	r := n.report(t)
	var b bytes.Buffer
	if err := Encode(&b, FormatJSON, r); err != nil {
		t.Fatal(err)
	}
	servicetest.CheckGolden(t, filepath.Join("testdata", "report.json"), b.String())
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.APIVersion != APIVersion || len(back.VirtualServers) != len(r.VirtualServers) {
		t.Fatalf("round trip: %v %+v", err, back)
	}
	var y bytes.Buffer
	if err := Encode(&y, FormatYAML, r); err != nil || !strings.Contains(y.String(), "apiVersion: "+APIVersion) || !strings.Contains(y.String(), "service: default/web") {
		t.Fatalf("yaml: %v\n%s", err, y.String())
	}
}

func TestFilter(t *testing.T) {
	n := newNode(t)
	r := n.report(t)
	if err := r.Filter("", "198.51.100.1:30080"); err != nil || len(r.VirtualServers) != 1 || r.VirtualServers[0].Type != ipvsproxy.KindNodePort.String() {
		t.Fatalf("--vip 198.51.100.1:30080: %v %+v", err, r.VirtualServers)
	}
	r = n.report(t)
	if err := r.Filter("web", ""); err != nil || len(r.VirtualServers) != 2 {
		t.Fatalf("--service web: %v %+v", err, r.VirtualServers)
	}
	r = n.report(t)
	if err := r.Filter("default/nosuch", ""); err == nil || !strings.Contains(err.Error(), "unknown Service default/nosuch") {
		t.Fatalf("--service default/nosuch: %v", err)
	}
	if err := r.Filter("", "not-an-address"); err == nil {
		t.Fatal("--vip not-an-address accepted")
	}
}

func TestCheck(t *testing.T) {
	n := newNode(t)
	check := func() CheckResult { return Check(n.read(t), n.proxier.Snapshot()) }
	if res := check(); res.ExitCode() != CheckAgree || len(res.Differences) != 0 {
		t.Fatalf("after a sync: %+v", res)
	}
	// A foreign virtual server (not on kube-ipvs0, not a node port) is
	// listed, never a difference.
	foreign := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("192.0.2.80"), Port: 80}
	if err := n.ipvs.AddVirtualServer(ipvs.VirtualServer{VirtualServerKey: foreign, Scheduler: "rr"}); err != nil {
		t.Fatal(err)
	}
	if res := check(); res.ExitCode() != CheckAgree || len(res.Foreign) != 1 {
		t.Fatalf("with a foreign virtual server: %+v", res)
	}
	// Someone deletes a real server, reweights another, and adds an address.
	if err := n.ipvs.DeleteRealServer(webVS, web2); err != nil {
		t.Fatal(err)
	}
	if err := n.ipvs.UpdateRealServer(webVS, ipvs.RealServer{RealServerKey: web1, Weight: 5}); err != nil {
		t.Fatal(err)
	}
	if err := n.netif.AddDummyAddress(netip.MustParseAddr("10.96.0.99")); err != nil {
		t.Fatal(err)
	}
	res := check()
	var got []string
	for _, d := range res.Differences {
		got = append(got, d.String())
	}
	want := []string{
		"extra address 10.96.0.99 on kube-ipvs0: want none, have bound",
		"wrong-weight real server 10.244.1.5:8080 of TCP 10.96.0.10:80 (default/web:http): want weight 1, have weight 5",
		"missing real server 10.244.2.7:8080 of TCP 10.96.0.10:80 (default/web:http): want weight 1, have none",
	}
	if res.ExitCode() != CheckDiffer || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("differences:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// An ipset member gone, and a virtual server gone.
	if err := n.ipset.DeleteEntry("KUBE-CLUSTER-IP", ipset.Entry{IP: webVS.Address, Protocol: "tcp", Port: 80}); err != nil {
		t.Fatal(err)
	}
	nodePortVS := ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("198.51.100.1"), Port: 30080}
	if err := n.ipvs.DeleteVirtualServer(nodePortVS); err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, d := range check().Differences {
		text += d.String() + "\n"
	}
	for _, w := range []string{"missing member 10.96.0.10,tcp:80 of ipset KUBE-CLUSTER-IP", "missing virtual server TCP 198.51.100.1:30080 (default/web:http)"} {
		if !strings.Contains(text, w) {
			t.Errorf("differences lack %q:\n%s", w, text)
		}
	}
	// A full sync (here: a restart's first) repairs everything but the
	// foreign virtual server; the address on kube-ipvs0 was the proxier's.
	n.restart(t)
	if res := check(); res.ExitCode() != CheckAgree || len(res.Foreign) != 1 {
		t.Fatalf("after the repairing sync: %+v", res.Differences)
	}
}

// A routed Service CIDR (ipvsproxy/routes.go) is shown beside the bound
// addresses, and --check finds its route missing or one left over.
func TestServiceCIDRRoutesShownAndChecked(t *testing.T) {
	routed := netip.MustParsePrefix("10.96.0.0/16")
	n := newNodeWith(t, func(c *ipvsproxy.Config) { c.ServiceCIDRs = []netip.Prefix{routed} })
	r := n.report(t)
	if len(r.Routes) != 1 || r.Routes[0] != (Route{CIDR: "10.96.0.0/16", InKernel: true, Desired: true}) {
		t.Fatalf("routes: %+v", r.Routes)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, r, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	// The cluster IP is not bound; the range's anchor address is.
	if !strings.Contains(b.String(), "kube-ipvs0: 1 addresses bound, 1 desired; Service CIDRs routed local: 10.96.0.0/16\n") {
		t.Fatalf("table:\n%s", b.String())
	}
	check := func() string {
		var got []string
		for _, d := range Check(n.read(t), n.proxier.Snapshot()).Differences {
			got = append(got, d.String())
		}
		return strings.Join(got, "\n")
	}
	if got := check(); got != "" {
		t.Fatalf("after a sync: %s", got)
	}
	if err := n.netif.DeleteServiceRoute(routed); err != nil {
		t.Fatal(err)
	}
	if got, want := check(), "missing local route 10.96.0.0/16 on kube-ipvs0: want routed, have none"; got != want {
		t.Fatalf("route deleted: %q, want %q", got, want)
	}
	if err := n.netif.AddServiceRoute(routed); err != nil {
		t.Fatal(err)
	}
	extra := netip.MustParsePrefix("10.100.0.0/16")
	if err := n.netif.AddServiceRoute(extra); err != nil {
		t.Fatal(err)
	}
	if got, want := check(), "extra local route 10.100.0.0/16 on kube-ipvs0: want none, have routed"; got != want {
		t.Fatalf("route left over: %q, want %q", got, want)
	}
}

func TestTraceReportChecksTheKernel(t *testing.T) {
	n := newNode(t)
	pkt, err := ParsePacket("10.244.1.20", "10.96.0.10:80/tcp")
	if err != nil {
		t.Fatal(err)
	}
	k := n.read(t)
	r := NewTraceReport(n.proxier.Snapshot(), &k, pkt)
	if r.Verdict != rules.VerdictLoadBalanced || len(r.RealServers) != 2 || !strings.Contains(strings.Join(r.Kernel, "\n"), "same real servers") {
		t.Fatalf("trace: %+v", r)
	}
	if err := n.ipvs.DeleteRealServer(webVS, web2); err != nil {
		t.Fatal(err)
	}
	k = n.read(t)
	r = NewTraceReport(n.proxier.Snapshot(), &k, pkt)
	if !strings.Contains(strings.Join(r.Kernel, "\n"), "DIFFERS: virtual server TCP 10.96.0.10:80: real server 10.244.2.7:8080 missing") {
		t.Fatalf("kernel check after a deletion: %v", r.Kernel)
	}
	// Dropped before IPVS (a port the Service lacks is rejected) or not: the
	// kernel check is of the destination's virtual server.
	nodePortPkt, _ := ParsePacket("192.0.2.7", "198.51.100.1:30080")
	r = NewTraceReport(n.proxier.Snapshot(), &k, nodePortPkt)
	if r.Verdict != rules.VerdictLoadBalanced || !strings.Contains(strings.Join(r.Kernel, "\n"), "virtual server TCP 198.51.100.1:30080 is in the kernel with the same real servers") {
		t.Fatalf("node port trace: %s %v", r.Verdict, r.Kernel)
	}
	// A packet a filter drops before IPVS: the kernel check is still of the
	// destination's desired virtual server (here a firewall entry without
	// allowed ranges is added to the snapshot by hand).
	snap := n.proxier.Snapshot()
	snap.SetEntries = append(snap.SetEntries, ipvsproxy.SetEntry{Set: "KUBE-LOAD-BALANCER-FW", Entry: ipset.Entry{IP: webVS.Address, Protocol: "tcp", Port: 80}})
	r = NewTraceReport(snap, &k, pkt)
	if r.Verdict != rules.VerdictDropped || !strings.Contains(strings.Join(r.Kernel, "\n"), "DIFFERS: virtual server TCP 10.96.0.10:80: real server 10.244.2.7:8080 missing") {
		t.Fatalf("filtered trace: %s %v", r.Verdict, r.Kernel)
	}
	for _, bad := range [][2]string{{"x", "10.96.0.10:80"}, {"10.0.0.1", "10.96.0.10"}, {"10.0.0.1", "10.96.0.10:80/icmp"}} {
		if _, err := ParsePacket(bad[0], bad[1]); err == nil {
			t.Errorf("ParsePacket(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func TestConntrackFlowsOfAService(t *testing.T) {
	n := newNode(t)
	n.traffic(t)
	r := n.report(t)
	k := n.read(t)
	l := ServiceFlows(r, k.Flows)
	if len(l.Flows) != 1 || l.Flows[0].Service != "default/web:http" || l.Flows[0].State != "ESTABLISHED" || l.Flows[0].TimeoutSeconds != 86399 {
		t.Fatalf("flows: %+v", l.Flows)
	}
	var b bytes.Buffer
	WriteFlows(&b, l)
	if !strings.Contains(b.String(), "10.244.1.20:40000 -> 10.96.0.10:80") || !strings.Contains(b.String(), "1 flows") {
		t.Fatalf("flow table:\n%s", b.String())
	}
}

func TestRates(t *testing.T) {
	got := Rates(map[string]uint64{"a": 10, "b": 50}, map[string]uint64{"a": 30, "b": 5, "c": 100}, 2*time.Second)
	if got["a"] != 10 || got["b"] != 2.5 || len(got) != 2 {
		t.Fatalf("rates %v, want a 10/s, b restarted at 2.5/s, c not yet", got)
	}
}

func TestExplainSaysWhatToDo(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{ipvs.ErrUnsupported, "IPVS is not loaded"},
		{conntrack.ErrUnsupported, "nf_conntrack_netlink"},
		{errPermission, "needs CAP_NET_ADMIN"},
	} {
		if got := Explain("read", c.err).Error(); !strings.Contains(got, c.want) {
			t.Errorf("Explain(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// With --kubeconfig the desired state is the proxier's own sync on fakes:
// it must equal what the daemon holds for the same objects.
func TestSnapshotFromObjectsIsTheDaemonsDesiredState(t *testing.T) {
	n := newNode(t)
	var services []*v1.Service
	var slices []*discovery.EndpointSlice
	for _, o := range n.objects {
		switch o := o.(type) {
		case *v1.Service:
			services = append(services, o)
		case *discovery.EndpointSlice:
			slices = append(slices, o)
		}
	}
	got, err := SnapshotFromObjects(n.proxier.Config(), "node1", nil,
		[]netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("198.51.100.1")}, services, slices)
	if err != nil {
		t.Fatal(err)
	}
	want := n.proxier.Snapshot()
	g, _ := json.Marshal([]any{got.VirtualServers, got.Addresses, got.SetEntries})
	w, _ := json.Marshal([]any{want.VirtualServers, want.Addresses, want.SetEntries})
	if string(g) != string(w) || len(got.VirtualServers) != 2 {
		t.Fatalf("from objects:\n%s\nthe daemon's:\n%s", g, w)
	}
	if res := Check(n.read(t), got); res.ExitCode() != CheckAgree {
		t.Fatalf("the kernel synced by the daemon vs the computed state: %v", res.Differences)
	}
}

// A deleted Service's virtual server kept while its connections end (every
// real server draining at weight 0) is expected, not an extra one.
func TestCheckAcceptsDeletedServiceDraining(t *testing.T) {
	n := newNode(t)
	if err := n.ipvs.SetConnections(webVS, web1, 1, 0); err != nil {
		t.Fatal(err)
	}
	n.proxier.Tracker().DeleteService("default", "web")
	n.proxier.Tracker().DeleteEndpointSlice(n.objects[1].(*discovery.EndpointSlice))
	if res := n.proxier.Sync(); res.Err() != nil || res.Draining != 1 {
		t.Fatalf("sync: %v, draining %d", res.Err(), res.Draining)
	}
	if res := Check(n.read(t), n.proxier.Snapshot()); res.ExitCode() != CheckAgree {
		t.Fatalf("while draining: %+v", res.Differences)
	}
	// Someone raises its weight: no longer a draining one.
	if err := n.ipvs.UpdateRealServer(webVS, ipvs.RealServer{RealServerKey: web1, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	if res := Check(n.read(t), n.proxier.Snapshot()); res.ExitCode() != CheckDiffer {
		t.Fatalf("weight 1 on a deleted Service's virtual server not reported: %+v", res.Differences)
	}
}

// --check and the reconciler decide "differs" alike: a virtual server whose
// scheduler flags someone changed is a difference, and the next full sync
// rewrites it.
func TestCheckSeesSchedulerFlagsTheSyncRewrites(t *testing.T) {
	n := newNodeWith(t, func(c *ipvsproxy.Config) {
		c.Scheduler, c.SchedulerExplicit = "mh", true
		c.SchedulerFlags = ipvs.SchedulerFlag2 // mh-port
	})
	check := func() CheckResult { return Check(n.read(t), n.proxier.Snapshot()) }
	if res := check(); res.ExitCode() != CheckAgree {
		t.Fatalf("after a sync: %+v", res.Differences)
	}
	if err := n.ipvs.UpdateVirtualServer(ipvs.VirtualServer{VirtualServerKey: webVS, Scheduler: "mh"}); err != nil {
		t.Fatal(err)
	}
	res := check()
	want := "wrong-scheduler-flags virtual server TCP 10.96.0.10:80 (default/web:http): want mh-port, have none"
	if res.ExitCode() != CheckDiffer || len(res.Differences) != 1 || res.Differences[0].String() != want {
		t.Fatalf("flags changed behind the proxier's back: %+v, want %q", res.Differences, want)
	}
	n.proxier.RequestFullSync()
	if r := n.proxier.Sync(); r.Err() != nil || r.Writes == 0 {
		t.Fatalf("the full sync wrote %d objects (%v); want the virtual server rewritten", r.Writes, r.Err())
	}
	if res := check(); res.ExitCode() != CheckAgree {
		t.Fatalf("after the repairing sync: %+v", res.Differences)
	}
}

// The sync status's failing objects are the writer's own status entries:
// each line names the object, since when it fails, its error and its next
// retry, once (the failed writes are the same objects).
func TestTableShowsFailingObjects(t *testing.T) {
	now := time.Date(2026, 12, 3, 16, 0, 0, 0, time.UTC)
	r := Report{Time: now, Status: &snapshot.SyncStatus{
		Objects: []snapshot.ObjectStatus{{
			Kind: snapshot.ObjectVirtualServer, Object: "virtual server TCP 10.96.0.10:80", Services: []string{"default/web"},
			State: snapshot.StateError, Since: now.Add(-time.Minute), LastError: "no such scheduler", NextRetry: now.Add(time.Second),
		}},
	}}
	r.Status.FailedWrites = snapshot.FailedWritesOf(r.Status.Objects)
	var b bytes.Buffer
	if err := WriteTable(&b, r, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "error virtual server TCP 10.96.0.10:80 since 2026-12-03T15:59:00Z (1m0s ago): no such scheduler; next retry 2026-12-03T16:00:01Z"
	if !strings.Contains(b.String(), want) {
		t.Errorf("table:\n%s\nwant a line %q", b.String(), want)
	}
	if n := strings.Count(b.String(), "10.96.0.10:80"); n != 1 {
		t.Errorf("table:\n%s\nnames the failing virtual server %d times, want once", b.String(), n)
	}
}

// The last full read's line says how many virtual servers came from the
// kernel's table and how many were dumped one at a time, and why the table
// gave none when it could not be read.
func TestTableSaysHowTheLastFullReadTookTheRealServers(t *testing.T) {
	for _, c := range []struct {
		read snapshot.FullRead
		want string
	}{
		{snapshot.FullRead{FromTable: 12000, Dumped: 500}, "last full read: real servers of 12000 virtual servers from /proc/net/ip_vs, 500 one dump each\n"},
		{snapshot.FullRead{Dumped: 7, TableError: "no table to read: open the IPVS table in /proc: permission denied"},
			"last full read: real servers of 0 virtual servers from /proc/net/ip_vs, 7 one dump each (the table: no table to read: open the IPVS table in /proc: permission denied)\n"},
	} {
		r := Report{Time: time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC), Status: &snapshot.SyncStatus{LastFullRead: &c.read}}
		var b bytes.Buffer
		if err := WriteTable(&b, r, TableOptions{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("table:\n%s\nwant the line %q", b.String(), c.want)
		}
	}
}
