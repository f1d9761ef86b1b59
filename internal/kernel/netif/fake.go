package netif

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// Fake is an in-memory dummy link plus a settable list of the host's other
// addresses. It fails where the kernel fails, with the same sentinel
// errors, and is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	dummy  string
	exists bool
	bound  map[netip.Addr]bool
	routes map[netip.Prefix]bool
	// foreign are routes to table local that someone else added.
	foreign map[netip.Prefix]bool
	host    []netip.Addr
	writes  int
	noDummy bool
}

var _ Interface = (*Fake)(nil)

// NewFake returns a namespace in which the dummy link dummyName does not
// exist yet and the host has no addresses.
func NewFake(dummyName string) *Fake {
	return &Fake{dummy: dummyName, bound: map[netip.Addr]bool{}, routes: map[netip.Prefix]bool{}, foreign: map[netip.Prefix]bool{}}
}

// SetHostAddresses replaces the addresses of the host's other interfaces.
func (f *Fake) SetHostAddresses(addrs ...netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.host = nil
	for _, a := range addrs {
		if a, err := canonicalAddr(a); err == nil {
			f.host = append(f.host, a)
		}
	}
}

// SetDummyUnsupported makes EnsureDummy fail with ErrUnsupported, like a
// kernel without the dummy driver.
func (f *Fake) SetDummyUnsupported() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.noDummy = true
}

// SetForeignRoute puts a route to p in table local that this package did
// not add (an admin's, another agent's): it is never listed, and adding ours
// to the same prefix fails with ErrExists, as in the kernel.
func (f *Fake) SetForeignRoute(p netip.Prefix) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, err := canonicalPrefix(p); err == nil {
		f.foreign[p] = true
	}
}

// Writes counts the calls that would have changed the kernel: creating or
// deleting the link, binding or unbinding an address, adding or deleting a
// route (failed ones included). EnsureDummy on an existing link is not a write.
func (f *Fake) Writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

func (f *Fake) EnsureDummy() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.exists {
		return nil
	}
	f.writes++
	if f.noDummy {
		return fmt.Errorf("ensure dummy %s: create: %w", f.dummy, ErrUnsupported)
	}
	f.exists = true
	return nil
}

func (f *Fake) DeleteDummy() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists {
		return fmt.Errorf("delete dummy %s: link %s: %w", f.dummy, f.dummy, ErrNotFound)
	}
	f.writes++
	f.exists = false
	clear(f.bound)
	clear(f.routes)
	return nil
}

func (f *Fake) DummyAddresses() ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists {
		return nil, fmt.Errorf("list addresses of %s: link %s: %w", f.dummy, f.dummy, ErrNotFound)
	}
	return uniqueSorted(slices.Collect(maps.Keys(f.bound))), nil
}

func (f *Fake) AddDummyAddress(addr netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	addr, err := canonicalAddr(addr)
	if err != nil {
		return fmt.Errorf("add address to %s: %w", f.dummy, err)
	}
	// The link is looked up before anything is sent, as in the kernel type.
	if !f.exists {
		return fmt.Errorf("add address %s to %s: link %s: %w", addr, f.dummy, f.dummy, ErrNotFound)
	}
	f.writes++
	if f.bound[addr] {
		return fmt.Errorf("add address %s to %s: %w", addr, f.dummy, ErrExists)
	}
	f.bound[addr] = true
	return nil
}

func (f *Fake) DeleteDummyAddress(addr netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	addr, err := canonicalAddr(addr)
	if err != nil {
		return fmt.Errorf("delete address from %s: %w", f.dummy, err)
	}
	if !f.exists {
		return fmt.Errorf("delete address %s from %s: link %s: %w", addr, f.dummy, f.dummy, ErrNotFound)
	}
	f.writes++
	if !f.bound[addr] {
		return fmt.Errorf("delete address %s from %s: %w", addr, f.dummy, ErrNotFound)
	}
	delete(f.bound, addr)
	if addr.Is4() && !slices.ContainsFunc(slices.Collect(maps.Keys(f.bound)), netip.Addr.Is4) {
		// As the kernel: the last IPv4 address leaving a link disables
		// IPv4 on it, which flushes every IPv4 route through it
		// (fib_inetaddr_event -> fib_disable_ip).
		for _, m := range []map[netip.Prefix]bool{f.routes, f.foreign} {
			maps.DeleteFunc(m, func(p netip.Prefix, _ bool) bool { return p.Addr().Is4() })
		}
	}
	return nil
}

func (f *Fake) ServiceRoutes() ([]netip.Prefix, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists {
		return nil, fmt.Errorf("list service routes on %s: link %s: %w", f.dummy, f.dummy, ErrNotFound)
	}
	return sortedPrefixes(slices.Collect(maps.Keys(f.routes))), nil
}

func (f *Fake) AddServiceRoute(p netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, err := canonicalPrefix(p)
	if err != nil {
		return fmt.Errorf("add service route on %s: %w", f.dummy, err)
	}
	if !f.exists {
		return fmt.Errorf("add service route %s on %s: link %s: %w", p, f.dummy, f.dummy, ErrNotFound)
	}
	f.writes++
	if f.routes[p] || f.foreign[p] {
		return fmt.Errorf("add service route %s on %s: %w", p, f.dummy, ErrExists)
	}
	f.routes[p] = true
	return nil
}

func (f *Fake) DeleteServiceRoute(p netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, err := canonicalPrefix(p)
	if err != nil {
		return fmt.Errorf("delete service route on %s: %w", f.dummy, err)
	}
	if !f.exists {
		return fmt.Errorf("delete service route %s on %s: link %s: %w", p, f.dummy, f.dummy, ErrNotFound)
	}
	f.writes++
	if !f.routes[p] {
		return fmt.Errorf("delete service route %s on %s: %w", p, f.dummy, ErrNotFound)
	}
	delete(f.routes, p)
	return nil
}

func (f *Fake) HostAddresses() ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uniqueSorted(f.host), nil
}

func (f *Fake) Addresses() (dummy, host []netip.Addr, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	dummy = []netip.Addr{}
	if f.exists {
		dummy = uniqueSorted(slices.Collect(maps.Keys(f.bound)))
	}
	return dummy, uniqueSorted(f.host), nil
}

// Dump renders the state sorted, for golden tests:
//
//	dummy kube-ipvs0
//	  192.0.2.10/32
//	  2001:db8::10/128
//	  route local 10.96.0.0/12
//	host 127.0.0.1
//
// A missing link reads "dummy kube-ipvs0 absent".
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	if !f.exists {
		fmt.Fprintf(&b, "dummy %s absent\n", f.dummy)
	} else {
		fmt.Fprintf(&b, "dummy %s\n", f.dummy)
		for _, a := range uniqueSorted(slices.Collect(maps.Keys(f.bound))) {
			fmt.Fprintf(&b, "  %s\n", netip.PrefixFrom(a, a.BitLen()))
		}
		for _, p := range sortedPrefixes(slices.Collect(maps.Keys(f.routes))) {
			fmt.Fprintf(&b, "  route local %s\n", p)
		}
	}
	for _, a := range uniqueSorted(f.host) {
		fmt.Fprintf(&b, "host %s\n", a)
	}
	return b.String()
}
