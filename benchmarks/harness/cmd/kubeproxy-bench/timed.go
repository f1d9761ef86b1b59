package main

import (
	"bytes"
	"time"

	"github.com/ipvsproxy/ipvsproxy/benchmarks/harness/callclock"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/proxy/ipvs"
	utilipset "k8s.io/kubernetes/pkg/proxy/ipvs/ipset"
	utilipvs "k8s.io/kubernetes/pkg/proxy/ipvs/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
)

// kube-proxy's kernel calls timed on the real kernel (-kernel), as
// kernel-bench times ipvsproxy's: its ipset and iptables implementations
// start a process per call (ipset add, iptables-restore), its IPVS and
// address calls are netlink. The names say which, so that a cold sync
// splits into the time spent starting and waiting for processes, in
// netlink, and in the proxier itself.
const (
	viaProcess = " (a process)"
	viaNetlink = " (netlink)"
)

// timedBackends wraps each real backend of b with c.
func timedBackends(b backends, c *callclock.Clock) backends {
	b.ipset = timedIPSet{b.ipset, c}
	b.ipt = timedIPTables{b.ipt, c}
	b.ipvs = timedIPVS{b.ipvs, c}
	return b
}

type timedIPSet struct {
	utilipset.Interface
	c *callclock.Clock
}

func (t timedIPSet) FlushSet(set string) error {
	defer t.c.Since("ipset flush"+viaProcess, time.Now())
	return t.Interface.FlushSet(set)
}
func (t timedIPSet) DestroySet(set string) error {
	defer t.c.Since("ipset destroy"+viaProcess, time.Now())
	return t.Interface.DestroySet(set)
}
func (t timedIPSet) DestroyAllSets() error {
	defer t.c.Since("ipset destroy"+viaProcess, time.Now())
	return t.Interface.DestroyAllSets()
}
func (t timedIPSet) CreateSet(set *utilipset.IPSet, ignoreExistErr bool) error {
	defer t.c.Since("ipset create"+viaProcess, time.Now())
	return t.Interface.CreateSet(set, ignoreExistErr)
}
func (t timedIPSet) AddEntry(entry string, set *utilipset.IPSet, ignoreExistErr bool) error {
	defer t.c.Since("ipset add"+viaProcess, time.Now())
	return t.Interface.AddEntry(entry, set, ignoreExistErr)
}
func (t timedIPSet) DelEntry(entry string, set string) error {
	defer t.c.Since("ipset del"+viaProcess, time.Now())
	return t.Interface.DelEntry(entry, set)
}
func (t timedIPSet) TestEntry(entry string, set string) (bool, error) {
	defer t.c.Since("ipset test"+viaProcess, time.Now())
	return t.Interface.TestEntry(entry, set)
}
func (t timedIPSet) ListEntries(set string) ([]string, error) {
	defer t.c.Since("ipset list"+viaProcess, time.Now())
	return t.Interface.ListEntries(set)
}
func (t timedIPSet) ListSets() ([]string, error) {
	defer t.c.Since("ipset list"+viaProcess, time.Now())
	return t.Interface.ListSets()
}
func (t timedIPSet) GetVersion() (string, error) {
	defer t.c.Since("ipset version"+viaProcess, time.Now())
	return t.Interface.GetVersion()
}

type timedIPTables struct {
	utiliptables.Interface
	c *callclock.Clock
}

func (t timedIPTables) EnsureChain(table utiliptables.Table, chain utiliptables.Chain) (bool, error) {
	defer t.c.Since("iptables ensure or check"+viaProcess, time.Now())
	return t.Interface.EnsureChain(table, chain)
}
func (t timedIPTables) FlushChain(table utiliptables.Table, chain utiliptables.Chain) error {
	defer t.c.Since("iptables flush or delete"+viaProcess, time.Now())
	return t.Interface.FlushChain(table, chain)
}
func (t timedIPTables) DeleteChain(table utiliptables.Table, chain utiliptables.Chain) error {
	defer t.c.Since("iptables flush or delete"+viaProcess, time.Now())
	return t.Interface.DeleteChain(table, chain)
}
func (t timedIPTables) ChainExists(table utiliptables.Table, chain utiliptables.Chain) (bool, error) {
	defer t.c.Since("iptables ensure or check"+viaProcess, time.Now())
	return t.Interface.ChainExists(table, chain)
}
func (t timedIPTables) EnsureRule(position utiliptables.RulePosition, table utiliptables.Table, chain utiliptables.Chain, args ...string) (bool, error) {
	defer t.c.Since("iptables ensure or check"+viaProcess, time.Now())
	return t.Interface.EnsureRule(position, table, chain, args...)
}
func (t timedIPTables) DeleteRule(table utiliptables.Table, chain utiliptables.Chain, args ...string) error {
	defer t.c.Since("iptables flush or delete"+viaProcess, time.Now())
	return t.Interface.DeleteRule(table, chain, args...)
}
func (t timedIPTables) SaveInto(table utiliptables.Table, buffer *bytes.Buffer) error {
	defer t.c.Since("iptables-save"+viaProcess, time.Now())
	return t.Interface.SaveInto(table, buffer)
}
func (t timedIPTables) Restore(table utiliptables.Table, data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	defer t.c.Since("iptables-restore"+viaProcess, time.Now())
	return t.Interface.Restore(table, data, flush, counters)
}
func (t timedIPTables) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	defer t.c.Since("iptables-restore"+viaProcess, time.Now())
	return t.Interface.RestoreAll(data, flush, counters)
}

type timedIPVS struct {
	utilipvs.Interface
	c *callclock.Clock
}

func (t timedIPVS) Flush() error {
	defer t.c.Since("ipvs Flush"+viaNetlink, time.Now())
	return t.Interface.Flush()
}
func (t timedIPVS) AddVirtualServer(vs *utilipvs.VirtualServer) error {
	defer t.c.Since("ipvs AddVirtualServer"+viaNetlink, time.Now())
	return t.Interface.AddVirtualServer(vs)
}
func (t timedIPVS) UpdateVirtualServer(vs *utilipvs.VirtualServer) error {
	defer t.c.Since("ipvs UpdateVirtualServer"+viaNetlink, time.Now())
	return t.Interface.UpdateVirtualServer(vs)
}
func (t timedIPVS) DeleteVirtualServer(vs *utilipvs.VirtualServer) error {
	defer t.c.Since("ipvs DeleteVirtualServer"+viaNetlink, time.Now())
	return t.Interface.DeleteVirtualServer(vs)
}
func (t timedIPVS) GetVirtualServer(vs *utilipvs.VirtualServer) (*utilipvs.VirtualServer, error) {
	defer t.c.Since("ipvs GetVirtualServer"+viaNetlink, time.Now())
	return t.Interface.GetVirtualServer(vs)
}
func (t timedIPVS) GetVirtualServers() ([]*utilipvs.VirtualServer, error) {
	defer t.c.Since("ipvs GetVirtualServers"+viaNetlink, time.Now())
	return t.Interface.GetVirtualServers()
}
func (t timedIPVS) AddRealServer(vs *utilipvs.VirtualServer, rs *utilipvs.RealServer) error {
	defer t.c.Since("ipvs AddRealServer"+viaNetlink, time.Now())
	return t.Interface.AddRealServer(vs, rs)
}
func (t timedIPVS) GetRealServers(vs *utilipvs.VirtualServer) ([]*utilipvs.RealServer, error) {
	defer t.c.Since("ipvs GetRealServers"+viaNetlink, time.Now())
	return t.Interface.GetRealServers(vs)
}
func (t timedIPVS) DeleteRealServer(vs *utilipvs.VirtualServer, rs *utilipvs.RealServer) error {
	defer t.c.Since("ipvs DeleteRealServer"+viaNetlink, time.Now())
	return t.Interface.DeleteRealServer(vs, rs)
}
func (t timedIPVS) UpdateRealServer(vs *utilipvs.VirtualServer, rs *utilipvs.RealServer) error {
	defer t.c.Since("ipvs UpdateRealServer"+viaNetlink, time.Now())
	return t.Interface.UpdateRealServer(vs, rs)
}
func (t timedIPVS) ConfigureTimeouts(tcp, tcpFin, udp time.Duration) error {
	defer t.c.Since("ipvs ConfigureTimeouts"+viaNetlink, time.Now())
	return t.Interface.ConfigureTimeouts(tcp, tcpFin, udp)
}

// timedLinks is the proxier's own netlink handle for kube-ipvs0 and the
// node's addresses, timed.
type timedLinks struct {
	ipvs.NetLinkHandle
	c *callclock.Clock
}

func (t timedLinks) EnsureAddressBind(address, devName string) (bool, error) {
	defer t.c.Since("address bind"+viaNetlink, time.Now())
	return t.NetLinkHandle.EnsureAddressBind(address, devName)
}
func (t timedLinks) UnbindAddress(address, devName string) error {
	defer t.c.Since("address unbind"+viaNetlink, time.Now())
	return t.NetLinkHandle.UnbindAddress(address, devName)
}
func (t timedLinks) EnsureDummyDevice(devName string) (bool, error) {
	defer t.c.Since("link ensure"+viaNetlink, time.Now())
	return t.NetLinkHandle.EnsureDummyDevice(devName)
}
func (t timedLinks) ListBindAddress(devName string) ([]string, error) {
	defer t.c.Since("address list"+viaNetlink, time.Now())
	return t.NetLinkHandle.ListBindAddress(devName)
}
func (t timedLinks) GetAllLocalAddresses() (sets.Set[string], error) {
	defer t.c.Since("address list"+viaNetlink, time.Now())
	return t.NetLinkHandle.GetAllLocalAddresses()
}
func (t timedLinks) GetLocalAddresses(dev string) (sets.Set[string], error) {
	defer t.c.Since("address list"+viaNetlink, time.Now())
	return t.NetLinkHandle.GetLocalAddresses(dev)
}
func (t timedLinks) GetAllLocalAddressesExcept(dev string) (sets.Set[string], error) {
	defer t.c.Since("address list"+viaNetlink, time.Now())
	return t.NetLinkHandle.GetAllLocalAddressesExcept(dev)
}
