package proxier

import (
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/listeners"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"k8s.io/klog/v2"
)

// kernelView is what the kernel holds of the objects the proxier owns, as
// last read (full sync) and kept up to date by every successful write.
type kernelView struct {
	virtualServers map[ipvs.VirtualServerKey]*kernelVirtualServer
	// foreign are virtual servers someone else created; never written.
	foreign   map[ipvs.VirtualServerKey]bool
	addresses map[netip.Addr]bool
	// routes are our Service CIDR routes on kube-ipvs0 (ownership.go).
	routes map[netip.Prefix]bool
	// sets maps each owned set present in the kernel with the right type
	// to its members, the ownership record's included (ownership.go).
	sets map[string]*ipset.EntryMap[struct{}]
	// wrongSets are owned sets present with another type or family (an
	// older layout); the reconciler replaces them.
	wrongSets map[string]ipset.Set
	// hostAddresses are the node's addresses outside kube-ipvs0.
	hostAddresses []netip.Addr
	// listening are the node's listening sockets (the node guard).
	listening []listeners.Listener
	// unclaimedAtRead are the owned virtual servers, and the ownership
	// records without one, that no Service claimed when the view was read.
	// With the keys whose last claim the build dropped since
	// (Touched.Released) they are what a full sync may remove
	// (fullScope.virtualServersToRemove), found without looking up every
	// key of the view and of the records again.
	unclaimedAtRead []ipvs.VirtualServerKey
	// outOfStepAtRead are the keys a Service won when the view was read
	// whose virtual server the kernel did not hold exactly as won (or not
	// as ours at all). With the keys whose winner changed since
	// (Touched.Rewon) and those with a status, they are what a full sync
	// compares: the read compared every other winner already.
	outOfStepAtRead []ipvs.VirtualServerKey
	// realServerReads says how the read took our virtual servers' real
	// servers: from the kernel's table in one pass (ipvs.RealServerTable,
	// /proc/net/ip_vs), or one netlink dump each (no table, a table read
	// that failed or stopped early, a virtual server it missed).
	realServerReads snapshot.FullRead
	// recordsWithVirtualServer and inStepWinners are the read's counts
	// that completeAgainst checks against the record sets and the desired
	// state.
	recordsWithVirtualServer, inStepWinners int
}

// Its real servers are one of two lists, and neither while a full read has
// listed it but not read them yet (unread): 96 bytes in all, as many
// as a view of 50,000 virtual servers holds.
type kernelVirtualServer struct {
	vs ipvs.VirtualServer
	// wanted, when not nil, is the list (shared): the desired state's own,
	// taken when the kernel was found to hold exactly it (holds), so a
	// view of 100,000 real servers in step costs no copy of them. A built
	// state is never changed; the view copies the list before it changes
	// it (putRealServer, removeRealServer). Its connection counts are
	// zero: whoever needs them reads the kernel (removeRealServers, drain).
	wanted ipvsproxy.RealServerList
	// realServers is the view's own list otherwise: behind a pointer, as
	// few virtual servers keep one for long.
	realServers *realServerList
}

// noRealServers is an empty list, not nil, that a virtual server wanted
// without real servers shares.
var noRealServers = ipvsproxy.RealServerList{}

// shared: the view's list is the desired state's (wanted).
func (kv *kernelVirtualServer) shared() bool { return kv.wanted != nil }

// unread: a full read listed it and has not read its real servers yet.
func (kv *kernelVirtualServer) unread() bool { return kv.wanted == nil && kv.realServers == nil }

// put makes read the view's virtual server k, in the room of the one the
// view held (a period's re-check reads a tenth of them again).
func (v *kernelView) put(k ipvs.VirtualServerKey, read kernelVirtualServer) {
	if have := v.virtualServers[k]; have != nil {
		*have = read
		return
	}
	added := read
	v.virtualServers[k] = &added
}

// shareRealServers makes the view's list want's, which the kernel holds.
func (kv *kernelVirtualServer) shareRealServers(want ipvsproxy.RealServerList) {
	if want == nil {
		want = noRealServers
	}
	kv.realServers, kv.wanted = nil, want
}

// newKernelVirtualServer is vs with rss, its own list.
func newKernelVirtualServer(vs ipvs.VirtualServer, rss realServerList) *kernelVirtualServer {
	kv := &kernelVirtualServer{vs: vs}
	kv.ownRealServers(rss)
	return kv
}

// ownRealServers makes l the view's own list.
func (kv *kernelVirtualServer) ownRealServers(l realServerList) {
	kv.realServers, kv.wanted = &l, nil
}

// realServer is the view's real server at k.
func (kv *kernelVirtualServer) realServer(k ipvs.RealServerKey) (ipvs.RealServer, bool) {
	if kv.shared() {
		return kv.wanted.Find(k)
	}
	return kv.realServers.get(k)
}

// realServerCount is how many real servers the view holds.
func (kv *kernelVirtualServer) realServerCount() int {
	if kv.shared() {
		return len(kv.wanted)
	}
	return len(*kv.realServers)
}

// eachRealServer yields the view's real servers in order.
func (kv *kernelVirtualServer) eachRealServer() iter.Seq[ipvs.RealServer] {
	return func(yield func(ipvs.RealServer) bool) {
		if kv.shared() {
			for _, rs := range kv.wanted.All() {
				if !yield(rs) {
					return
				}
			}
			return
		}
		for _, rs := range *kv.realServers {
			if !yield(rs) {
				return
			}
		}
	}
}

// holds: the view holds exactly the desired real servers want, at their
// weights (both are sorted the same way).
func (kv *kernelVirtualServer) holds(want ipvsproxy.RealServerList) bool {
	if !kv.shared() {
		return want.Equal(*kv.realServers)
	}
	if len(kv.wanted) > 0 && len(want) == len(kv.wanted) && &kv.wanted[0] == &want[0] {
		// The list the read already shared (readVirtualServer), compared
		// again by the writer loop: the same elements.
		return true
	}
	return slices.Equal(kv.wanted, want)
}

// putRealServer adds or replaces rs in the view, on a copy of a shared list.
func (kv *kernelVirtualServer) putRealServer(rs ipvs.RealServer) {
	kv.own()
	kv.realServers.put(rs)
}

// removeRealServer drops k from the view, on a copy of a shared list.
func (kv *kernelVirtualServer) removeRealServer(k ipvs.RealServerKey) {
	kv.own()
	kv.realServers.remove(k)
}

func (kv *kernelVirtualServer) own() {
	if kv.shared() {
		l := make(realServerList, 0, len(kv.wanted))
		for _, rs := range kv.wanted.All() {
			l = append(l, rs)
		}
		kv.ownRealServers(l)
	}
}

// realServerList is a virtual server's real servers as the kernel holds
// them, sorted by address and port like the desired state's. A slice costs
// the 56 bytes of each where a map cost about 170 (a view of
// 100,000 took 17 MB), and it is searched without hashing.
type realServerList []ipvs.RealServer

func byRealServerKey(rs ipvs.RealServer, k ipvs.RealServerKey) int {
	return ipvsproxy.CompareRealServerKeys(rs.RealServerKey, k)
}

// newRealServerList keeps what the adapter listed, a slice of its own
// already in this order; a full read lists every real server of the node,
// and a copy of each (100,000 at 10,000 Services) was garbage at once.
func newRealServerList(rss []ipvs.RealServer) realServerList {
	l := realServerList(rss)
	byKey := func(a, b ipvs.RealServer) int {
		return ipvsproxy.CompareRealServerKeys(a.RealServerKey, b.RealServerKey)
	}
	if !slices.IsSortedFunc(l, byKey) {
		slices.SortFunc(l, byKey)
	}
	return l
}

func (l realServerList) get(k ipvs.RealServerKey) (ipvs.RealServer, bool) {
	if i, ok := slices.BinarySearchFunc(l, k, byRealServerKey); ok {
		return l[i], true
	}
	return ipvs.RealServer{}, false
}

// put adds or replaces rs; adding in order (a cold sync) appends.
func (l *realServerList) put(rs ipvs.RealServer) {
	if n := len(*l); n == 0 || ipvsproxy.CompareRealServerKeys((*l)[n-1].RealServerKey, rs.RealServerKey) < 0 {
		*l = append(*l, rs)
		return
	}
	i, ok := slices.BinarySearchFunc(*l, rs.RealServerKey, byRealServerKey)
	if ok {
		(*l)[i] = rs
		return
	}
	*l = slices.Insert(*l, i, rs)
}

func (l *realServerList) remove(k ipvs.RealServerKey) {
	if i, ok := slices.BinarySearchFunc(*l, k, byRealServerKey); ok {
		*l = slices.Delete(*l, i, i+1)
	}
}

// readVirtualServer is vs as the kernel holds it, its real servers listed.
// When they are exactly the desired state's (want, possibly nil), the view
// takes want's list, as the writer loop would on comparing them
// (holds): a full read of 10,000 virtual servers otherwise held
// every real server twice until the loop reached each, 6 MB at 10 a
// virtual server, which the collector's heap goal multiplied into the
// daemon's peak. The list is read into room (nil: none), which a caller
// reading many lends to each; only a list that differs is copied out of it.
func readVirtualServer(k adapters.Kernel, vs ipvs.VirtualServer, want *ipvsproxy.VirtualServerState, room *[]ipvs.RealServer) (kernelVirtualServer, error) {
	var into []ipvs.RealServer
	if room != nil {
		into = *room
	}
	rss, err := listedRealServers(k, vs.VirtualServerKey, into)
	if err != nil {
		return kernelVirtualServer{}, err
	}
	if room != nil {
		*room = rss // the same room, or larger
	}
	return viewOfRead(vs, rss, want, room != nil), nil
}

// viewOfRead is vs as read with its real servers rss (sorted here, in
// place). lent: rss is the reader's room, copied out unless want's list is
// the same and shared instead.
func viewOfRead(vs ipvs.VirtualServer, rss []ipvs.RealServer, want *ipvsproxy.VirtualServerState, lent bool) kernelVirtualServer {
	read := kernelVirtualServer{vs: vs}
	l := newRealServerList(rss)
	switch {
	case want != nil && want.RealServers.Equal(l):
		read.shareRealServers(want.RealServers)
	case lent:
		read.ownRealServers(slices.Clone(l))
	default:
		read.ownRealServers(l)
	}
	return read
}

// desiredAtRead is what a full read asks of the desired state: the sync
// passes the DesiredState itself; a re-check reading beside the sync loop
// (recheck.go) passes one that takes the proxier's lock for each question,
// as partial syncs change the desired state meanwhile.
type desiredAtRead interface {
	// Lookup is the winner of k, and whether any Service claims it.
	Lookup(k ipvs.VirtualServerKey) (*ipvsproxy.VirtualServerState, bool)
	// SetMemberCount and VirtualServerCount size the view's maps.
	SetMemberCount(set string) int
	VirtualServerCount() int
}

// readKernel reads every object the proxier owns, and writes nothing: the
// reconciler is the only writer. Which virtual servers are owned is
// ownership.owns; the others are foreign. Owned objects inside
// --ipvs-exclude-cidrs are read too, so that a Service's can be kept up to
// date; the reconciler never deletes one nobody wants there. wasOurs says
// whether the previous view held a virtual server (nil at the first read):
// one it held stays ours without its record (ownership.recovered), as can
// one on a cluster IP that services (read only then) names. It is asked
// only of a virtual server without a record.
// The view is filled in room recycled from the previous one's (nil maps:
// none). Before the view is compared, completeAgainst finds what the
// read's own counts leave out.
func readKernel(k adapters.Kernel, cfg ipvsproxy.Config, desired desiredAtRead, services func() serviceEvidence, wasOurs func(ipvs.VirtualServerKey) bool, recycled recycledView) (*kernelView, error) {
	view := &kernelView{
		foreign:   map[ipvs.VirtualServerKey]bool{},
		routes:    map[netip.Prefix]bool{},
		sets:      map[string]*ipset.EntryMap[struct{}]{},
		wrongSets: map[string]ipset.Set{},
	}
	addrs, err := readAddresses(k)
	if err != nil {
		return nil, err
	}
	view.addresses = recycled.addressesFor(len(addrs.bound))
	for _, a := range addrs.bound {
		view.addresses[a.Unmap()] = true
	}
	routes, err := ownRoutes(k)
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		view.routes[r] = true
	}
	view.hostAddresses = addrs.host
	if k.Listeners != nil {
		if view.listening, err = k.Listeners.Listening(); err != nil {
			return nil, fmt.Errorf("list the node's listening sockets: %w", err)
		}
	}
	present, err := k.IPSet.Sets()
	if err != nil {
		return nil, fmt.Errorf("list ipsets: %w", err)
	}
	exists := map[string]ipset.Set{}
	for _, s := range present {
		exists[s.Name] = s
	}
	oldRecords := map[string][]ipset.Entry{}
	for _, want := range owned.Sets(cfg.Families, cfg.IPSetMaxElements) {
		have, ok := exists[want.Name]
		switch {
		case !ok:
			continue // the reconciler creates it
		case !sameSetLayout(have, want):
			view.wrongSets[want.Name] = have
			if owned.BaseName(want.Name) == owned.SetOwned && have.Type == want.Type {
				// Replaced below (a larger --ipset-max-elements): its
				// records still say what is ours until then.
				entries, err := k.IPSet.Entries(want.Name)
				if err != nil {
					return nil, fmt.Errorf("list ipset %s: %w", want.Name, err)
				}
				oldRecords[want.Name] = entries
			}
			continue
		}
		// Read straight into the view's map, sized for what the set is
		// to hold (in step, what it holds). A record set holds one member
		// per virtual server of its family, which the desired state does
		// not count as members: sized at none, its map was grown anew at
		// every full read.
		size := desired.SetMemberCount(want.Name)
		if owned.BaseName(want.Name) == owned.SetOwned {
			size = desired.VirtualServerCount()
		}
		members := recycled.setFor(want.Name, size)
		if err := k.IPSet.EachEntry(want.Name, func(e ipset.Entry) { members.Put(e, struct{}{}) }); err != nil {
			return nil, fmt.Errorf("list ipset %s: %w", want.Name, err)
		}
		view.sets[want.Name] = members
	}
	owner := readOwnership(cfg, present, view.sets, routes, addrs, services, wasOurs)
	for name, entries := range oldRecords {
		if owner.replaced == nil {
			owner.replaced = map[string]*ipset.EntryMap[struct{}]{}
		}
		owner.replaced[name] = entryMapOf(entries)
	}
	all, err := k.IPVS.VirtualServers()
	if err != nil {
		return nil, fmt.Errorf("list virtual servers: %w", err)
	}
	// Ours go into the view at once, their real servers unread, in one
	// allocation: the table read finds each by key there, and the list is
	// let go before it (at 50,000 Services the list and a map of what was
	// left to read held 5.5 MB through the read).
	ours := 0
	for i := range all {
		key := all[i].VirtualServerKey
		if !owner.isRecorded(key) && !owner.ownsUnrecorded(key, cfg) {
			view.foreign[key] = true
			continue
		}
		ours++
	}
	kept := make([]kernelVirtualServer, 0, ours)
	view.virtualServers = recycled.virtualServersFor(ours)
	for i := range all {
		if key := all[i].VirtualServerKey; !view.foreign[key] {
			kept = append(kept, kernelVirtualServer{vs: all[i]})
			view.virtualServers[key] = &kept[len(kept)-1]
		}
	}
	all = nil
	unread := len(kept)
	recordsWithVirtualServer, inStepWinners := 0, 0
	// settle makes kv what was read of it, and counts it.
	settle := func(kv *kernelVirtualServer, read kernelVirtualServer, want *ipvsproxy.VirtualServerState, claimed bool) {
		*kv = read
		unread--
		key := kv.vs.VirtualServerKey
		recorded := owner.isRecorded(key)
		if recorded {
			recordsWithVirtualServer++
		}
		switch {
		case !claimed:
			view.unclaimedAtRead = append(view.unclaimedAtRead, key)
		case want == nil:
			// Claimed, but lost to someone else's virtual server at the
			// last sync: it is compared if it wins again (Touched.Rewon).
		case inStep(kv, want, recorded):
			inStepWinners++
		default:
			view.outOfStepAtRead = append(view.outOfStepAtRead, key)
		}
	}
	if table, ok := k.IPVS.(ipvs.RealServerTable); ok && unread > 0 {
		err := table.EachRealServerList(func(key ipvs.VirtualServerKey, rss []ipvs.RealServer) error {
			kv := view.virtualServers[key]
			if kv == nil || !kv.unread() {
				return nil // someone else's, added since the list, or listed twice
			}
			want, claimed := desired.Lookup(key)
			settle(kv, viewOfRead(kv.vs, rss, want, true), want, claimed)
			view.realServerReads.FromTable++
			return nil
		})
		if err != nil {
			// What the table did not give is read one at a time below;
			// the sync's result and inspect say why.
			klog.V(2).InfoS("Reading the real servers one virtual server at a time", "err", err)
			view.realServerReads.TableError = err.Error()
		}
	} else if !ok {
		view.realServerReads.TableError = "the IPVS adapter has no table read"
	}
	// The rest one at a time: no table here, or a virtual server the
	// table's read missed (the table shifted under it meanwhile).
	var room []ipvs.RealServer
	for i := 0; i < len(kept) && unread > 0; i++ {
		kv := &kept[i]
		if !kv.unread() {
			continue
		}
		key := kv.vs.VirtualServerKey
		want, claimed := desired.Lookup(key)
		read, err := readVirtualServer(k, kv.vs, want, &room)
		if errors.Is(err, ipvs.ErrNotFound) {
			// Deleted meanwhile by someone else.
			delete(view.virtualServers, key)
			unread--
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list real servers of %s: %w", key, err)
		}
		settle(kv, read, want, claimed)
		view.realServerReads.Dumped++
	}
	view.recordsWithVirtualServer, view.inStepWinners = recordsWithVirtualServer, inStepWinners
	return view, nil
}

// completeAgainst adds to the lists of a view just read the keys its read
// could not account for (addUnclaimedRecords, addMissingWinners), against
// desired as it stands.
func (v *kernelView) completeAgainst(desired *ipvsproxy.DesiredState) {
	v.addUnclaimedRecords(desired, v.recordsWithVirtualServer)
	v.addMissingWinners(desired, v.inStepWinners)
}

// inStep: the virtual server read is exactly its winner want, real servers
// and ownership record included; the writer loop would find nothing to
// write.
func inStep(read *kernelVirtualServer, want *ipvsproxy.VirtualServerState, recorded bool) bool {
	return recorded && read.shared() && len(ipvsproxy.VirtualServerChanges(read.vs, want.VirtualServer)) == 0
}

// addMissingWinners adds to outOfStepAtRead the keys a Service won at the
// read that the kernel did not hold as ours. The winners read in step and
// those read out of step account for the others: when they account for
// all, there is none to look for.
func (v *kernelView) addMissingWinners(desired *ipvsproxy.DesiredState, inStepWinners int) {
	if inStepWinners+len(v.outOfStepAtRead) == desired.WinnerCount() {
		return
	}
	for k := range desired.VirtualServerKeys() {
		if v.virtualServers[k] == nil && desired.Winner(k) != nil {
			v.outOfStepAtRead = append(v.outOfStepAtRead, k)
		}
	}
}

// addUnclaimedRecords adds to unclaimedAtRead the ownership records in the
// view's record sets that have no virtual server in the view (a crash
// between the two steps, or one someone else deleted) and no claim. Each
// virtual server read with its record accounts for one record: when they
// account for all, there is none to look for.
func (v *kernelView) addUnclaimedRecords(desired *ipvsproxy.DesiredState, recordsWithVirtualServer int) {
	records := 0
	for name, members := range v.sets {
		if owned.BaseName(name) == owned.SetOwned {
			records += members.Len()
		}
	}
	if records == recordsWithVirtualServer {
		return
	}
	for name, members := range v.sets {
		if owned.BaseName(name) != owned.SetOwned {
			continue
		}
		for e := range members.Keys() {
			if k, ok := owned.RecordKey(e); ok && v.virtualServers[k] == nil && !desired.Claimed(k) {
				v.unclaimedAtRead = append(v.unclaimedAtRead, k)
			}
		}
	}
}

// recycledView is the room of a view's largest maps, emptied, for the next
// full read to fill instead of allocating its own: at 10,000 Services
// 10,000 virtual servers, up to as many addresses and 20,000 to 30,000 set
// members, every full sync. A map is taken again only for at least half
// as many entries as it held, so that a cluster that shrank does not keep
// the room of its largest size.
type recycledView struct {
	virtualServers map[ipvs.VirtualServerKey]*kernelVirtualServer
	addresses      map[netip.Addr]bool
	sets           map[string]*ipset.EntryMap[struct{}]
	// held are how many entries each map held, sets' by name.
	heldVirtualServers, heldAddresses int
	heldMembers                       map[string]int
}

// recycle empties v's maps, which lets the objects they held go, and gives
// their room; v is not used again.
func (v *kernelView) recycle() recycledView {
	r := recycledView{virtualServers: v.virtualServers, addresses: v.addresses, sets: v.sets,
		heldVirtualServers: len(v.virtualServers), heldAddresses: len(v.addresses), heldMembers: map[string]int{}}
	clear(v.virtualServers)
	clear(v.addresses)
	for name, members := range v.sets {
		r.heldMembers[name] = members.Len()
		members.Clear()
	}
	return r
}

// fits: room that held held entries is taken again for n.
func fits(held, n int) bool { return held > 0 && n >= held/2 }

func (r recycledView) virtualServersFor(n int) map[ipvs.VirtualServerKey]*kernelVirtualServer {
	if r.virtualServers != nil && fits(r.heldVirtualServers, n) {
		return r.virtualServers
	}
	return make(map[ipvs.VirtualServerKey]*kernelVirtualServer, n)
}

func (r recycledView) addressesFor(n int) map[netip.Addr]bool {
	if r.addresses != nil && fits(r.heldAddresses, n) {
		return r.addresses
	}
	return make(map[netip.Addr]bool, n)
}

func (r recycledView) setFor(name string, n int) *ipset.EntryMap[struct{}] {
	if members := r.sets[name]; members != nil && fits(r.heldMembers[name], n) {
		return members
	}
	return ipset.NewEntryMap[struct{}](n)
}

// listedRealServers lists the real servers of a virtual server the caller
// has just listed, with one netlink request (a full read makes one per
// virtual server). Only an empty answer, which is also what the kernel says
// of a virtual server deleted meanwhile, is asked again the way that tells
// the two apart.
func listedRealServers(k adapters.Kernel, key ipvs.VirtualServerKey, into []ipvs.RealServer) ([]ipvs.RealServer, error) {
	rss, err := k.IPVS.ListedRealServers(key, into)
	if err == nil && len(rss) == 0 {
		return k.IPVS.RealServers(key)
	}
	return rss, err
}

// sameSetLayout: a set can hold what want holds (bitmap:port has no family
// and holds every port). A hash set made smaller than --ipset-max-elements
// (by an older run, or kube-proxy's 65,536 under a larger flag) would refuse
// entries that the admission (ipvsproxy/admission.go) admitted, so it is replaced
// like a set of the wrong type; a larger one is kept.
func sameSetLayout(have, want ipset.Set) bool {
	if have.Type != want.Type {
		return false
	}
	if want.Type == ipset.BitmapPort {
		return true
	}
	return have.Family == want.Family && maxElemOf(have) >= maxElemOf(want)
}

// maxElemOf is a hash set's maxelem as the kernel applies it.
func maxElemOf(s ipset.Set) uint32 {
	if s.MaxElem == 0 {
		return ipset.DefaultMaxElem
	}
	return s.MaxElem
}
