package main

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
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

// oursCleaner is the call ipvsproxy's conntrack reconciler makes on every
// full sync (ipvsproxy/conntrack_reconcile.go, conntrackReconciler.run):
// Table.DeleteFlowsMatching(family, UDP, serving.stale), the table streamed
// and each stale flow deleted while the dump goes on. The reconciler's
// udpEndpoints (virtual server address:port -> real servers) is unexported;
// serving rebuilds the same map, from the same Services and EndpointSlices
// as kube-proxy's side, and its stale is the same lookup.
func oursCleaner(tbl conntrack.Interface, svcs []*v1.Service, slices []*discovery.EndpointSlice) cleaner {
	serving := servingOf(svcs, slices)
	return func() (int, error) {
		return tbl.DeleteFlowsMatching(4, conntrack.UDP, func(f conntrack.Flow) bool { return serving.stale(f) })
	}
}

// udpEndpoints is ipvsproxy's udpEndpoints: each UDP service address:port
// with endpoints, to the endpoint address:port pairs that may answer it.
type udpEndpoints map[netip.AddrPort]map[netip.AddrPort]bool

func (s udpEndpoints) stale(f conntrack.Flow) bool {
	eps, ok := s[f.OrigDst]
	return ok && !eps[f.ReplySrc]
}

// servingOf is what ipvsproxy's udpServing reads from its desired state
// (virtual servers with their real servers) for these ClusterIP Services:
// cluster IP:port to endpoint IP:target port, Services without endpoints
// left out.
func servingOf(svcs []*v1.Service, slices []*discovery.EndpointSlice) udpEndpoints {
	bySvc := map[string][]*discovery.EndpointSlice{}
	for _, sl := range slices {
		bySvc[sl.Labels[discovery.LabelServiceName]] = append(bySvc[sl.Labels[discovery.LabelServiceName]], sl)
	}
	out := udpEndpoints{}
	for _, svc := range svcs {
		for _, sp := range svc.Spec.Ports {
			if sp.Protocol != v1.ProtocolUDP {
				continue
			}
			eps := map[netip.AddrPort]bool{}
			for _, sl := range bySvc[svc.Name] {
				for _, p := range sl.Ports {
					if p.Name == nil || *p.Name != sp.Name || p.Port == nil {
						continue
					}
					for _, ep := range sl.Endpoints {
						if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
							continue
						}
						for _, a := range ep.Addresses {
							eps[netip.AddrPortFrom(netip.MustParseAddr(a), uint16(*p.Port))] = true
						}
					}
				}
			}
			if len(eps) > 0 {
				out[netip.AddrPortFrom(netip.MustParseAddr(svc.Spec.ClusterIP), uint16(sp.Port))] = eps
			}
		}
	}
	return out
}

// kubeProxyCleaner is kube-proxy v1.36.3's clean-up, as its IPVS (and
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
