package main

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/healthcheck"
	"github.com/ipvsproxy/ipvsproxy/internal/daemon/metrics"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// Health says whether the sync loop is alive and keeping up, not whether
// every object was written: a completed sync with one
// failing object keeps /healthz at 200; a sync that could not even read the
// kernel does not count.
func TestHealthFollowsTheSyncLoopNotEveryObject(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	period := 30 * time.Second
	health := healthcheck.NewProxyHealth(period, clock)
	health.SetIPFamilies(v1.IPv4Protocol)
	services := healthcheck.NewServiceHealthServer(nil, record.NewFakeRecorder(10), health)
	defer services.Close()
	m := metrics.New()
	families := []v1.IPFamily{v1.IPv4Protocol}
	failing := proxier.SyncResult{Completed: true, WriteErrors: map[string]int{"ipset": 1}, FailingObjects: map[string]int{"ipset": 1}}
	for i := 0; i < 4; i++ {
		health.QueuedUpdate()
		clock.Step(period)
		observeSync(m, health, services, families, failing)
	}
	if !health.Healthy() {
		t.Fatal("a live sync loop with one failing object is reported unhealthy")
	}
	health.QueuedUpdate()
	for i := 0; i < 4; i++ {
		clock.Step(period)
		observeSync(m, health, services, families, proxier.SyncResult{WriteErrors: map[string]int{"read": 1}})
	}
	if health.Healthy() {
		t.Fatal("a loop that cannot read the kernel for two minutes is reported healthy")
	}
}

// On a dual-stack node, each slice's latency is observed once under its own
// family, and conntrack deletions and iptables failures under the family
// they happened in.
func TestObserveSyncLabelsByFamily(t *testing.T) {
	m := metrics.New()
	health := healthcheck.NewProxyHealth(time.Minute, clock.RealClock{})
	services := healthcheck.NewServiceHealthServer(nil, nil, health)
	defer services.Close()
	families := []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	start := time.Now()
	observeSync(m, health, services, families, proxier.SyncResult{
		Full: true, Start: start, Duration: 10 * time.Millisecond,
		TriggerTimes:     map[v1.IPFamily][]time.Time{v1.IPv6Protocol: {start.Add(-2 * time.Second)}},
		Conntrack:        map[v1.IPFamily]proxier.ConntrackPass{v1.IPv6Protocol: {Deleted: 3, Duration: time.Millisecond}},
		ConntrackDeleted: 3,
		WriteErrors:      map[string]int{},
	})
	observeSync(m, health, services, families, proxier.SyncResult{
		Start: start, Duration: time.Millisecond,
		WriteErrors:      map[string]int{"iptables": 1},
		IPTablesFailures: map[v1.IPFamily]int{v1.IPv6Protocol: 1},
	})
	count := func(name, family string) int {
		t.Helper()
		mfs, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, metric := range mf.GetMetric() {
				for _, l := range metric.GetLabel() {
					if l.GetName() == "ip_family" && l.GetValue() == family {
						switch {
						case metric.GetHistogram() != nil:
							return int(metric.GetHistogram().GetSampleCount())
						case metric.GetCounter() != nil:
							return int(metric.GetCounter().GetValue())
						}
					}
				}
			}
		}
		return 0
	}
	for _, c := range []struct {
		name, family string
		want         int
	}{
		{"kubeproxy_network_programming_duration_seconds", "IPv6", 1},
		{"kubeproxy_network_programming_duration_seconds", "IPv4", 0},
		{"kubeproxy_conntrack_reconciler_deleted_entries_total", "IPv6", 3},
		{"kubeproxy_conntrack_reconciler_deleted_entries_total", "IPv4", 0},
		{"kubeproxy_conntrack_reconciler_sync_duration_seconds", "IPv6", 1},
		{"ipvsproxy_conntrack_entries_deleted_total", "IPv6", 3},
		{"ipvsproxy_conntrack_entries_deleted_total", "IPv4", 0},
		{"kubeproxy_sync_proxy_rules_iptables_restore_failures_total", "IPv6", 1},
		{"kubeproxy_sync_proxy_rules_iptables_restore_failures_total", "IPv4", 0},
		{"kubeproxy_sync_full_proxy_rules_duration_seconds", "IPv4", 1},
		{"kubeproxy_sync_partial_proxy_rules_duration_seconds", "IPv6", 1},
	} {
		if got := count(c.name, c.family); got != c.want {
			t.Errorf("%s{ip_family=%s} = %d, want %d", c.name, c.family, got, c.want)
		}
	}
	m.SetBuildInfo("0.2.0", "abc123", "clean", "2026-01-02T03:04:05Z")
	if n, err := testutil.GatherAndCount(m.Registry, "kubernetes_build_info"); err != nil || n != 1 {
		t.Errorf("kubernetes_build_info: %d %v", n, err)
	}
}

// A dual-stack node (the default --ip-families auto on any host with a
// global IPv6 address) starts, takes a change from the informer handlers and
// syncs through the same hooks run wires: every ip_family metric gets one
// series per family. The one-label metric once got both family names as
// values and panicked at the first queued change, before any sync.
func TestDualStackNodeRunsThroughTheRunWiring(t *testing.T) {
	links := netif.NewFake(owned.DummyInterface)
	links.SetHostAddresses(netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("2001:db8::1"))
	k := adapters.Kernel{
		IPVS: ipvs.NewFake(), Netif: links, IPSet: ipset.NewFake(),
		IPTables: map[v1.IPFamily]iptables.Interface{
			v1.IPv4Protocol: iptables.NewFake(iptables.IPv4), v1.IPv6Protocol: iptables.NewFake(iptables.IPv6)},
		Conntrack: conntrack.NewFake(),
	}
	families := []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	cfg := ipvsproxy.DefaultConfig()
	cfg.Families = families
	cfg.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("2001:db8:244::/56")}
	p, err := proxier.New(cfg, "node1", k, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	health := healthcheck.NewProxyHealth(time.Minute, clock.RealClock{})
	health.SetIPFamilies(families...)
	serviceHealth := healthcheck.NewServiceHealthServer(nil, nil, health)
	defer serviceHealth.Close()
	synced := make(chan proxier.SyncResult, 16)
	observeProxier(p, m, health, serviceHealth, families)
	observe := p.OnSync
	p.OnSync = func(r proxier.SyncResult) { observe(r); synced <- r }

	tracker := p.Tracker()
	tracker.NodeHandler().OnAdd(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node1"},
		Spec:       v1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "2001:db8:244:1::/64"}},
	}, true)
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", CreationTimestamp: metav1.Now()},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10", "fd00:10:96::10"},
			IPFamilies: families, Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	}
	tracker.ServiceHandler().OnAdd(svc, true)

	ctx, cancel := context.WithCancel(context.Background())
	stopped := startSyncLoop(ctx, p)
	defer func() { cancel(); <-stopped }()
	select {
	case r := <-synced:
		if err := r.Err(); err != nil {
			t.Fatalf("first sync: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no sync within 10 s")
	}
	for _, vs := range []string{"10.96.0.10", "fd00:10:96::10"} {
		if !strings.Contains(k.IPVS.(*ipvs.Fake).Dump(), vs) {
			t.Errorf("no virtual server for %s:\n%s", vs, k.IPVS.(*ipvs.Fake).Dump())
		}
	}
	for _, name := range []string{"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
		"kubeproxy_sync_proxy_rules_duration_seconds", "kubeproxy_sync_proxy_rules_no_local_endpoints_total"} {
		series, err := testutil.GatherAndCount(m.Registry, name)
		if err != nil {
			t.Fatal(err)
		}
		want := len(families)
		if name == "kubeproxy_sync_proxy_rules_no_local_endpoints_total" {
			want = 2 * len(families) // internal and external, per family
		}
		if series != want {
			t.Errorf("%s: %d series, want %d (one per family)", name, series, want)
		}
	}
}

// The no-local-endpoints gauge counts each family's Services on their own:
// an IPv6-only Local Service without a local endpoint is not an IPv4 one.
func TestNoLocalEndpointsCountedPerFamily(t *testing.T) {
	m := metrics.New()
	health := healthcheck.NewProxyHealth(time.Minute, clock.RealClock{})
	services := healthcheck.NewServiceHealthServer(nil, nil, health)
	defer services.Close()
	families := []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	observeSync(m, health, services, families, proxier.SyncResult{
		Completed: true, WriteErrors: map[string]int{},
		NoLocalEndpoints: map[ipvsproxy.NoLocalKey]int{{Family: v1.IPv6Protocol, Policy: "external"}: 2},
	})
	for family, want := range map[string]float64{"IPv4": 0, "IPv6": 2} {
		got := testutil.ToFloat64(m.NoLocalEndpoints.WithLabelValues("external", family))
		if got != want {
			t.Errorf("no local endpoints, external, %s = %v, want %v", family, got, want)
		}
	}
}

// A sync that held deletions (default/kubernetes absent) sets
// ipvsproxy_deletions_held and the count of waiting objects; the next
// sync without the hold clears both.
func TestObserveSyncReportsHeldDeletions(t *testing.T) {
	health := healthcheck.NewProxyHealth(time.Minute, clocktesting.NewFakeClock(time.Now()))
	services := healthcheck.NewServiceHealthServer(nil, record.NewFakeRecorder(10), health)
	defer services.Close()
	m := metrics.New()
	families := []v1.IPFamily{v1.IPv4Protocol}
	observeSync(m, health, services, families, proxier.SyncResult{Completed: true, DeletionsHeld: true, HeldDeletions: 7})
	if held, n := testutil.ToFloat64(m.DeletionsHeld), testutil.ToFloat64(m.HeldDeletions); held != 1 || n != 7 {
		t.Fatalf("deletions_held %v held_deletions %v, want 1 and 7", held, n)
	}
	observeSync(m, health, services, families, proxier.SyncResult{Completed: true})
	if held, n := testutil.ToFloat64(m.DeletionsHeld), testutil.ToFloat64(m.HeldDeletions); held != 0 || n != 0 {
		t.Fatalf("deletions_held %v held_deletions %v after the hold, want 0 and 0", held, n)
	}
}

// A full sync's read counts its virtual servers by how their real servers
// were read (the table, or a dump each); a partial sync reads none.
func TestObserveSyncCountsHowTheFullReadTookTheRealServers(t *testing.T) {
	health := healthcheck.NewProxyHealth(time.Minute, clocktesting.NewFakeClock(time.Now()))
	services := healthcheck.NewServiceHealthServer(nil, record.NewFakeRecorder(10), health)
	defer services.Close()
	m := metrics.New()
	families := []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	observeSync(m, health, services, families, proxier.SyncResult{Completed: true, Full: true, RealServerReads: snapshot.FullRead{FromTable: 12000, Dumped: 500}})
	observeSync(m, health, services, families, proxier.SyncResult{Completed: true, Full: true, RealServerReads: snapshot.FullRead{Dumped: 3, TableError: "no table"}})
	observeSync(m, health, services, families, proxier.SyncResult{Completed: true, RealServerReads: snapshot.FullRead{FromTable: 7}})
	for read, want := range map[string]float64{metrics.ReadFromTable: 12000, metrics.ReadDumped: 503} {
		if got := testutil.ToFloat64(m.FullReadVirtualServersTotal.WithLabelValues(read)); got != want {
			t.Errorf("full_read_virtual_servers_total{read=%q} = %v, want %v", read, got, want)
		}
	}
}
