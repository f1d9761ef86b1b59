package inspect

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

// Exit codes of `inspect --check`, for probes and scripts.
const (
	CheckAgree  = 0 // the kernel holds what the proxier would program now
	CheckDiffer = 1 // some owned object is missing, extra or wrong
	CheckError  = 2 // the comparison could not be made
)

// Kinds of Difference.
const (
	diffMissing = "missing"
	diffExtra   = "extra"
	// wrong- and an attribute ipvsproxy.VirtualServerChanges names: what the
	// reconciler rewrites.
	diffScheduler      = "wrong-scheduler"
	diffSchedulerFlags = "wrong-scheduler-flags"
	diffPersistence    = "wrong-persistence"
	diffWeight         = "wrong-weight"
	// diffForeign is not a difference: a virtual server the proxier does
	// not own and will never touch, listed so a person knows it is there.
	diffForeign = "foreign"
)

// Difference is one way the kernel differs from the desired state.
type Difference struct {
	Kind string `json:"kind"`
	// Object names the kernel object ("virtual server TCP 10.96.0.10:80").
	Object  string `json:"object"`
	Service string `json:"service,omitempty"`
	Want    string `json:"want,omitempty"`
	Have    string `json:"have,omitempty"`
}

func (d Difference) String() string {
	s := d.Kind + " " + d.Object
	if d.Service != "" {
		s += " (" + d.Service + ")"
	}
	if d.Want != "" || d.Have != "" {
		s += fmt.Sprintf(": want %s, have %s", orNone(d.Want), orNone(d.Have))
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// CheckResult is the answer of --check.
type CheckResult struct {
	APIVersion  string       `json:"apiVersion"`
	Kind        string       `json:"kind"`
	Agree       bool         `json:"agree"`
	Differences []Difference `json:"differences"`
	// Foreign lists virtual servers the proxier does not own.
	Foreign []Difference `json:"foreign"`
}

// ExitCode is CheckAgree or CheckDiffer.
func (c CheckResult) ExitCode() int {
	if c.Agree {
		return CheckAgree
	}
	return CheckDiffer
}

// Check compares what the kernel holds of the proxier's objects with the
// snapshot's desired state: virtual servers (scheduler, its flags and
// persistence, compared as the reconciler compares them), real servers
// (weights; a draining one at weight 0 is expected), addresses on
// kube-ipvs0 and members of the owned sets. Ownership is the proxier's own
// rule, so a foreign virtual server is listed, never counted.
func Check(k KernelState, snap snapshot.Snapshot) CheckResult {
	res := CheckResult{APIVersion: APIVersion, Kind: "CheckResult", Differences: []Difference{}, Foreign: []Difference{}}
	diff := func(kind, object, service, want, have string) {
		res.Differences = append(res.Differences, Difference{Kind: kind, Object: object, Service: service, Want: want, Have: have})
	}
	owner := ownerFunc(k, &snap.Config)
	desired := map[ipvs.VirtualServerKey]snapshot.DesiredVirtualServer{}
	for _, d := range snap.VirtualServers {
		desired[d.VirtualServerKey] = d
	}
	draining := map[ipvs.VirtualServerKey]map[ipvs.RealServerKey]bool{}
	for _, d := range snap.Draining {
		if draining[d.VirtualServer] == nil {
			draining[d.VirtualServer] = map[ipvs.RealServerKey]bool{}
		}
		draining[d.VirtualServer][d.RealServer] = true
	}
	inKernel := map[ipvs.VirtualServerKey]bool{}
	for _, kvs := range k.VirtualServers {
		key := kvs.VirtualServerKey
		inKernel[key] = true
		object := "virtual server " + key.String()
		d, want := desired[key]
		if !want {
			if drainingOnly(kvs.RealServers, draining[key]) {
				// A deleted Service's virtual server kept while its
				// connections end: expected.
				continue
			}
			if owner(key) == "foreign" {
				res.Foreign = append(res.Foreign, Difference{Kind: diffForeign, Object: object, Have: kvs.Scheduler})
			} else {
				diff(diffExtra, object, "", "", kvs.Scheduler)
			}
			continue
		}
		svc := d.ServicePort()
		// The reconciler's own comparison: what it would rewrite.
		for _, c := range ipvsproxy.VirtualServerChanges(kvs.VirtualServer, d.VirtualServer) {
			diff("wrong-"+c.Attribute, object, svc, c.Want, c.Have)
		}
		wantRS := map[ipvs.RealServerKey]int32{}
		for _, rs := range d.RealServers {
			wantRS[rs.RealServerKey] = rs.Weight
		}
		for _, krs := range kvs.RealServers {
			rsObject := fmt.Sprintf("real server %s of %s", krs.RealServerKey, key)
			w, ok := wantRS[krs.RealServerKey]
			delete(wantRS, krs.RealServerKey)
			switch {
			case !ok && draining[key][krs.RealServerKey] && krs.Weight == 0:
				// Draining at weight 0 until its connections end: expected.
			case !ok:
				diff(diffExtra, rsObject, svc, "", fmt.Sprintf("weight %d", krs.Weight))
			case w != krs.Weight:
				diff(diffWeight, rsObject, svc, fmt.Sprintf("weight %d", w), fmt.Sprintf("weight %d", krs.Weight))
			}
		}
		for _, rk := range slices.SortedFunc(maps.Keys(wantRS), compareRealKeys) {
			diff(diffMissing, fmt.Sprintf("real server %s of %s", rk, key), svc, fmt.Sprintf("weight %d", wantRS[rk]), "")
		}
	}
	for _, d := range snap.VirtualServers {
		if !inKernel[d.VirtualServerKey] {
			diff(diffMissing, "virtual server "+d.VirtualServerKey.String(), d.ServicePort(), d.Scheduler, "")
		}
	}
	// Addresses on kube-ipvs0 (nothing inside --ipvs-exclude-cidrs is ours).
	bound := map[netip.Addr]bool{}
	for _, a := range k.DummyAddresses {
		if !snap.Config.Excluded(a) {
			bound[a.Unmap()] = true
		}
	}
	for _, a := range snap.Addresses {
		if !bound[a] {
			diff(diffMissing, "address "+a.String()+" on "+owned.DummyInterface, "", "bound", "")
		}
		delete(bound, a)
	}
	for _, a := range slices.SortedFunc(maps.Keys(bound), netip.Addr.Compare) {
		diff(diffExtra, "address "+a.String()+" on "+owned.DummyInterface, "", "", "bound")
	}
	// Service CIDR routes on kube-ipvs0 (only ours are listed: proto 233).
	routed := map[netip.Prefix]bool{}
	for _, p := range k.ServiceRoutes {
		routed[p] = true
	}
	for _, p := range snap.Routes {
		if !routed[p] {
			diff(diffMissing, "local route "+p.String()+" on "+owned.DummyInterface, "", "routed", "")
		}
		delete(routed, p)
	}
	for _, p := range slices.SortedFunc(maps.Keys(routed), func(a, b netip.Prefix) int { return comparePrefixes(a, b) }) {
		diff(diffExtra, "local route "+p.String()+" on "+owned.DummyInterface, "", "", "routed")
	}
	// Members of the owned sets.
	wantSets := map[string]map[ipset.Entry]bool{}
	for _, e := range snap.SetEntries {
		if wantSets[e.Set] == nil {
			wantSets[e.Set] = map[ipset.Entry]bool{}
		}
		wantSets[e.Set][e.Entry] = true
	}
	// The ownership record holds one member per virtual server of ours.
	for _, d := range snap.VirtualServers {
		set, e := owned.Record(d.VirtualServerKey)
		if wantSets[set] == nil {
			wantSets[set] = map[ipset.Entry]bool{}
		}
		wantSets[set][e] = true
	}
	// So does a deleted Service's one that drains (kept above).
	for key := range draining {
		if _, ok := desired[key]; ok {
			continue
		}
		set, e := owned.Record(key)
		if wantSets[set] == nil {
			wantSets[set] = map[ipset.Entry]bool{}
		}
		wantSets[set][e] = true
	}
	for _, name := range proxier.OwnedSetNames(snap.Config.Families) {
		ks, ok := k.Sets[name]
		if !ok {
			diff(diffMissing, "ipset "+name, "", "present", "")
			continue
		}
		want := wantSets[name]
		have := map[ipset.Entry]bool{}
		for _, e := range ks.Entries {
			have[e] = true
			if !want[e] {
				diff(diffExtra, "member "+e.String(ks.Type)+" of ipset "+name, "", "", "present")
			}
		}
		var missing []string
		for e := range want {
			if !have[e] {
				missing = append(missing, "member "+e.String(ks.Type)+" of ipset "+name)
			}
		}
		slices.Sort(missing)
		for _, m := range missing {
			diff(diffMissing, m, "", "present", "")
		}
	}
	slices.SortStableFunc(res.Differences, func(a, b Difference) int { return strings.Compare(a.Object, b.Object) })
	res.Agree = len(res.Differences) == 0
	return res
}

func compareRealKeys(a, b ipvs.RealServerKey) int {
	return netip.AddrPortFrom(a.Address, a.Port).Compare(netip.AddrPortFrom(b.Address, b.Port))
}

// drainingOnly reports whether a virtual server nobody wants holds only real
// servers draining at weight 0.
func drainingOnly(rss []KernelRealServer, draining map[ipvs.RealServerKey]bool) bool {
	if len(rss) == 0 {
		return false
	}
	for _, rs := range rss {
		if !draining[rs.RealServerKey] || rs.Weight != 0 {
			return false
		}
	}
	return true
}
