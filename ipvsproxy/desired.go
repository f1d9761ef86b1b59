package ipvsproxy

import (
	"cmp"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DesiredState is the union of what every Service wins, with clashes
// resolved: when two Services want the same virtual server (an external IP
// and port used twice, say) the older Service keeps it and the other gets a
// PortConflict problem; a virtual server someone else created in the kernel
// (foreign) beats every Service. A loser programs nothing for the key it
// lost: the set members and addresses of a virtual server count only while
// its Service wins it, so the loser's masquerade or source-range members
// never apply to the winner's traffic. It is updated one Service at a time
// so that a sync costs what changed, not the size of the cluster.
type DesiredState struct {
	Services map[types.NamespacedName]*ServiceState
	// The claims and reference counts are the desired state's own: only
	// the Model changes them (set, setForeign, setRouted, unexported), and
	// the writer reads them through the methods in desired_read.go, so a
	// count it relies on cannot be changed behind their back.
	//
	// claims lists, per virtual server, every Service that wants it; the
	// first (oldest) one wins unless the key is foreign.
	claims map[ipvs.VirtualServerKey][]claim
	// foreign are keys the kernel holds a virtual server at that the
	// proxier did not create (kernel.go: ownership).
	foreign map[ipvs.VirtualServerKey]bool
	// shared guards claims and foreign against SharedLookup, the one
	// reader beside the writer (a re-check's read); the writer's own reads
	// need no lock.
	shared   sync.RWMutex
	addrRefs map[netip.Addr]int
	// entryRefs count, per set, the virtual servers that want each member
	// (countEntry); entryCount is how many members are wanted.
	entryRefs  map[string]*ipset.EntryMap[int]
	entryCount int
	// Routes are the Service CIDRs routed local on kube-ipvs0 (routes.go).
	Routes []netip.Prefix
	// unrouted are ranges whose route is not in place, as the writer last
	// reported: the cluster IPs routed by them are bound one by one
	// meanwhile (setRouted).
	unrouted map[netip.Prefix]bool
	// Summary is what every sync reports about all Services (summary.go).
	Summary serviceSummary
}

// claim is a Service's claim to a virtual server: its state st (the name
// and creation time that order the claims) and its virtual server there.
// The desired state holds one per virtual server of the node: 24 bytes,
// where a copy of the name and the time took 64.
type claim struct {
	st *ServiceState
	vs *VirtualServerState
	// rank (claimRank), the Service's creation time and then its name
	// order the claims of a key: a stable order, the first wins.
	rank uint8
}

// service is the name of the Service that claims.
func (c claim) service() types.NamespacedName { return c.st.Name }

// compare orders claims: who wrote the address, then creation time, then
// the name as namespace/name.
func (c claim) compare(o claim) int {
	if n := cmp.Or(cmp.Compare(c.rank, o.rank), cmp.Compare(c.st.created, o.st.created)); n != 0 {
		return n
	}
	return strings.Compare(c.service().String(), o.service().String())
}

// claimRank puts the addresses that the API server or a controller with
// status rights assigned (cluster IPs, node ports, status.loadBalancer)
// before the ones any user with write access to a Service may type into
// spec.externalIPs: a tenant listing a load balancer pool's addresses as
// external IPs must not take a later LoadBalancer's traffic (and its source
// ranges) by being older.
func claimRank(kind VirtualServerKind) uint8 {
	if kind == KindExternalIP {
		return 1
	}
	return 0
}

// Touched collects the kernel objects whose desired value may have changed.
type Touched struct {
	VirtualServers map[ipvs.VirtualServerKey]bool
	Addresses      map[netip.Addr]bool
	Entries        map[SetEntryKey]bool
	// Only, when set, is asked before the desired state records a key. A
	// full sync compares every key of the kernel view and of the desired
	// state anyway; from the build it needs only the keys that have a
	// status (pending or failing: one to settle, or a backoff that a
	// change overrides). Recording every key of a cold sync at 10,000
	// Services held 5 MB for the sync's length, which the collector's heap
	// goal multiplies into the daemon's peak.
	Only touchFilter
	// Released are the keys whose last claim went away, recorded whatever
	// Only says: a full sync's view knows which keys were unclaimed when it
	// was read, and these are the ones unclaimed since.
	Released map[ipvs.VirtualServerKey]bool
	// Rewon, when not nil, records the keys whose winner changed (another
	// Service, a rebuilt one, none, or one again), whatever Only says: a
	// full sync whose read found the other winners in step compares only
	// these and what the read did not find in step (fullScope).
	Rewon map[ipvs.VirtualServerKey]bool
}

// touchFilter says which keys a Touched records (Touched.Only).
type touchFilter interface {
	KeepVirtualServer(ipvs.VirtualServerKey) bool
	KeepAddress(netip.Addr) bool
	KeepEntry(SetEntryKey) bool
}

// The desired state records through these, so that Only applies.
func (t Touched) virtualServer(k ipvs.VirtualServerKey) {
	if t.Only == nil || t.Only.KeepVirtualServer(k) {
		t.VirtualServers[k] = true
	}
}

func (t Touched) address(a netip.Addr) {
	if t.Only == nil || t.Only.KeepAddress(a) {
		t.Addresses[a] = true
	}
}

func (t Touched) entry(k SetEntryKey) {
	if t.Only == nil || t.Only.KeepEntry(k) {
		t.Entries[k] = true
	}
}

func NewTouched() Touched {
	return Touched{VirtualServers: map[ipvs.VirtualServerKey]bool{}, Addresses: map[netip.Addr]bool{}, Entries: map[SetEntryKey]bool{}, Released: map[ipvs.VirtualServerKey]bool{}}
}

func NewDesiredState() *DesiredState {
	return &DesiredState{
		Services:  map[types.NamespacedName]*ServiceState{},
		claims:    map[ipvs.VirtualServerKey][]claim{},
		foreign:   map[ipvs.VirtualServerKey]bool{},
		addrRefs:  map[netip.Addr]int{},
		entryRefs: map[string]*ipset.EntryMap[int]{},
		unrouted:  map[netip.Prefix]bool{},
		Summary:   newServiceSummary(),
	}
}

// set replaces a Service's contribution (st nil removes it), recording in t
// what may have changed.
func (d *DesiredState) set(name types.NamespacedName, st *ServiceState, t Touched) {
	if old := d.Services[name]; old != nil {
		for i := range old.VirtualServers {
			k := old.VirtualServers[i].VirtualServerKey
			before := d.Winner(k)
			d.shared.Lock()
			d.claims[k] = slices.DeleteFunc(d.claims[k], func(c claim) bool { return c.service() == name })
			if len(d.claims[k]) == 0 {
				delete(d.claims, k)
				t.Released[k] = true
			}
			d.shared.Unlock()
			d.rewin(k, before, t)
		}
		d.Summary.update(old, -1)
		delete(d.Services, name)
	}
	if st == nil {
		return
	}
	d.Services[name] = st
	d.Summary.update(st, 1)
	for i := range st.VirtualServers {
		vs := &st.VirtualServers[i]
		k := vs.VirtualServerKey
		before := d.Winner(k)
		d.shared.Lock()
		d.claims[k] = append(d.claims[k], claim{st: st, rank: claimRank(vs.Kind), vs: vs})
		slices.SortFunc(d.claims[k], claim.compare)
		d.shared.Unlock()
		d.rewin(k, before, t)
	}
}

// setForeign records whether the kernel holds someone else's virtual server
// at k (Model.TakeIn); the Service that wanted k then loses it, and
// programs nothing for it. It says whether that changed.
func (d *DesiredState) setForeign(k ipvs.VirtualServerKey, foreign bool, t Touched) bool {
	if d.foreign[k] == foreign {
		return false
	}
	before := d.Winner(k)
	d.shared.Lock()
	if foreign {
		d.foreign[k] = true
	} else {
		delete(d.foreign, k)
	}
	d.shared.Unlock()
	d.rewin(k, before, t)
	return true
}

// setRouted records whether range r's route is in place (the writer
// reports it after writing it: Model.TakeIn); while it is not, the cluster
// IPs it routes are bound one by one, each with its KUBE-IPVS-IPS member,
// as the builder binds an address outside every routed range. It says
// whether that changed.
func (d *DesiredState) setRouted(r netip.Prefix, inPlace bool, t Touched) bool {
	if d.unrouted[r] == !inPlace {
		return false
	}
	n := 1
	if inPlace {
		n = -1
	}
	for k := range d.claims {
		if vs := d.Winner(k); vs != nil && vs.RoutedBy() == r {
			d.bindUnrouted(vs, n, t)
		}
	}
	if inPlace {
		delete(d.unrouted, r)
	} else {
		d.unrouted[r] = true
	}
	return true
}

// bindUnrouted counts (n = 1) or uncounts (n = -1) the address of a routed
// cluster IP whose route is not in place, and its KUBE-IPVS-IPS member.
func (d *DesiredState) bindUnrouted(vs *VirtualServerState, n int, t Touched) {
	a := vs.Address
	if d.addrRefs[a] += n; d.addrRefs[a] <= 0 {
		delete(d.addrRefs, a)
	}
	t.address(a)
	k := SetEntryKey{Set: owned.SetName(owned.SetIPVSIPs, FamilyOf(a)), Entry: ipset.Entry{IP: a}}
	d.countEntry(k, n)
	t.entry(k)
}

// countEntry counts (n > 0) or uncounts (n < 0) the member k; one counted
// by nothing is forgotten.
func (d *DesiredState) countEntry(k SetEntryKey, n int) {
	refs := d.entryRefs[k.Set]
	was, _ := refs.Get(k.Entry)
	now := was + n
	switch {
	case now > 0:
		if refs == nil {
			refs = ipset.NewEntryMap[int](0)
			d.entryRefs[k.Set] = refs
		}
		if was <= 0 {
			d.entryCount++
		}
		refs.Put(k.Entry, now)
	case was > 0:
		refs.Delete(k.Entry)
		d.entryCount--
	}
}

// Winner is the desired state of k that counts, or nil.
func (d *DesiredState) Winner(k ipvs.VirtualServerKey) *VirtualServerState {
	if c := d.claims[k]; len(c) > 0 && !d.foreign[k] {
		return c[0].vs
	}
	return nil
}

// rewin moves k's contribution from the winner before a change to the
// winner after it. Every claim change goes through here, so the members and
// addresses counted are exactly those of winners.
func (d *DesiredState) rewin(k ipvs.VirtualServerKey, before *VirtualServerState, t Touched) {
	t.virtualServer(k)
	after := d.Winner(k)
	if before == after {
		return
	}
	if t.Rewon != nil {
		t.Rewon[k] = true
	}
	if before != nil {
		d.contribute(before, -1, t)
	}
	if after != nil {
		d.contribute(after, +1, t)
	}
}

func (d *DesiredState) contribute(vs *VirtualServerState, n int, t Touched) {
	if vs.Bound {
		a := vs.Address
		if d.addrRefs[a] += n; d.addrRefs[a] <= 0 {
			delete(d.addrRefs, a)
		}
		t.address(a)
	}
	if r := vs.RoutedBy(); r.IsValid() && d.unrouted[r] {
		d.bindUnrouted(vs, n, t)
	}
	for e := range vs.SetEntries.All() {
		k := e.Key()
		d.countEntry(k, n)
		t.entry(k)
	}
}

// VirtualServer is the winning desired state of k, or nil.
func (d *DesiredState) VirtualServer(k ipvs.VirtualServerKey) *VirtualServerState {
	return d.Winner(k)
}

// Owner is the Service that wins k, if any.
func (d *DesiredState) Owner(k ipvs.VirtualServerKey) (types.NamespacedName, bool) {
	if c := d.claims[k]; len(c) > 0 && !d.foreign[k] {
		return c[0].service(), true
	}
	return types.NamespacedName{}, false
}

// Conflicts lists a PortConflict problem for every Service that lost one of
// the given virtual servers, to another Service or to a foreign one.
func (d *DesiredState) Conflicts(keys iter.Seq[ipvs.VirtualServerKey]) map[types.NamespacedName][]Problem {
	out := map[types.NamespacedName][]Problem{}
	for k := range keys {
		c := d.claims[k]
		foreign := d.foreign[k]
		losers := c[min(1, len(c)):]
		if foreign {
			losers = c
		}
		if len(losers) == 0 {
			// The usual key, claimed once: no message to make (a full
			// sync asks about every key).
			continue
		}
		by, scope := "Service "+c[0].service().String(), ScopeCluster
		if foreign {
			by, scope = "a virtual server ipvsproxy did not create", ScopeNode
		}
		for _, loser := range losers {
			st := d.Services[loser.service()]
			ref := st.ServiceRef()
			out[loser.service()] = append(out[loser.service()], Problem{Object: ref, Reason: ReasonPortConflict, Scope: scope,
				Message: fmt.Sprintf("%s %s is already used by %s; skipped", loser.vs.Kind, k, by)})
		}
	}
	return out
}

// ServiceRef names the Service for an Event.
func (st *ServiceState) ServiceRef() (ref v1.ObjectReference) {
	ref.Kind, ref.APIVersion, ref.Namespace, ref.Name = "Service", "v1", st.Name.Namespace, st.Name.Name
	return ref
}

// Dump renders the desired kernel state in a stable text form (golden
// tests, inspect).
func (d *DesiredState) Dump() string {
	var b strings.Builder
	keys := make([]ipvs.VirtualServerKey, 0, len(d.claims))
	for k := range d.claims {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, CompareVSKey)
	b.WriteString("virtual servers:\n")
	for _, k := range keys {
		if vs := d.VirtualServer(k); vs != nil {
			writeVirtualServer(&b, vs)
		}
	}
	b.WriteString("addresses on " + owned.DummyInterface + ":\n")
	addrs := make([]netip.Addr, 0, len(d.addrRefs))
	for a := range d.addrRefs {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	for _, a := range addrs {
		fmt.Fprintf(&b, "  %s\n", a)
	}
	if len(d.Routes) > 0 {
		b.WriteString("local routes on " + owned.DummyInterface + ":\n")
		for _, r := range d.Routes {
			fmt.Fprintf(&b, "  %s\n", r)
		}
	}
	b.WriteString("ipset entries:\n")
	entries := make([]string, 0, d.entryCount)
	for k := range d.SetEntries() {
		entries = append(entries, k.Set+" "+k.Entry.String(owned.SetType(k.Set)))
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
	for _, rs := range vs.RealServers.All() {
		fmt.Fprintf(b, "    -> %s weight %d\n", rs.RealServerKey, rs.Weight)
	}
}
