package ipvsproxy

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	networking "k8s.io/api/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// This file keeps the cluster's Service CIDRs as the networking.k8s.io/v1
// ServiceCIDR objects name them (KEP-1880). routes.go decides which of them
// become one local route each on kube-ipvs0.

// SetServiceCIDR records a ServiceCIDR object (added or updated). One
// that is terminating still has cluster IPs allocated from it, so it stays
// until it is deleted.
func (t *ChangeTracker) SetServiceCIDR(obj *networking.ServiceCIDR) {
	var ranges []netip.Prefix
	for _, s := range obj.Spec.CIDRs {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			klog.InfoS("Ignoring a CIDR of a ServiceCIDR that does not parse", "serviceCIDR", obj.Name, "cidr", s)
			continue
		}
		ranges = append(ranges, p.Masked())
	}
	t.mu.Lock()
	if slices.Equal(t.serviceCIDRs[obj.Name], ranges) {
		t.mu.Unlock()
		return
	}
	t.serviceCIDRs[obj.Name] = ranges
	t.serviceCIDRsChanged()
	t.mu.Unlock()
	t.fire()
}

// DeleteServiceCIDR forgets a ServiceCIDR object.
func (t *ChangeTracker) DeleteServiceCIDR(name string) {
	t.mu.Lock()
	if _, ok := t.serviceCIDRs[name]; !ok {
		t.mu.Unlock()
		return
	}
	delete(t.serviceCIDRs, name)
	t.serviceCIDRsChanged()
	t.mu.Unlock()
	t.fire()
}

// serviceCIDRsChanged makes the next sync a full one: whether a cluster IP
// is bound depends on the ranges. Called with the lock held.
func (t *ChangeTracker) serviceCIDRsChanged() {
	t.pending.ServiceCIDRsChanged = true
	if t.pending.oldest.IsZero() {
		t.pending.oldest = time.Now()
	}
}

// ServiceCIDRRanges lists the ranges of every ServiceCIDR object seen,
// sorted and without repeats.
func (t *ChangeTracker) ServiceCIDRRanges() []netip.Prefix {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []netip.Prefix
	for _, rs := range t.serviceCIDRs {
		out = append(out, rs...)
	}
	return SortedPrefixes(out)
}

// ServiceCIDRHandler adapts the tracker to a ServiceCIDR informer.
func (t *ChangeTracker) ServiceCIDRHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.onServiceCIDR(obj) },
		UpdateFunc: func(_, obj any) { t.onServiceCIDR(obj) },
		DeleteFunc: func(obj any) {
			if s, ok := untombstone(obj).(*networking.ServiceCIDR); ok {
				t.DeleteServiceCIDR(s.Name)
			}
		},
	}
}

func (t *ChangeTracker) onServiceCIDR(obj any) {
	if s, ok := obj.(*networking.ServiceCIDR); ok {
		t.SetServiceCIDR(s)
	}
}

func SortedPrefixes(ps []netip.Prefix) []netip.Prefix {
	out := slices.Clone(ps)
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out)
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
