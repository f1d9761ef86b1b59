package ipvsproxy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/ipvs"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// desiredState is the union of every Service's ServiceState, with clashes
// resolved: when two Services want the same virtual server (an external IP
// and port used twice, say) the older Service keeps it and the other gets a
// PortConflict problem. It is updated one Service at a time so that a sync
// costs what changed, not the size of the cluster.
type desiredState struct {
	services map[types.NamespacedName]*ServiceState
	// claims lists, per virtual server, every Service that wants it; the
	// first (oldest) one wins.
	claims    map[ipvs.VirtualServerKey][]claim
	addrRefs  map[netip.Addr]int
	entryRefs map[setEntryKey]int
}

type claim struct {
	service types.NamespacedName
	order   string // creation time, then name: a stable "older first" order
	vs      *VirtualServerState
}

// touched collects the kernel objects whose desired value may have changed.
type touched struct {
	virtualServers map[ipvs.VirtualServerKey]bool
	addresses      map[netip.Addr]bool
	entries        map[setEntryKey]bool
}

func newTouched() touched {
	return touched{virtualServers: map[ipvs.VirtualServerKey]bool{}, addresses: map[netip.Addr]bool{}, entries: map[setEntryKey]bool{}}
}

func newDesiredState() *desiredState {
	return &desiredState{
		services:  map[types.NamespacedName]*ServiceState{},
		claims:    map[ipvs.VirtualServerKey][]claim{},
		addrRefs:  map[netip.Addr]int{},
		entryRefs: map[setEntryKey]int{},
	}
}

// set replaces a Service's contribution (st nil removes it), recording in t
// what may have changed.
func (d *desiredState) set(name types.NamespacedName, st *ServiceState, t touched) {
	if old := d.services[name]; old != nil {
		for i := range old.VirtualServers {
			k := old.VirtualServers[i].VirtualServerKey
			d.claims[k] = slices.DeleteFunc(d.claims[k], func(c claim) bool { return c.service == name })
			if len(d.claims[k]) == 0 {
				delete(d.claims, k)
			}
			t.virtualServers[k] = true
		}
		for _, a := range old.Addresses {
			if d.addrRefs[a]--; d.addrRefs[a] <= 0 {
				delete(d.addrRefs, a)
			}
			t.addresses[a] = true
		}
		for _, e := range old.SetEntries {
			k := e.key()
			if d.entryRefs[k]--; d.entryRefs[k] <= 0 {
				delete(d.entryRefs, k)
			}
			t.entries[k] = true
		}
		delete(d.services, name)
	}
	if st == nil {
		return
	}
	d.services[name] = st
	order := fmt.Sprintf("%020d %s", st.Created.UnixNano(), name)
	for i := range st.VirtualServers {
		vs := &st.VirtualServers[i]
		k := vs.VirtualServerKey
		d.claims[k] = append(d.claims[k], claim{service: name, order: order, vs: vs})
		slices.SortFunc(d.claims[k], func(a, b claim) int { return cmp.Compare(a.order, b.order) })
		t.virtualServers[k] = true
	}
	for _, a := range st.Addresses {
		d.addrRefs[a]++
		t.addresses[a] = true
	}
	for _, e := range st.SetEntries {
		d.entryRefs[e.key()]++
		t.entries[e.key()] = true
	}
}

// virtualServer is the winning desired state of k, or nil.
func (d *desiredState) virtualServer(k ipvs.VirtualServerKey) *VirtualServerState {
	if c := d.claims[k]; len(c) > 0 {
		return c[0].vs
	}
	return nil
}

// conflicts lists a PortConflict problem for every Service that lost one of
// the given virtual servers.
func (d *desiredState) conflicts(keys map[ipvs.VirtualServerKey]bool) map[types.NamespacedName][]Problem {
	out := map[types.NamespacedName][]Problem{}
	for k := range keys {
		c := d.claims[k]
		for _, loser := range c[min(1, len(c)):] {
			st := d.services[loser.service]
			ref := st.serviceRef()
			out[loser.service] = append(out[loser.service], Problem{Object: ref, Reason: ReasonPortConflict,
				Message: fmt.Sprintf("%s %s is already used by Service %s; skipped", loser.vs.Kind, k, c[0].service)})
		}
	}
	return out
}

// serviceRef names the Service for an Event.
func (st *ServiceState) serviceRef() (ref v1.ObjectReference) {
	ref.Kind, ref.APIVersion, ref.Namespace, ref.Name = "Service", "v1", st.Name.Namespace, st.Name.Name
	return ref
}

// Dump renders the desired kernel state in a stable text form (golden
// tests, inspect).
func (d *desiredState) Dump() string {
	var b strings.Builder
	keys := make([]ipvs.VirtualServerKey, 0, len(d.claims))
	for k := range d.claims {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareVSKey)
	b.WriteString("virtual servers:\n")
	for _, k := range keys {
		writeVirtualServer(&b, d.virtualServer(k))
	}
	b.WriteString("addresses on " + DummyInterface + ":\n")
	addrs := make([]netip.Addr, 0, len(d.addrRefs))
	for a := range d.addrRefs {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	for _, a := range addrs {
		fmt.Fprintf(&b, "  %s\n", a)
	}
	b.WriteString("ipset entries:\n")
	entries := make([]string, 0, len(d.entryRefs))
	for k := range d.entryRefs {
		entries = append(entries, k.set+" "+k.entry.String(setTypeOf(k.set)))
	}
	slices.Sort(entries)
	for _, e := range entries {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

func writeVirtualServer(b *strings.Builder, vs *VirtualServerState) {
	fmt.Fprintf(b, "  %s %s", vs.VirtualServerKey, vs.Scheduler)
	if vs.PersistenceTimeout > 0 {
		fmt.Fprintf(b, " persistent %v", vs.PersistenceTimeout)
	}
	local := ""
	if vs.LocalOnly {
		local = " local"
	}
	if vs.InClusterOnly {
		local += " (none here: cluster endpoints, in-cluster sources only)"
	}
	fmt.Fprintf(b, "  # %s %s%s\n", vs.Port, vs.Kind, local)
	for _, rs := range vs.RealServers {
		fmt.Fprintf(b, "    -> %s weight %d\n", rs.RealServerKey, rs.Weight)
	}
}
