package netif

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/stdlog"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// kernel is the dummy interface of one network namespace, managed over an
// rtnetlink socket (vishvananda/netlink's handle is safe for concurrent use).
type kernel struct {
	dummy  string
	handle *netlink.Handle
	// dumps has NETLINK_GET_STRICT_CHK on, so that the kernel applies a
	// dump's filter itself (ownRoutes): without it every route of every
	// table is sent and parsed, 10,000 local ones with as many cluster IPs
	// bound. Strict checking also refuses requests with fields it does not
	// know, so only the filtered dumps use it.
	dumps *netlink.Handle
	// linkType is "dummy"; tests on a host without the dummy driver set
	// "ifb" to run the route and address halves on a link they created.
	linkType string
	// batches binds and unbinds many addresses per send (batch.go) and
	// reads them in one streamed dump (addrdump.go).
	batches *exchanger
	// onAddressDumpBuffer, when set, runs after each buffer of an address
	// dump: tests change the addresses there, mid-dump.
	onAddressDumpBuffer func()
}

var (
	_ Interface      = (*kernel)(nil)
	_ AddressBatcher = (*kernel)(nil)
)

// New manages the dummy link named dummyName in the current network
// namespace.
func New(dummyName string) (Interface, error) { return open(dummyName, netns.None()) }

// NewInNamespace manages the dummy link named dummyName in the network
// namespace ns. The socket it opens keeps ns alive until Close.
func NewInNamespace(dummyName string, ns netns.NsHandle) (Interface, error) {
	return open(dummyName, ns)
}

func open(dummyName string, ns netns.NsHandle) (*kernel, error) {
	if dummyName == "" || len(dummyName) > unix.IFNAMSIZ-1 {
		return nil, fmt.Errorf("dummy interface name %q: must be 1-%d bytes", dummyName, unix.IFNAMSIZ-1)
	}
	// The library reports attributes it cannot parse through the
	// standard logger.
	stdlog.ToKlog()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open rtnetlink socket: %w", err)
	}
	dumps, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("open rtnetlink socket: %w", err)
	}
	// Before Linux 4.20 the option is unknown: the dump is then filtered
	// here only, as before.
	_ = dumps.SetStrictCheck(true)
	nsFD := 0
	if ns != netns.None() {
		nsFD = int(ns)
	}
	batches, err := dialExchanger(nsFD)
	if err != nil {
		h.Close()
		dumps.Close()
		return nil, err
	}
	return &kernel{dummy: dummyName, handle: h, dumps: dumps, linkType: "dummy", batches: batches}, nil
}

// Close releases the rtnetlink socket. It is not part of Interface: the
// proxier keeps its handle for its whole life.
func (k *kernel) Close() error {
	k.handle.Close()
	k.dumps.Close()
	k.batches.close()
	return nil
}

// dummyLink finds the dummy link, refusing a link of the same name that is
// not a dummy: this package never touches any other interface.
func (k *kernel) dummyLink() (netlink.Link, error) {
	link, err := k.handle.LinkByName(k.dummy)
	if err != nil {
		if errors.As(err, &netlink.LinkNotFoundError{}) {
			return nil, fmt.Errorf("link %s: %w", k.dummy, ErrNotFound)
		}
		return nil, fmt.Errorf("look up link %s: %w", k.dummy, err)
	}
	if link.Type() != k.linkType {
		return nil, fmt.Errorf("link %s is of type %s, not %s; refusing to manage it", k.dummy, link.Type(), k.linkType)
	}
	return link, nil
}

func (k *kernel) EnsureDummy() error {
	link, err := k.dummyLink()
	if errors.Is(err, ErrNotFound) {
		link, err = k.createDummy()
	}
	if err != nil {
		return fmt.Errorf("ensure dummy %s: %w", k.dummy, err)
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := k.handle.LinkSetUp(link); err != nil {
			return fmt.Errorf("ensure dummy %s: set up: %w", k.dummy, err)
		}
	}
	return nil
}

func (k *kernel) createDummy() (netlink.Link, error) {
	attrs := netlink.NewLinkAttrs()
	attrs.Name = k.dummy
	err := k.handle.LinkAdd(&netlink.Dummy{LinkAttrs: attrs})
	switch {
	case errors.Is(err, unix.EOPNOTSUPP):
		// rtnl_newlink() answers this when no "dummy" link type is
		// registered even after request_module("rtnl-link-dummy").
		return nil, fmt.Errorf("create: %w (%w)", ErrUnsupported, err)
	case errors.Is(err, unix.EEXIST):
		// Created concurrently; use it.
	case err != nil:
		return nil, fmt.Errorf("create: %w", err)
	}
	link, err := k.dummyLink()
	if err != nil {
		return nil, err
	}
	// Without this the kernel gives the link an fe80:: address the moment it
	// comes up, and DummyAddresses would list an address nobody bound.
	// Set before the first up, and skipped when IPv6 is disabled. A dummy
	// that already existed (kube-proxy's kube-ipvs0) keeps its fe80::
	// address; the proxier sees it as stale and unbinds it once.
	if err := k.handle.LinkSetIP6AddrGenMode(link, nl.IN6_ADDR_GEN_MODE_NONE); err != nil && !errors.Is(err, unix.EAFNOSUPPORT) {
		return nil, fmt.Errorf("disable IPv6 link-local address: %w", err)
	}
	return link, nil
}

func (k *kernel) DeleteDummy() error {
	link, err := k.dummyLink()
	if err != nil {
		return fmt.Errorf("delete dummy %s: %w", k.dummy, err)
	}
	if err := k.handle.LinkDel(link); err != nil {
		return fmt.Errorf("delete dummy %s: %w", k.dummy, err)
	}
	return nil
}

func (k *kernel) DummyAddresses() ([]netip.Addr, error) {
	link, err := k.dummyLink()
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", k.dummy, err)
	}
	addrs, err := k.addrList(link)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", k.dummy, err)
	}
	return uniqueSorted(addrs), nil
}

// AddDummyAddress binds addr as a single-address prefix with the default
// (global) scope, as kube-proxy does. IPv6 addresses are added with
// IFA_F_NODAD so that they are usable at once rather than "tentative"
// (dummy links skip DAD anyway, being IFF_NOARP; this makes it explicit).
func (k *kernel) AddDummyAddress(addr netip.Addr) error {
	addr, err := canonicalAddr(addr)
	if err != nil {
		return fmt.Errorf("add address to %s: %w", k.dummy, err)
	}
	link, err := k.dummyLink()
	if err != nil {
		return fmt.Errorf("add address %s to %s: %w", addr, k.dummy, err)
	}
	a := &netlink.Addr{IPNet: hostPrefix(addr)}
	if addr.Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	if err := k.handle.AddrAdd(link, a); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("add address %s to %s: %w (%w)", addr, k.dummy, ErrExists, err)
		}
		return fmt.Errorf("add address %s to %s: %w", addr, k.dummy, err)
	}
	return nil
}

func (k *kernel) DeleteDummyAddress(addr netip.Addr) error {
	addr, err := canonicalAddr(addr)
	if err != nil {
		return fmt.Errorf("delete address from %s: %w", k.dummy, err)
	}
	link, err := k.dummyLink()
	if err != nil {
		return fmt.Errorf("delete address %s from %s: %w", addr, k.dummy, err)
	}
	err = k.handle.AddrDel(link, &netlink.Addr{IPNet: hostPrefix(addr)})
	if errors.Is(err, unix.EADDRNOTAVAIL) {
		// The kernel matches the prefix length too. Someone (kube-proxy's
		// leftovers, an admin) may have bound it with another one; only
		// then pay for a dump to find it.
		err = k.deleteAnyPrefix(link, addr)
	}
	if err != nil {
		return fmt.Errorf("delete address %s from %s: %w", addr, k.dummy, err)
	}
	return nil
}

func (k *kernel) deleteAnyPrefix(link netlink.Link, addr netip.Addr) error {
	addrs, err := k.handle.AddrList(link, netlink.FAMILY_ALL)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return err
	}
	for _, a := range addrs {
		if got, ok := netip.AddrFromSlice(a.IP); ok && got.Unmap() == addr {
			return k.handle.AddrDel(link, &a)
		}
	}
	return ErrNotFound
}

func (k *kernel) HostAddresses() ([]netip.Addr, error) {
	_, host, err := k.Addresses()
	if err != nil {
		return nil, fmt.Errorf("list host addresses: %w", err)
	}
	return host, nil
}

func (k *kernel) Addresses() (dummy, host []netip.Addr, err error) {
	dummyIndex := -1
	switch link, err := k.dummyLink(); {
	case err == nil:
		dummyIndex = link.Attrs().Index
	case !errors.Is(err, ErrNotFound):
		return nil, nil, err
	}
	all, err := k.addrListAll()
	if err != nil {
		return nil, nil, err
	}
	for _, a := range all {
		if a.linkIndex == dummyIndex {
			dummy = append(dummy, a.addr)
		} else {
			host = append(host, a.addr)
		}
	}
	return uniqueSorted(dummy), uniqueSorted(host), nil
}

type indexedAddr struct {
	addr      netip.Addr
	linkIndex int
}

// addrList reads one link's addresses; addrListAll every link's.
func (k *kernel) addrList(link netlink.Link) ([]netip.Addr, error) {
	all, err := k.dumpAddrs(link.Attrs().Index)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(all))
	for _, a := range all {
		out = append(out, a.addr)
	}
	return out, nil
}

func (k *kernel) addrListAll() ([]indexedAddr, error) { return k.dumpAddrs(0) }

func hostPrefix(addr netip.Addr) *net.IPNet {
	return &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}
}

func uniqueSorted(addrs []netip.Addr) []netip.Addr {
	out := slices.Clone(addrs)
	if out == nil {
		out = []netip.Addr{}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// NewOnLink manages an existing link of linkType named name in ns as if it
// were the dummy one, for benchmarks and tests on kernels without the dummy
// driver: an ifb link takes the same addresses and routes. EnsureDummy
// then only sets it up; it never creates or converts a link.
func NewOnLink(name, linkType string, ns netns.NsHandle) (Interface, error) {
	k, err := open(name, ns)
	if err != nil {
		return nil, err
	}
	k.linkType = linkType
	return k, nil
}
