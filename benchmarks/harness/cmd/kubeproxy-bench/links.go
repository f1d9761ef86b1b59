package main

import (
	"fmt"
	"net"
	"reflect"
	"sort"
	"unsafe"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/proxy/ipvs"
)

// mapLinks is kube-proxy's NetLinkHandle on maps, for the proxier-only
// shape (-fake-link): each link's addresses in a set, as ipvsproxy's side
// keeps them in netif's Fake, so that neither side's time includes netlink.
// kube-proxy's own FakeNetlinkHandle scans a slice on every bind, which at
// 10,000 cluster IPs would time the fake rather than the proxier.
type mapLinks struct {
	addrs map[string]map[string]bool
}

var _ ipvs.NetLinkHandle = (*mapLinks)(nil)

// newMapLinks has lo with the node's addresses, as netns.Prepare binds them.
func newMapLinks(nodeIP string) *mapLinks {
	return &mapLinks{addrs: map[string]map[string]bool{"lo": {"127.0.0.1": true, nodeIP: true}}}
}

func (m *mapLinks) EnsureAddressBind(address, dev string) (bool, error) {
	a, ok := m.addrs[dev]
	if !ok {
		return false, fmt.Errorf("bind %s: no link %s", address, dev)
	}
	if a[address] {
		return true, nil
	}
	a[address] = true
	return false, nil
}

func (m *mapLinks) UnbindAddress(address, dev string) error {
	if !m.addrs[dev][address] {
		return fmt.Errorf("unbind %s: not bound on %s", address, dev)
	}
	delete(m.addrs[dev], address)
	return nil
}

func (m *mapLinks) EnsureDummyDevice(dev string) (bool, error) {
	if _, ok := m.addrs[dev]; ok {
		return true, nil
	}
	m.addrs[dev] = map[string]bool{}
	return false, nil
}

func (m *mapLinks) DeleteDummyDevice(dev string) error {
	delete(m.addrs, dev)
	return nil
}

func (m *mapLinks) ListBindAddress(dev string) ([]string, error) {
	out := make([]string, 0, len(m.addrs[dev]))
	for a := range m.addrs[dev] {
		out = append(out, a)
	}
	sort.Strings(out)
	return out, nil
}

// GetAllLocalAddresses, like the real handle, keeps IPv4 addresses and
// leaves out loopback ones.
func (m *mapLinks) GetAllLocalAddresses() (sets.Set[string], error) {
	return m.local(""), nil
}

func (m *mapLinks) GetLocalAddresses(dev string) (sets.Set[string], error) {
	out := sets.New[string]()
	for a := range m.addrs[dev] {
		if valid(a) {
			out.Insert(a)
		}
	}
	return out, nil
}

func (m *mapLinks) GetAllLocalAddressesExcept(dev string) (sets.Set[string], error) {
	return m.local(dev), nil
}

func (m *mapLinks) local(except string) sets.Set[string] {
	out := sets.New[string]()
	for dev, addrs := range m.addrs {
		if dev == except {
			continue
		}
		for a := range addrs {
			if valid(a) {
				out.Insert(a)
			}
		}
	}
	return out
}

func valid(a string) bool {
	ip := net.ParseIP(a)
	return ip != nil && ip.To4() != nil && !ip.IsLoopback() && !ip.IsLinkLocalUnicast()
}

// useLinks gives p the handle h. NewProxier makes its own netlink handle in
// an unexported field and has no option for another; the harness sets the
// field (it is only read by syncProxyRules, which has not run yet).
func useLinks(p *ipvs.Proxier, h ipvs.NetLinkHandle) error {
	f, err := linksField(p)
	if err != nil {
		return err
	}
	f.Set(reflect.ValueOf(h))
	return nil
}

// linksOf returns the netlink handle NewProxier made for p.
func linksOf(p *ipvs.Proxier) (ipvs.NetLinkHandle, error) {
	f, err := linksField(p)
	if err != nil {
		return nil, err
	}
	h, _ := f.Interface().(ipvs.NetLinkHandle)
	return h, nil
}

// linksField is p's unexported netlinkHandle field, made settable.
func linksField(p *ipvs.Proxier) (reflect.Value, error) {
	f := reflect.ValueOf(p).Elem().FieldByName("netlinkHandle")
	if !f.IsValid() {
		return reflect.Value{}, fmt.Errorf("kube-proxy's Proxier has no field netlinkHandle any more: update the harness")
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), nil
}
