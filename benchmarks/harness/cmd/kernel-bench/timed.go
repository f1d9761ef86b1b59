package main

import (
	"net/netip"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/callclock"
	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// timed wraps every adapter of k with c.
func timed(k adapters.Kernel, c *callclock.Clock) adapters.Kernel {
	out := k
	out.IPVS = timedIPVS{k.IPVS, c}
	out.Netif = timedNetif{k.Netif, c}
	out.IPSet = timedIPSet{k.IPSet, c}
	out.Conntrack = timedConntrack{k.Conntrack, c}
	out.IPTables = map[v1.IPFamily]iptables.Interface{}
	for f, ipt := range k.IPTables {
		out.IPTables[f] = timedIPTables{ipt, c}
	}
	return out
}

type timedIPVS struct {
	ipvs.Interface
	c *callclock.Clock
}

func (t timedIPVS) VirtualServers() ([]ipvs.VirtualServer, error) {
	defer t.c.Since("ipvs VirtualServers", time.Now())
	return t.Interface.VirtualServers()
}
func (t timedIPVS) AddVirtualServer(vs ipvs.VirtualServer) error {
	defer t.c.Since("ipvs AddVirtualServer", time.Now())
	return t.Interface.AddVirtualServer(vs)
}
func (t timedIPVS) UpdateVirtualServer(vs ipvs.VirtualServer) error {
	defer t.c.Since("ipvs UpdateVirtualServer", time.Now())
	return t.Interface.UpdateVirtualServer(vs)
}
func (t timedIPVS) DeleteVirtualServer(k ipvs.VirtualServerKey) error {
	defer t.c.Since("ipvs DeleteVirtualServer", time.Now())
	return t.Interface.DeleteVirtualServer(k)
}
func (t timedIPVS) RealServers(k ipvs.VirtualServerKey) ([]ipvs.RealServer, error) {
	defer t.c.Since("ipvs RealServers", time.Now())
	return t.Interface.RealServers(k)
}
func (t timedIPVS) ListedRealServers(k ipvs.VirtualServerKey, into []ipvs.RealServer) ([]ipvs.RealServer, error) {
	defer t.c.Since("ipvs ListedRealServers", time.Now())
	return t.Interface.ListedRealServers(k, into)
}
func (t timedIPVS) AddRealServer(k ipvs.VirtualServerKey, rs ipvs.RealServer) error {
	defer t.c.Since("ipvs AddRealServer", time.Now())
	return t.Interface.AddRealServer(k, rs)
}

// WriteRealServers keeps the kernel's batches (one timed call per batch):
// without it the embedded Interface would hide them and the proxier would
// write one call each here.
func (t timedIPVS) WriteRealServers(ws []ipvs.RealServerWrite) []error {
	defer t.c.Since("ipvs WriteRealServers", time.Now())
	return ipvs.WriteRealServers(t.Interface, ws)
}

// EachRealServerList keeps the kernel's table read (timed without the
// proxier's work on each list, which runs inside it).
func (t timedIPVS) EachRealServerList(fn func(ipvs.VirtualServerKey, []ipvs.RealServer) error) error {
	table, ok := t.Interface.(ipvs.RealServerTable)
	if !ok {
		return ipvs.ErrUnsupported
	}
	start := time.Now()
	var inFn time.Duration
	err := table.EachRealServerList(func(k ipvs.VirtualServerKey, rss []ipvs.RealServer) error {
		fnStart := time.Now()
		defer func() { inFn += time.Since(fnStart) }()
		return fn(k, rss)
	})
	t.c.Since("ipvs EachRealServerList", start.Add(inFn))
	return err
}

// AddVirtualServers keeps the kernel's batches (one timed call per batch).
func (t timedIPVS) AddVirtualServers(vss []ipvs.VirtualServer) []error {
	defer t.c.Since("ipvs AddVirtualServers", time.Now())
	return ipvs.AddVirtualServers(t.Interface, vss)
}

var (
	_ ipvs.RealServerWriter   = timedIPVS{}
	_ ipvs.RealServerTable    = timedIPVS{}
	_ ipvs.VirtualServerAdder = timedIPVS{}
)

func (t timedIPVS) UpdateRealServer(k ipvs.VirtualServerKey, rs ipvs.RealServer) error {
	defer t.c.Since("ipvs UpdateRealServer", time.Now())
	return t.Interface.UpdateRealServer(k, rs)
}
func (t timedIPVS) DeleteRealServer(k ipvs.VirtualServerKey, rs ipvs.RealServerKey) error {
	defer t.c.Since("ipvs DeleteRealServer", time.Now())
	return t.Interface.DeleteRealServer(k, rs)
}
func (t timedIPVS) SetTimeouts(to ipvs.Timeouts) error {
	defer t.c.Since("ipvs SetTimeouts", time.Now())
	return t.Interface.SetTimeouts(to)
}

type timedNetif struct {
	netif.Interface
	c *callclock.Clock
}

// The kernel's address batches pass through the timing.
var _ netif.AddressBatcher = timedNetif{}

func (t timedNetif) AddDummyAddresses(addrs []netip.Addr) []error {
	defer t.c.Since("netif AddDummyAddresses", time.Now())
	return netif.AddDummyAddresses(t.Interface, addrs)
}
func (t timedNetif) DeleteDummyAddresses(addrs []netip.Addr) []error {
	defer t.c.Since("netif DeleteDummyAddresses", time.Now())
	return netif.DeleteDummyAddresses(t.Interface, addrs)
}

func (t timedNetif) EnsureDummy() error {
	defer t.c.Since("netif EnsureDummy", time.Now())
	return t.Interface.EnsureDummy()
}
func (t timedNetif) DeleteDummy() error {
	defer t.c.Since("netif DeleteDummy", time.Now())
	return t.Interface.DeleteDummy()
}
func (t timedNetif) DummyAddresses() ([]netip.Addr, error) {
	defer t.c.Since("netif DummyAddresses", time.Now())
	return t.Interface.DummyAddresses()
}
func (t timedNetif) AddDummyAddress(a netip.Addr) error {
	defer t.c.Since("netif AddDummyAddress", time.Now())
	return t.Interface.AddDummyAddress(a)
}
func (t timedNetif) DeleteDummyAddress(a netip.Addr) error {
	defer t.c.Since("netif DeleteDummyAddress", time.Now())
	return t.Interface.DeleteDummyAddress(a)
}
func (t timedNetif) ServiceRoutes() ([]netip.Prefix, error) {
	defer t.c.Since("netif ServiceRoutes", time.Now())
	return t.Interface.ServiceRoutes()
}
func (t timedNetif) AddServiceRoute(p netip.Prefix) error {
	defer t.c.Since("netif AddServiceRoute", time.Now())
	return t.Interface.AddServiceRoute(p)
}
func (t timedNetif) DeleteServiceRoute(p netip.Prefix) error {
	defer t.c.Since("netif DeleteServiceRoute", time.Now())
	return t.Interface.DeleteServiceRoute(p)
}
func (t timedNetif) HostAddresses() ([]netip.Addr, error) {
	defer t.c.Since("netif HostAddresses", time.Now())
	return t.Interface.HostAddresses()
}
func (t timedNetif) Addresses() ([]netip.Addr, []netip.Addr, error) {
	defer t.c.Since("netif Addresses", time.Now())
	return t.Interface.Addresses()
}

type timedIPSet struct {
	ipset.Interface
	c *callclock.Clock
}

// The kernel's batches pass through the timing (else the proxier would
// write one member a call here and in no daemon).
var (
	_ ipset.EntryAdder   = timedIPSet{}
	_ ipset.EntryDeleter = timedIPSet{}
)

func (t timedIPSet) Sets() ([]ipset.Set, error) {
	defer t.c.Since("ipset Sets", time.Now())
	return t.Interface.Sets()
}
func (t timedIPSet) CreateSet(s ipset.Set) error {
	defer t.c.Since("ipset CreateSet", time.Now())
	return t.Interface.CreateSet(s)
}
func (t timedIPSet) DestroySet(name string) error {
	defer t.c.Since("ipset DestroySet", time.Now())
	return t.Interface.DestroySet(name)
}
func (t timedIPSet) Entries(name string) ([]ipset.Entry, error) {
	defer t.c.Since("ipset Entries", time.Now())
	return t.Interface.Entries(name)
}
func (t timedIPSet) EachEntry(name string, fn func(ipset.Entry)) error {
	defer t.c.Since("ipset EachEntry", time.Now())
	return t.Interface.EachEntry(name, fn)
}
func (t timedIPSet) AddEntry(name string, e ipset.Entry) error {
	defer t.c.Since("ipset AddEntry", time.Now())
	return t.Interface.AddEntry(name, e)
}

// AddEntries keeps the kernel's batches, as timedIPVS.WriteRealServers does.
func (t timedIPSet) AddEntries(name string, es []ipset.Entry) []error {
	defer t.c.Since("ipset AddEntries", time.Now())
	return ipset.AddEntries(t.Interface, name, es)
}
func (t timedIPSet) DeleteEntry(name string, e ipset.Entry) error {
	defer t.c.Since("ipset DeleteEntry", time.Now())
	return t.Interface.DeleteEntry(name, e)
}

// DeleteEntries keeps the kernel's batches, as AddEntries does.
func (t timedIPSet) DeleteEntries(name string, es []ipset.Entry) []error {
	defer t.c.Since("ipset DeleteEntries", time.Now())
	return ipset.DeleteEntries(t.Interface, name, es)
}
func (t timedIPSet) SwapSets(a, b string) error {
	defer t.c.Since("ipset SwapSets", time.Now())
	return t.Interface.SwapSets(a, b)
}

type timedIPTables struct {
	iptables.Interface
	c *callclock.Clock
}

func (t timedIPTables) Restore(data []byte) error {
	defer t.c.Since("iptables Restore", time.Now())
	return t.Interface.Restore(data)
}
func (t timedIPTables) Save(table iptables.Table) ([]byte, error) {
	defer t.c.Since("iptables Save", time.Now())
	return t.Interface.Save(table)
}
func (t timedIPTables) SaveTables(tables ...iptables.Table) (map[iptables.Table][]byte, error) {
	defer t.c.Since("iptables SaveTables", time.Now())
	return t.Interface.SaveTables(tables...)
}
func (t timedIPTables) EnsureRule(pos iptables.Position, table iptables.Table, chain string, rule ...string) (bool, error) {
	defer t.c.Since("iptables EnsureRule", time.Now())
	return t.Interface.EnsureRule(pos, table, chain, rule...)
}
func (t timedIPTables) DeleteRule(table iptables.Table, chain string, rule ...string) error {
	defer t.c.Since("iptables DeleteRule", time.Now())
	return t.Interface.DeleteRule(table, chain, rule...)
}

type timedConntrack struct {
	conntrack.Interface
	c *callclock.Clock
}

func (t timedConntrack) Flows(family int) ([]conntrack.Flow, error) {
	defer t.c.Since("conntrack Flows", time.Now())
	return t.Interface.Flows(family)
}
func (t timedConntrack) DeleteFlows(filters ...conntrack.Filter) (int, error) {
	defer t.c.Since("conntrack DeleteFlows", time.Now())
	return t.Interface.DeleteFlows(filters...)
}
func (t timedConntrack) DeleteFlowsMatching(family int, protocol uint8, stale func(conntrack.Flow) bool) (int, error) {
	defer t.c.Since("conntrack DeleteFlowsMatching", time.Now())
	return t.Interface.DeleteFlowsMatching(family, protocol, stale)
}
