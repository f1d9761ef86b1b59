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
	// Unbinding the last IPv4 address of the link makes the kernel flush
	// every IPv4 route through it, service routes included: a caller that
	// routes IPv4 ranges keeps one IPv4 address bound.
	DeleteDummyAddress(addr netip.Addr) error
	// ServiceRoutes lists the prefixes this package made local with
	// AddServiceRoute (empty when none); routes anyone else added to the
	// link are never listed. ErrNotFound when the link does not exist.
	ServiceRoutes() ([]netip.Prefix, error)
	// AddServiceRoute makes every address of p local with one `local` route
	// on the dummy link in table local, marked with RouteProtocol.
	// ErrExists when a route to p is already in table local (ours or not),
	// ErrNotFound when no link.
	AddServiceRoute(p netip.Prefix) error
	// DeleteServiceRoute removes the route AddServiceRoute added for p;
	// ErrNotFound when there is none (a route of someone else to p stays).
	DeleteServiceRoute(p netip.Prefix) error
	// HostAddresses lists the unicast addresses of every interface except the
	// dummy one, including loopback and link-local ones (callers filter).
	HostAddresses() ([]netip.Addr, error)
	// Addresses is DummyAddresses and HostAddresses in one read of the
	// kernel's address table (a full sync needs both, and at 10,000 bound
	// cluster IPs each read parses every one); dummy is empty when the
	// link does not exist.
	Addresses() (dummy, host []netip.Addr, err error)
}
