package proxier

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// faults injects kernel failures between the proxier and the fakes: a rule
// sees each write (its operation and object) and returns the error the
// kernel would, or nil to let it through to the fake. The fakes themselves
// stay faithful; the wrappers only refuse.
type faults struct {
	mu   sync.Mutex
	rule func(op, object string) error
}

func (f *faults) set(rule func(op, object string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rule = rule
}

func (f *faults) check(op string, object any) error {
	f.mu.Lock()
	rule := f.rule
	f.mu.Unlock()
	if rule == nil {
		return nil
	}
	if err := rule(op, fmt.Sprint(object)); err != nil {
		return fmt.Errorf("%s %v: %w", op, object, err)
	}
	return nil
}

// faultyKernel is fk's kernel with every write going through f.
func (fk *fakeKernel) faultyKernel(f *faults) adapters.Kernel {
	k := fk.kernel()
	k.IPVS = faultyIPVS{k.IPVS, f}
	k.IPSet = faultyIPSet{k.IPSet, f}
	k.Netif = faultyNetif{k.Netif, f}
	k.Conntrack = faultyConntrack{k.Conntrack, f}
	k.IPTables = map[v1.IPFamily]iptables.Interface{}
	for fam, ipt := range fk.kernel().IPTables {
		k.IPTables[fam] = faultyIPTables{ipt, f}
	}
	return k
}

type faultyIPVS struct {
	ipvs.Interface
	f *faults
}

func (w faultyIPVS) AddVirtualServer(vs ipvs.VirtualServer) error {
	if err := w.f.check("ipvs-add", vs.VirtualServerKey); err != nil {
		return err
	}
	return w.Interface.AddVirtualServer(vs)
}
func (w faultyIPVS) UpdateVirtualServer(vs ipvs.VirtualServer) error {
	if err := w.f.check("ipvs-update", vs.VirtualServerKey); err != nil {
		return err
	}
	return w.Interface.UpdateVirtualServer(vs)
}
func (w faultyIPVS) DeleteVirtualServer(k ipvs.VirtualServerKey) error {
	if err := w.f.check("ipvs-delete", k); err != nil {
		return err
	}
	return w.Interface.DeleteVirtualServer(k)
}
func (w faultyIPVS) AddRealServer(k ipvs.VirtualServerKey, rs ipvs.RealServer) error {
	if err := w.f.check("ipvs-add-rs", k); err != nil {
		return err
	}
	return w.Interface.AddRealServer(k, rs)
}
func (w faultyIPVS) UpdateRealServer(k ipvs.VirtualServerKey, rs ipvs.RealServer) error {
	if err := w.f.check("ipvs-update-rs", k); err != nil {
		return err
	}
	return w.Interface.UpdateRealServer(k, rs)
}
func (w faultyIPVS) DeleteRealServer(k ipvs.VirtualServerKey, rs ipvs.RealServerKey) error {
	if err := w.f.check("ipvs-delete-rs", k); err != nil {
		return err
	}
	return w.Interface.DeleteRealServer(k, rs)
}

type faultyIPSet struct {
	ipset.Interface
	f *faults
}

func (w faultyIPSet) CreateSet(s ipset.Set) error {
	if err := w.f.check("ipset-create", s.Name); err != nil {
		return err
	}
	return w.Interface.CreateSet(s)
}
func (w faultyIPSet) DestroySet(name string) error {
	if err := w.f.check("ipset-destroy", name); err != nil {
		return err
	}
	return w.Interface.DestroySet(name)
}
func (w faultyIPSet) AddEntry(name string, e ipset.Entry) error {
	if err := w.f.check("ipset-add", name+" "+e.String(owned.SetType(name))); err != nil {
		return err
	}
	return w.Interface.AddEntry(name, e)
}
func (w faultyIPSet) DeleteEntry(name string, e ipset.Entry) error {
	if err := w.f.check("ipset-del", name+" "+e.String(owned.SetType(name))); err != nil {
		return err
	}
	return w.Interface.DeleteEntry(name, e)
}

type faultyNetif struct {
	netif.Interface
	f *faults
}

func (w faultyNetif) AddDummyAddress(a netip.Addr) error {
	if err := w.f.check("addr-add", a); err != nil {
		return err
	}
	return w.Interface.AddDummyAddress(a)
}
func (w faultyNetif) DeleteDummyAddress(a netip.Addr) error {
	if err := w.f.check("addr-del", a); err != nil {
		return err
	}
	return w.Interface.DeleteDummyAddress(a)
}

func (w faultyNetif) AddServiceRoute(p netip.Prefix) error {
	if err := w.f.check("route-add", p); err != nil {
		return err
	}
	return w.Interface.AddServiceRoute(p)
}
func (w faultyNetif) DeleteServiceRoute(p netip.Prefix) error {
	if err := w.f.check("route-del", p); err != nil {
		return err
	}
	return w.Interface.DeleteServiceRoute(p)
}

type faultyConntrack struct {
	conntrack.Interface
	f *faults
}

func (w faultyConntrack) DeleteFlows(filters ...conntrack.Filter) (int, error) {
	if err := w.f.check("conntrack-delete", len(filters)); err != nil {
		return 0, err
	}
	return w.Interface.DeleteFlows(filters...)
}

// DeleteFlowsMatching is the conntrack reconcile's delete: the same fault.
func (w faultyConntrack) DeleteFlowsMatching(family int, protocol uint8, stale func(conntrack.Flow) bool) (int, error) {
	if err := w.f.check("conntrack-delete", family); err != nil {
		return 0, err
	}
	return w.Interface.DeleteFlowsMatching(family, protocol, stale)
}

type faultyIPTables struct {
	iptables.Interface
	f *faults
}

func (w faultyIPTables) Restore(data []byte) error {
	if err := w.f.check("iptables-restore", w.Family()); err != nil {
		return err
	}
	return w.Interface.Restore(data)
}

type iptablesInterface = iptables.Interface

func newRecorder() *record.FakeRecorder { return record.NewFakeRecorder(100) }
