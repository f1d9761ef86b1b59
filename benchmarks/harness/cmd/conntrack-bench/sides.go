package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/ours"
	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	vnl "github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/kubernetes/pkg/proxy"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	kpconntrack "k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/metrics"
)

// cleaner is one side's clean-up of the stale UDP flows: it returns how
// many flows it deleted.
type cleaner func() (int, error)

// op is one timed operation of a side. prepare (untimed) brings the side
// and the table to where the operation starts in repeat rep (0-based); run
// is timed; check (untimed, optional) looks at the side's state
// afterwards. The table is checked after every run.
type op struct {
	name    string
	prepare func(rep int) error
	run     func() (ran, error)
	check   func() error
}

// ran is what one run reported.
type ran struct {
	// Deleted is how many flows it deleted.
	Deleted int
	// Pass is, for ours, the conntrack pass's own time within the run.
	Pass time.Duration
	// Filters is, for ours, how many filters the run handed to
	// conntrack's DeleteFlows (each dumped flow is matched against them
	// in turn), and Distinct how many of them differ.
	Filters, Distinct int
}

// injector writes one flow into the table under test.
type injector func(conntrack.Flow) error

// reinjectStale writes the stale flows among 0..n-1 back, as the first
// repeat found them.
func reinjectStale(add injector, n int) error {
	for i := 0; i < n; i += 100 {
		if !isStale(i) {
			return fmt.Errorf("flow %d should be stale", i)
		}
		if err := add(flowAt(i)); err != nil {
			return fmt.Errorf("re-write stale flow: %w", err)
		}
	}
	return nil
}

// The operations reported.
const (
	// opChange is ipvsproxy's partial sync of the EndpointSlice change
	// that drops the gone endpoint: the reconciler deletes its real
	// servers and the flows they served (stale.go's filters and the
	// deleted real servers', Table.DeleteFlows).
	opChange = "change"
	// opPeriodic is ipvsproxy's full sync with nothing changed and the
	// stale flows back: its conntrack reconcile pass
	// (conntrack_reconcile.go, kubernetes#112604,
	// Table.DeleteFlowsMatching) deletes them.
	opPeriodic = "periodic"
	// opCleanStale is kube-proxy's conntrack.CleanStaleEntries, which its
	// proxiers run for both cases.
	opCleanStale = "CleanStaleEntries"
)

// oursHostAddress is the only address of the fake netif's host
// interfaces: the node IP netns.Prepare binds on lo, outside the cluster
// IPs (198.51.100.2-251) and every flow's addresses.
var oursHostAddress = shape.NodeIP

// oursOps is ipvsproxy's side: the daemon's own Proxier, built as the
// harness builds it (benchmarks/ours), on the Fakes for IPVS, ipset,
// iptables, netif and sysctl and on tbl as its conntrack table. It is fed
// every Service and EndpointSlice with all endpoints, synced (cold, full:
// its conntrack reconcile pass must find nothing stale) and its UDP
// virtual servers checked in the fake IPVS; then
//
//   - change: the slices without the gone endpoint (untimed), one timed
//     partial Sync; from the second repeat on the endpoint first comes
//     back (slices restored, untimed Sync) and its stale flows are
//     re-written;
//   - periodic: the stale flows re-written (the endpoint already gone from
//     the desired state), RequestFullSync, one timed full Sync.
//
// Each reports the SyncResult's deleted count (which must agree with its
// IPv4 pass) and the pass's own Duration. add re-writes flows into tbl.
func oursOps(tbl conntrack.Interface, add injector, n int) ([]op, error) {
	links := netif.NewFake(owned.DummyInterface)
	links.SetHostAddresses(oursHostAddress)
	k := ours.FakeKernel(links)
	seen := &observed{Interface: tbl}
	k.Conntrack = seen
	fakeIPVS, ok := k.IPVS.(*ipvs.Fake)
	if !ok {
		return nil, fmt.Errorf("ours.FakeKernel's IPVS is a %T, not the Fake", k.IPVS)
	}
	p, err := proxier.New(ours.Config(shape.Shape{}), shape.NodeName, k, nil)
	if err != nil {
		return nil, err
	}
	svcs, all := clusterObjects(false)
	_, gone := clusterObjects(true)
	for i := range svcs {
		p.Tracker().SetService(svcs[i])
		p.Tracker().SetEndpointSlice(all[i])
	}
	// An informer delivers the slices that changed: those that listed
	// goneEndpoint, one Service in ten.
	var touched []int
	for i := range all {
		if len(all[i].Endpoints) != len(gone[i].Endpoints) {
			touched = append(touched, i)
		}
	}
	setSlices := func(sls []*discovery.EndpointSlice) {
		for _, i := range touched {
			p.Tracker().SetEndpointSlice(sls[i])
		}
	}
	if r := p.Sync(); r.Err() != nil || !r.Full || r.ConntrackDeleted != 0 {
		return nil, fmt.Errorf("ipvsproxy's cold sync: full=%v, %d conntrack flows deleted (want none: every endpoint serves), err %v",
			r.Full, r.ConntrackDeleted, r.Err())
	}
	if err := checkVirtualServers(fakeIPVS, false); err != nil {
		return nil, fmt.Errorf("after ipvsproxy's cold sync: %w", err)
	}
	change := op{
		name: opChange,
		prepare: func(rep int) error {
			if rep > 0 {
				setSlices(all)
				if r := p.Sync(); r.Err() != nil || r.Full || r.Services != len(touched) || r.ConntrackDeleted != 0 {
					return fmt.Errorf("ipvsproxy's sync restoring %s: full=%v, %d Services rebuilt (want %d), %d conntrack flows deleted (want none), err %v",
						goneEndpoint, r.Full, r.Services, len(touched), r.ConntrackDeleted, r.Err())
				}
				if err := checkVirtualServers(fakeIPVS, false); err != nil {
					return fmt.Errorf("after restoring %s: %w", goneEndpoint, err)
				}
				if err := reinjectStale(add, n); err != nil {
					return err
				}
			}
			setSlices(gone)
			return nil
		},
		run: func() (ran, error) {
			seen.filters = nil
			r := p.Sync()
			got, err := seen.ran(r, false)
			if err == nil && r.Services != len(touched) {
				err = fmt.Errorf("the change rebuilt %d Services, want the %d whose slice changed", r.Services, len(touched))
			}
			return got, err
		},
		check: func() error { return checkVirtualServers(fakeIPVS, true) },
	}
	periodic := op{
		name: opPeriodic,
		prepare: func(int) error {
			if err := reinjectStale(add, n); err != nil {
				return err
			}
			p.RequestFullSync()
			return nil
		},
		run: func() (ran, error) {
			seen.filters = nil
			return seen.ran(p.Sync(), true)
		},
		check: func() error { return checkVirtualServers(fakeIPVS, true) },
	}
	return []op{change, periodic}, nil
}

// observed is ours' conntrack table, keeping the filters the proxier
// hands to DeleteFlows; it only watches.
type observed struct {
	conntrack.Interface
	filters []conntrack.Filter
}

func (o *observed) DeleteFlows(filters ...conntrack.Filter) (int, error) {
	o.filters = append(o.filters, filters...)
	return o.Interface.DeleteFlows(filters...)
}

// ran is what sync r deleted from the IPv4 conntrack table, the time its
// conntrack pass(es) took and the filters it used; an error when it
// failed, was not of the kind wanted, or its counts disagree.
func (o *observed) ran(r proxier.SyncResult, wantFull bool) (ran, error) {
	pass := r.Conntrack[v1.IPv4Protocol]
	distinct := map[conntrack.Filter]bool{}
	for _, f := range o.filters {
		distinct[f] = true
	}
	out := ran{Deleted: r.ConntrackDeleted, Pass: pass.Duration, Filters: len(o.filters), Distinct: len(distinct)}
	if err := r.Err(); err != nil {
		return out, err
	}
	if r.Full != wantFull {
		return out, fmt.Errorf("sync full=%v, want %v", r.Full, wantFull)
	}
	if pass.Failed || pass.Deleted != r.ConntrackDeleted || len(r.Conntrack) != 1 {
		return out, fmt.Errorf("sync deleted %d conntrack flows, its passes %+v", r.ConntrackDeleted, r.Conntrack)
	}
	return out, nil
}

// checkVirtualServers is nil when the fake IPVS holds exactly the UDP
// virtual servers of clusterObjects, each with the real servers of its
// endpoints (without goneEndpoint when gone).
func checkVirtualServers(f *ipvs.Fake, gone bool) error {
	vss, err := f.VirtualServers()
	if err != nil {
		return err
	}
	want := map[ipvs.VirtualServerKey][]ipvs.RealServerKey{}
	for s := 0; s < services; s++ {
		for p := 0; p < portsPerService; p++ {
			k := ipvs.VirtualServerKey{Protocol: ipvs.UDP, Address: clusterIP(s), Port: uint16(firstServicePort + p)}
			for e := 0; e < endpointsPerSvc; e++ {
				if ip := endpointIP(s, e); !gone || ip != goneEndpoint {
					want[k] = append(want[k], ipvs.RealServerKey{Address: ip, Port: uint16(firstTargetPort + p)})
				}
			}
		}
	}
	if len(vss) != len(want) {
		return fmt.Errorf("IPVS holds %d virtual servers, want the %d UDP ones", len(vss), len(want))
	}
	for _, vs := range vss {
		wantRS, ok := want[vs.VirtualServerKey]
		if !ok {
			return fmt.Errorf("IPVS holds an unexpected virtual server %s", vs.VirtualServerKey)
		}
		rss, err := f.RealServers(vs.VirtualServerKey)
		if err != nil {
			return err
		}
		var got []ipvs.RealServerKey
		for _, rs := range rss {
			got = append(got, rs.RealServerKey)
		}
		slices.SortFunc(got, compareRealServers)
		slices.SortFunc(wantRS, compareRealServers)
		if !slices.Equal(got, wantRS) {
			return fmt.Errorf("virtual server %s has real servers %v, want %v", vs.VirtualServerKey, got, wantRS)
		}
	}
	return nil
}

func compareRealServers(a, b ipvs.RealServerKey) int {
	if c := a.Address.Compare(b.Address); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}

// kubeProxyOps is kube-proxy's side: one CleanStaleEntries, its stale flows
// re-written before each repeat after the first.
func kubeProxyOps(ct kpconntrack.Interface, add injector, n int) ([]op, error) {
	clean, err := kubeProxyCleaner(ct)
	if err != nil {
		return nil, err
	}
	return []op{{
		name: opCleanStale,
		prepare: func(rep int) error {
			if rep == 0 {
				return nil
			}
			return reinjectStale(add, n)
		},
		run: func() (ran, error) {
			d, err := clean()
			return ran{Deleted: d}, err
		},
	}}, nil
}

// kubeProxyCleaner is kube-proxy v1.37.2's clean-up, as its IPVS (and
// iptables, nftables) proxier runs it at the end of a sync whose endpoint
// changes touched a UDP Service: conntrack.CleanStaleEntries(ct, family,
// svcPortMap, endpointsMap). Its maps come from kube-proxy's own change
// trackers, fed every Service and EndpointSlice, then the slices without
// the gone endpoint, so kube-proxy decides by itself which flows are stale.
// ct is kube-proxy's netlink implementation (conntrack.New()); CleanStaleEntries
// returns nothing, so counted wraps it to read what DeleteEntries reported.
func kubeProxyCleaner(ct kpconntrack.Interface) (cleaner, error) {
	svcPortMap, endpointsMap, err := kubeProxyMaps()
	if err != nil {
		return nil, err
	}
	// Registered as kube-proxy registers them in IPVS mode: the clean-up
	// observes its latency and counts its deletions, and that count must
	// agree with DeleteEntries'.
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeIPVS)
	counter := metrics.ReconcileConntrackFlowsDeletedEntriesTotal.WithLabelValues(string(v1.IPv4Protocol))
	c := &counted{Interface: ct}
	return func() (int, error) {
		c.deleted, c.err = 0, nil
		before, err := testutil.GetCounterMetricValue(counter)
		if err != nil {
			return 0, err
		}
		kpconntrack.CleanStaleEntries(c, v1.IPv4Protocol, svcPortMap, endpointsMap)
		after, err := testutil.GetCounterMetricValue(counter)
		if err != nil {
			return 0, err
		}
		if int(after-before) != c.deleted {
			c.err = errors.Join(c.err, fmt.Errorf("kube-proxy's %s counted %v deletions, DeleteEntries reported %d",
				"conntrack_reconciler_deleted_entries_total", after-before, c.deleted))
		}
		return c.deleted, c.err
	}, nil
}

// kubeProxyMaps are the proxier's svcPortMap and endpointsMap after the
// endpoint went, built by kube-proxy's ServiceChangeTracker and
// EndpointsChangeTracker as its proxiers build them (with no
// proxier-specific service or endpoint info: the clean-up reads only the
// base fields).
func kubeProxyMaps() (proxy.ServicePortMap, proxy.EndpointsMap, error) {
	sct := proxy.NewServiceChangeTracker(v1.IPv4Protocol, nil, nil)
	ect := proxy.NewEndpointsChangeTracker(v1.IPv4Protocol, "node1", nil, nil)
	svcs, before := clusterObjects(false)
	for i, svc := range svcs {
		sct.Update(nil, svc)
		ect.EndpointSliceUpdate(before[i], false)
	}
	svcPortMap := make(proxy.ServicePortMap)
	svcPortMap.Update(sct)
	endpointsMap := make(proxy.EndpointsMap)
	endpointsMap.Update(ect)
	if len(svcPortMap) != services*portsPerService {
		return nil, nil, fmt.Errorf("kube-proxy tracks %d service ports, want %d", len(svcPortMap), services*portsPerService)
	}
	_, after := clusterObjects(true)
	for i := range after {
		ect.EndpointSliceUpdate(after[i], false)
	}
	if res := endpointsMap.Update(ect); !res.ConntrackCleanupRequired {
		return nil, nil, errors.New("kube-proxy does not see the endpoint's removal as needing a conntrack clean-up")
	}
	return svcPortMap, endpointsMap, nil
}

// counted forwards to kube-proxy's conntrack Interface and keeps what its
// DeleteEntries returned, and any error CleanStaleEntries only logs.
type counted struct {
	kpconntrack.Interface
	deleted int
	err     error
}

func (c *counted) ListEntries(family uint8) ([]*vnl.ConntrackFlow, error) {
	flows, err := c.Interface.ListEntries(family)
	if err != nil {
		c.err = errors.Join(c.err, fmt.Errorf("kube-proxy ListEntries: %w", err))
	}
	return flows, err
}

func (c *counted) DeleteEntries(family uint8, flows []*vnl.ConntrackFlow) (int, error) {
	n, err := c.Interface.DeleteEntries(family, flows)
	c.deleted += n
	if err != nil {
		c.err = errors.Join(c.err, fmt.Errorf("kube-proxy DeleteEntries: %w", err))
	}
	return n, err
}
