package main

import (
	"net/netip"
	"sort"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/shape"
	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/netif"
	v1 "k8s.io/api/core/v1"
)

// clock adds up the wall time spent in each adapter call ("ipvs
// AddRealServer"), so a cold sync on the real kernel can be split into the
// kernel's share per kind of call and the proxier's own work (the rest):
// the floor's gap is then named, not guessed.
type clock struct {
	calls map[string]shape.CallTime
}

func newClock() *clock { return &clock{calls: map[string]shape.CallTime{}} }

func (c *clock) since(name string, start time.Time) {
	ct := c.calls[name]
	ct.Millis += float64(time.Since(start).Microseconds()) / 1000
	ct.Calls++
	c.calls[name] = ct
}

// reset starts a new count, returning the old one.
func (c *clock) reset() map[string]shape.CallTime {
	calls := c.calls
	c.calls = map[string]shape.CallTime{}
	return calls
}

// total is the time spent in every adapter call.
func total(calls map[string]shape.CallTime) float64 {
	var sum float64
	for _, ct := range calls {
		sum += ct.Millis
	}
	return sum
}

// names lists the calls, the longest first.
func names(calls map[string]shape.CallTime) []string {
	out := make([]string, 0, len(calls))
	for n := range calls {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return calls[out[i]].Millis > calls[out[j]].Millis })
	return out
}

// timed wraps every adapter of k with c.
func timed(k adapters.Kernel, c *clock) adapters.Kernel {
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
	c *clock
}

func (t timedIPVS) VirtualServers() ([]ipvs.VirtualServer, error) {
	defer t.c.since("ipvs VirtualServers", time.Now())
	return t.Interface.VirtualServers()
}
func (t timedIPVS) AddVirtualServer(vs ipvs.VirtualServer) error {
	defer t.c.since("ipvs AddVirtualServer", time.Now())
	return t.Interface.AddVirtualServer(vs)
}
func (t timedIPVS) UpdateVirtualServer(vs ipvs.VirtualServer) error {
	defer t.c.since("ipvs UpdateVirtualServer", time.Now())
	return t.Interface.UpdateVirtualServer(vs)
}
func (t timedIPVS) DeleteVirtualServer(k ipvs.VirtualServerKey) error {
	defer t.c.since("ipvs DeleteVirtualServer", time.Now())
	return t.Interface.DeleteVirtualServer(k)
}
func (t timedIPVS) RealServers(k ipvs.VirtualServerKey) ([]ipvs.RealServer, error) {
	defer t.c.since("ipvs RealServers", time.Now())
	return t.Interface.RealServers(k)
}
func (t timedIPVS) ListedRealServers(k ipvs.VirtualServerKey, into []ipvs.RealServer) ([]ipvs.RealServer, error) {
	defer t.c.since("ipvs ListedRealServers", time.Now())
	return t.Interface.ListedRealServers(k, into)
}
func (t timedIPVS) AddRealServer(k ipvs.VirtualServerKey, rs ipvs.RealServer) error {
	defer t.c.since("ipvs AddRealServer", time.Now())
	return t.Interface.AddRealServer(k, rs)
}
func (t timedIPVS) UpdateRealServer(k ipvs.VirtualServerKey, rs ipvs.RealServer) error {
	defer t.c.since("ipvs UpdateRealServer", time.Now())
	return t.Interface.UpdateRealServer(k, rs)
}
func (t timedIPVS) DeleteRealServer(k ipvs.VirtualServerKey, rs ipvs.RealServerKey) error {
	defer t.c.since("ipvs DeleteRealServer", time.Now())
	return t.Interface.DeleteRealServer(k, rs)
}
func (t timedIPVS) SetTimeouts(to ipvs.Timeouts) error {
	defer t.c.since("ipvs SetTimeouts", time.Now())
	return t.Interface.SetTimeouts(to)
}

type timedNetif struct {
	netif.Interface
	c *clock
}

func (t timedNetif) EnsureDummy() error {
	defer t.c.since("netif EnsureDummy", time.Now())
	return t.Interface.EnsureDummy()
}
func (t timedNetif) DeleteDummy() error {
	defer t.c.since("netif DeleteDummy", time.Now())
	return t.Interface.DeleteDummy()
}
func (t timedNetif) DummyAddresses() ([]netip.Addr, error) {
	defer t.c.since("netif DummyAddresses", time.Now())
	return t.Interface.DummyAddresses()
}
func (t timedNetif) AddDummyAddress(a netip.Addr) error {
	defer t.c.since("netif AddDummyAddress", time.Now())
	return t.Interface.AddDummyAddress(a)
}
func (t timedNetif) DeleteDummyAddress(a netip.Addr) error {
	defer t.c.since("netif DeleteDummyAddress", time.Now())
	return t.Interface.DeleteDummyAddress(a)
}
func (t timedNetif) ServiceRoutes() ([]netip.Prefix, error) {
	defer t.c.since("netif ServiceRoutes", time.Now())
	return t.Interface.ServiceRoutes()
}
func (t timedNetif) AddServiceRoute(p netip.Prefix) error {
	defer t.c.since("netif AddServiceRoute", time.Now())
	return t.Interface.AddServiceRoute(p)
}
func (t timedNetif) DeleteServiceRoute(p netip.Prefix) error {
	defer t.c.since("netif DeleteServiceRoute", time.Now())
	return t.Interface.DeleteServiceRoute(p)
}
func (t timedNetif) HostAddresses() ([]netip.Addr, error) {
	defer t.c.since("netif HostAddresses", time.Now())
	return t.Interface.HostAddresses()
}
func (t timedNetif) Addresses() ([]netip.Addr, []netip.Addr, error) {
	defer t.c.since("netif Addresses", time.Now())
	return t.Interface.Addresses()
}

type timedIPSet struct {
	ipset.Interface
	c *clock
}

func (t timedIPSet) Sets() ([]ipset.Set, error) {
	defer t.c.since("ipset Sets", time.Now())
	return t.Interface.Sets()
}
func (t timedIPSet) CreateSet(s ipset.Set) error {
	defer t.c.since("ipset CreateSet", time.Now())
	return t.Interface.CreateSet(s)
}
func (t timedIPSet) DestroySet(name string) error {
	defer t.c.since("ipset DestroySet", time.Now())
	return t.Interface.DestroySet(name)
}
func (t timedIPSet) Entries(name string) ([]ipset.Entry, error) {
	defer t.c.since("ipset Entries", time.Now())
	return t.Interface.Entries(name)
}
func (t timedIPSet) EachEntry(name string, fn func(ipset.Entry)) error {
	defer t.c.since("ipset EachEntry", time.Now())
	return t.Interface.EachEntry(name, fn)
}
func (t timedIPSet) AddEntry(name string, e ipset.Entry) error {
	defer t.c.since("ipset AddEntry", time.Now())
	return t.Interface.AddEntry(name, e)
}
func (t timedIPSet) DeleteEntry(name string, e ipset.Entry) error {
	defer t.c.since("ipset DeleteEntry", time.Now())
	return t.Interface.DeleteEntry(name, e)
}
func (t timedIPSet) SwapSets(a, b string) error {
	defer t.c.since("ipset SwapSets", time.Now())
	return t.Interface.SwapSets(a, b)
}

type timedIPTables struct {
	iptables.Interface
	c *clock
}

func (t timedIPTables) Restore(data []byte) error {
	defer t.c.since("iptables Restore", time.Now())
	return t.Interface.Restore(data)
}
func (t timedIPTables) Save(table iptables.Table) ([]byte, error) {
	defer t.c.since("iptables Save", time.Now())
	return t.Interface.Save(table)
}
func (t timedIPTables) SaveTables(tables ...iptables.Table) (map[iptables.Table][]byte, error) {
	defer t.c.since("iptables SaveTables", time.Now())
	return t.Interface.SaveTables(tables...)
}
func (t timedIPTables) EnsureRule(pos iptables.Position, table iptables.Table, chain string, rule ...string) (bool, error) {
	defer t.c.since("iptables EnsureRule", time.Now())
	return t.Interface.EnsureRule(pos, table, chain, rule...)
}
func (t timedIPTables) DeleteRule(table iptables.Table, chain string, rule ...string) error {
	defer t.c.since("iptables DeleteRule", time.Now())
	return t.Interface.DeleteRule(table, chain, rule...)
}

type timedConntrack struct {
	conntrack.Interface
	c *clock
}

func (t timedConntrack) Flows(family int) ([]conntrack.Flow, error) {
	defer t.c.since("conntrack Flows", time.Now())
	return t.Interface.Flows(family)
}
func (t timedConntrack) DeleteFlows(filters ...conntrack.Filter) (int, error) {
	defer t.c.since("conntrack DeleteFlows", time.Now())
	return t.Interface.DeleteFlows(filters...)
}
func (t timedConntrack) DeleteFlowsMatching(family int, protocol uint8, stale func(conntrack.Flow) bool) (int, error) {
	defer t.c.since("conntrack DeleteFlowsMatching", time.Now())
	return t.Interface.DeleteFlowsMatching(family, protocol, stale)
}
