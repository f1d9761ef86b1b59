package netif

import "net/netip"

// Interface is the dummy interface of one network namespace plus a read-only
// view of the other interfaces' addresses.
type Interface interface {
	// EnsureDummy creates the dummy link if it is missing and sets it up.
	// Calling it when the link exists is not an error.
	EnsureDummy() error
	// DeleteDummy deletes the dummy link and its addresses; ErrNotFound when
	// it does not exist.
	DeleteDummy() error
	// DummyAddresses lists the addresses bound on the dummy link (empty when
	// none); ErrNotFound when the link does not exist.
	DummyAddresses() ([]netip.Addr, error)
	// AddDummyAddress binds addr as a /32 (IPv4) or /128 (IPv6) on the dummy
	// link; ErrExists when already bound, ErrNotFound when no link.
	AddDummyAddress(addr netip.Addr) error
	// DeleteDummyAddress unbinds addr; ErrNotFound when it is not bound.
	DeleteDummyAddress(addr netip.Addr) error
	// HostAddresses lists the unicast addresses of every interface except the
	// dummy one, including loopback and link-local ones (callers filter).
	HostAddresses() ([]netip.Addr, error)
}
