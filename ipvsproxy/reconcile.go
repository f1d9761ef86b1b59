package ipvsproxy

import (
	"errors"
	"fmt"
	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"time"

	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/netif"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// writeError is one failed kernel write, kept for metrics and the log.
type writeError struct {
	object string // ipvs, address, ipset, iptables, conntrack, sysctl
	err    error
	// family is set for writes of one family's rules (iptables).
	family v1.IPFamily
}

// reconciler writes the difference between the desired state and the
// kernel view for the touched objects, and keeps the view in step with what
// it wrote. It never stops at a failure: every other object is still
// written, and the failure makes the next sync a full one.
type reconciler struct {
	k        Kernel
	cfg      Config
	desired  *desiredState
	view     *kernelView
	draining map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time
	now      time.Time
	writes   int
	errs     []writeError
	// staleFlows selects the UDP flows of the real servers this sync
	// deleted: their replies would come from an endpoint that is gone.
	staleFlows []conntrack.Filter
}

// fail records a failed write. The adapters' errors already name the
// operation and the object.
func (r *reconciler) fail(object string, err error) {
	klog.ErrorS(err, "Kernel write failed; will retry with a full sync")
	r.errs = append(r.errs, writeError{object: object, err: err})
}

// failFamily is fail for a write of one family's objects.
func (r *reconciler) failFamily(family v1.IPFamily, object string, err error) {
	klog.ErrorS(err, "Kernel write failed; will retry with a full sync", "family", family)
	r.errs = append(r.errs, writeError{object: object, err: err, family: family})
}

// apply writes in an order that never leaves traffic without a path:
// addresses and set members that new virtual servers need go first,
// removals last.
func (r *reconciler) apply(t touched) {
	for a := range t.addresses {
		if r.desired.addrRefs[a] > 0 && !r.view.addresses[a] {
			r.writes++
			if err := r.k.Netif.AddDummyAddress(a); err != nil {
				r.fail("address", err)
				continue
			}
			r.view.addresses[a] = true
		}
	}
	for k := range t.entries {
		if r.desired.entryRefs[k] > 0 && !r.view.sets[k.set][k.entry] {
			r.addEntry(k)
		}
	}
	for k := range t.virtualServers {
		r.reconcileVirtualServer(k)
	}
	for k := range t.entries {
		if r.desired.entryRefs[k] == 0 && r.view.sets[k.set][k.entry] {
			r.writes++
			if err := r.k.IPSet.DeleteEntry(k.set, k.entry); err != nil && !errors.Is(err, ipset.ErrNotFound) {
				r.fail("ipset", err)
				continue
			}
			delete(r.view.sets[k.set], k.entry)
		}
	}
	for a := range t.addresses {
		if r.desired.addrRefs[a] == 0 && r.view.addresses[a] {
			r.writes++
			if err := r.k.Netif.DeleteDummyAddress(a); err != nil && !errors.Is(err, netif.ErrNotFound) {
				r.fail("address", err)
				continue
			}
			delete(r.view.addresses, a)
		}
	}
}

func (r *reconciler) addEntry(k setEntryKey) {
	members, ok := r.view.sets[k.set]
	if !ok {
		r.fail("ipset", fmt.Errorf("add %s to ipset %s: set not present", k.entry.String(setTypeOf(k.set)), k.set))
		return
	}
	r.writes++
	if err := r.k.IPSet.AddEntry(k.set, k.entry); err != nil && !errors.Is(err, ipset.ErrExists) {
		r.fail("ipset", err)
		return
	}
	members[k.entry] = true
}

// reconcileVirtualServer makes the kernel's virtual server k match the
// desired one (or removes it).
func (r *reconciler) reconcileVirtualServer(k ipvs.VirtualServerKey) {
	want := r.desired.virtualServer(k)
	have := r.view.virtualServers[k]
	switch {
	case want == nil && have == nil:
		return
	case want == nil:
		// The Service (port) is gone: its connections go with it, as with
		// kube-proxy; only endpoints of a live Service drain.
		r.writes++
		if err := r.k.IPVS.DeleteVirtualServer(k); err != nil && !errors.Is(err, ipvs.ErrNotFound) {
			r.fail("ipvs", err)
			return
		}
		delete(r.view.virtualServers, k)
		delete(r.draining, k)
		return
	case have == nil:
		r.writes++
		if err := r.k.IPVS.AddVirtualServer(want.VirtualServer); err != nil {
			r.fail("ipvs", err)
			return
		}
		have = &kernelVirtualServer{vs: want.VirtualServer, realServers: map[ipvs.RealServerKey]ipvs.RealServer{}}
		r.view.virtualServers[k] = have
	case have.vs != want.VirtualServer:
		r.writes++
		if err := r.k.IPVS.UpdateVirtualServer(want.VirtualServer); err != nil {
			r.fail("ipvs", err)
			return
		}
		have.vs = want.VirtualServer
	}
	wanted := make(map[ipvs.RealServerKey]bool, len(want.RealServers))
	for _, rs := range want.RealServers {
		wanted[rs.RealServerKey] = true
		cur, ok := have.realServers[rs.RealServerKey]
		switch {
		case !ok:
			r.writes++
			if err := r.k.IPVS.AddRealServer(k, rs); err != nil {
				r.fail("ipvs", err)
				continue
			}
		case cur.Weight != rs.Weight:
			// Also revives an endpoint that was draining and came back.
			r.writes++
			if err := r.k.IPVS.UpdateRealServer(k, rs); err != nil {
				r.fail("ipvs", err)
				continue
			}
		}
		have.realServers[rs.RealServerKey] = rs
		if d := r.draining[k]; d != nil {
			delete(d, rs.RealServerKey)
		}
	}
	var gone []ipvs.RealServerKey
	for key := range have.realServers {
		if !wanted[key] {
			gone = append(gone, key)
		}
	}
	if len(gone) > 0 {
		r.removeRealServers(have, gone)
	}
}

// removeRealServers deletes real servers that no endpoint backs any more.
// A TCP one with connections is set to weight 0 instead and deleted by
// drain once they end: established connections finish, new ones go
// elsewhere. UDP and SCTP ones go at once, as in kube-proxy.
func (r *reconciler) removeRealServers(have *kernelVirtualServer, gone []ipvs.RealServerKey) {
	k := have.vs.VirtualServerKey
	if k.Protocol == ipvs.TCP {
		// Fresh connection counts: the view's may be a sync old.
		if current, err := r.k.IPVS.RealServers(k); err == nil {
			for _, rs := range current {
				if _, ok := have.realServers[rs.RealServerKey]; ok {
					have.realServers[rs.RealServerKey] = rs
				}
			}
		}
	}
	for _, key := range gone {
		rs := have.realServers[key]
		if k.Protocol == ipvs.TCP && rs.ActiveConnections+rs.InactiveConnections > 0 {
			if r.draining[k] == nil {
				r.draining[k] = map[ipvs.RealServerKey]time.Time{}
			}
			if _, ok := r.draining[k][key]; !ok {
				r.draining[k][key] = r.now.Add(r.cfg.DrainTimeout)
			}
			if rs.Weight != 0 {
				r.writes++
				rs.Weight = 0
				if err := r.k.IPVS.UpdateRealServer(k, rs); err != nil {
					r.fail("ipvs", err)
					continue
				}
				have.realServers[key] = rs
			}
			continue
		}
		r.deleteRealServer(have, key)
	}
}

func (r *reconciler) deleteRealServer(have *kernelVirtualServer, key ipvs.RealServerKey) {
	k := have.vs.VirtualServerKey
	r.writes++
	if err := r.k.IPVS.DeleteRealServer(k, key); err != nil && !errors.Is(err, ipvs.ErrNotFound) {
		r.fail("ipvs", err)
		return
	}
	delete(have.realServers, key)
	if k.Protocol == ipvs.UDP {
		r.staleFlows = append(r.staleFlows, conntrack.Filter{Protocol: conntrack.UDP, OrigDst: k.Address, OrigDstPort: k.Port, ReplySrc: key.Address, ReplySrcPort: key.Port})
	}
	if d := r.draining[k]; d != nil {
		delete(d, key)
		if len(d) == 0 {
			delete(r.draining, k)
		}
	}
}

// drain deletes draining real servers whose connections have ended or
// whose time is up. It reads only the virtual servers that have some.
func (r *reconciler) drain() {
	for k, rss := range r.draining {
		have := r.view.virtualServers[k]
		if have == nil {
			delete(r.draining, k)
			continue
		}
		current, err := r.k.IPVS.RealServers(k)
		if err != nil {
			r.fail("ipvs", err)
			continue
		}
		conns := map[ipvs.RealServerKey]int{}
		for _, rs := range current {
			conns[rs.RealServerKey] = rs.ActiveConnections + rs.InactiveConnections
		}
		for key, deadline := range rss {
			if n, ok := conns[key]; !ok || n == 0 || !r.now.Before(deadline) {
				r.deleteRealServer(have, key)
			}
		}
	}
}

// drainingCount is the number of real servers at weight 0 waiting.
func drainingCount(d map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time) int {
	n := 0
	for _, rss := range d {
		n += len(rss)
	}
	return n
}

// adoptDraining treats owned real servers that the kernel holds at weight 0
// and nobody wants as draining: after a restart they finish as they would
// have.
func adoptDraining(view *kernelView, desired *desiredState, draining map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]time.Time, deadline time.Time) {
	for k, kvs := range view.virtualServers {
		want := desired.virtualServer(k)
		if want == nil {
			continue
		}
		wanted := map[ipvs.RealServerKey]bool{}
		for _, rs := range want.RealServers {
			wanted[rs.RealServerKey] = true
		}
		for key, rs := range kvs.realServers {
			if rs.Weight == 0 && !wanted[key] && k.Protocol == ipvs.TCP {
				if draining[k] == nil {
					draining[k] = map[ipvs.RealServerKey]time.Time{}
				}
				if _, ok := draining[k][key]; !ok {
					draining[k][key] = deadline
				}
			}
		}
	}
}
