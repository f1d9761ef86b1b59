package proxier

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// conntrackReconciler makes the UDP conntrack table agree with the desired
// state instead of relying on every change having been seen and every flush
// having worked (kubernetes#112604; kube-proxy's conntrack reconciler,
// kubernetes#126130, pkg/proxy/conntrack/cleanup.go). The event-driven
// deletes of stale.go stay: they act within the sync of the change. This
// catches what they cannot: a delete that failed, a crash between a real
// server's removal and its flush, endpoints that appeared while the daemon
// was down.
type conntrackReconciler struct {
	// retry is set when the last clean-up failed: the next sync runs one.
	retry bool
}

// due reports whether this sync runs a clean-up: on every full sync (start-up,
// every --ipvs-sync-period, after a failure), after any write of this sync
// failed, and after a failed clean-up.
func (c *conntrackReconciler) due(full, failed bool) bool {
	return full || failed || c.retry
}

// run deletes, in each family, the UDP flows whose original destination is
// a virtual server with real servers and whose reply source (where IPVS
// sent it) is none of them. Such a flow is a client talking to nothing:
// IPVS drops its packets (expire_nodest_conn) and, UDP having no end, the
// client's next datagram reuses the flow for as long as it keeps sending.
// Virtual servers without real servers are left alone, as upstream does:
// there is nowhere better to send their flows yet, and once one appears
// the flow's reply source (the virtual server itself) is stale.
func (c *conntrackReconciler) run(table conntrack.Interface, d *ipvsproxy.DesiredState, families []v1.IPFamily) (map[v1.IPFamily]ConntrackPass, error) {
	serving := udpServing(d)
	passes := map[v1.IPFamily]ConntrackPass{}
	var err error
	for _, family := range families {
		fam := 4
		if family == v1.IPv6Protocol {
			fam = 6
		}
		start := time.Now()
		n, ferr := table.DeleteFlowsMatching(fam, conntrack.UDP, func(f conntrack.Flow) bool { return serving.stale(f) })
		passes[family] = ConntrackPass{Deleted: n, Duration: time.Since(start), Failed: ferr != nil}
		if ferr != nil && err == nil {
			err = fmt.Errorf("reconcile IPv%d UDP conntrack flows: %w", fam, ferr)
		}
		klog.V(4).InfoS("Reconciled UDP conntrack flows", "family", family, "deleted", n, "took", time.Since(start), "err", ferr)
	}
	c.retry = err != nil
	return passes, err
}

// udpEndpoints maps each UDP virtual server with real servers to the
// address:port pairs that may answer it.
type udpEndpoints map[netip.AddrPort]map[netip.AddrPort]bool

func udpServing(d *ipvsproxy.DesiredState) udpEndpoints {
	out := udpEndpoints{}
	for k := range d.VirtualServerKeys() {
		if k.Protocol != ipvs.UDP {
			continue
		}
		vs := d.VirtualServer(k)
		if vs == nil || len(vs.RealServers) == 0 {
			continue
		}
		eps := make(map[netip.AddrPort]bool, len(vs.RealServers))
		for _, rs := range vs.RealServers.All() {
			eps[netip.AddrPortFrom(rs.Address, rs.Port)] = true
		}
		out[netip.AddrPortFrom(k.Address, k.Port)] = eps
	}
	return out
}

func (s udpEndpoints) stale(f conntrack.Flow) bool {
	eps, ok := s[f.OrigDst]
	return ok && !eps[f.ReplySrc]
}
