package ipset

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/ipvsproxy/ipvsproxy/internal/stdlog"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Kernel is the IP sets of one network namespace, reached over netlink
// (NFNL_SUBSYS_IPSET) through github.com/vishvananda/netlink.
type Kernel struct {
	h   *netlink.Handle
	raw *rawSocket // see request.go

	// sets remembers each set's type and family: an add or delete names only
	// the set, but the entry must be encoded (and checked) for its type.
	// Filled by CreateSet, Sets and Entries; read from the kernel on a miss;
	// forgotten on any error so that a set recreated behind our back is
	// re-read.
	mu   sync.Mutex
	sets map[string]Set
}

var _ Interface = (*Kernel)(nil)

// New opens a netlink socket in the caller's network namespace.
func New() (*Kernel, error) {
	return NewInNamespace(netns.None())
}

// NewInNamespace opens a netlink socket in network namespace ns (netns.None()
// for the caller's own). The socket stays in ns for its lifetime.
func NewInNamespace(ns netns.NsHandle) (*Kernel, error) {
	// The library prints a line per attribute it does not know (two per
	// hash set on kernels since 5.11) through the standard logger.
	stdlog.ToKlog()
	var (
		h   *netlink.Handle
		err error
	)
	// The handle must own a NETLINK_NETFILTER socket: for a family it has
	// no socket for, the library opens one in the current namespace.
	if ns == netns.None() {
		h, err = netlink.NewHandle(unix.NETLINK_NETFILTER)
	} else {
		h, err = netlink.NewHandleAt(ns, unix.NETLINK_NETFILTER)
	}
	if err != nil {
		return nil, fmt.Errorf("open ipset netlink socket: %w", err)
	}
	raw, err := openRawSocket(ns)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("open ipset netlink socket: %w", err)
	}
	return &Kernel{h: h, raw: raw, sets: map[string]Set{}}, nil
}

// Close releases the netlink sockets.
func (k *Kernel) Close() error {
	k.h.Close()
	k.raw.close()
	return nil
}

func (k *Kernel) Sets() ([]Set, error) {
	var results []netlink.IPSetResult
	err := guard(func() (err error) { results, err = k.h.IpsetListAll(); return err })
	if err != nil {
		return nil, fmt.Errorf("list ip sets: %w", mapError(err, false))
	}
	// A dump splits a large set over several messages; the library returns
	// one result per message, so the same set can appear more than once.
	var sets []Set
	seen := map[string]bool{}
	for _, r := range results {
		if seen[r.SetName] {
			continue
		}
		seen[r.SetName] = true
		sets = append(sets, setFromResult(&r))
	}
	k.mu.Lock()
	for _, s := range sets {
		k.sets[s.Name] = s
	}
	k.mu.Unlock()
	return sets, nil
}

func (k *Kernel) CreateSet(s Set) error {
	s, err := checkSet(s)
	if err != nil {
		return fmt.Errorf("create ip set: %w", err)
	}
	opts := netlink.IpsetCreateOptions{}
	switch s.Type {
	case BitmapPort:
		opts.PortFrom, opts.PortTo = 0, 65535
	default:
		opts.Family = familyNumber(s.Family)
		opts.MaxElements = s.MaxElem
	}
	err = guard(func() error { return k.h.IpsetCreate(s.Name, string(s.Type), opts) })
	if err != nil {
		return fmt.Errorf("create %s set %s: %w", s.Type, s.Name, mapError(err, false))
	}
	k.remember(s)
	return nil
}

func (k *Kernel) DestroySet(name string) error {
	k.forget(name)
	if err := k.raw.destroy(name); err != nil {
		return fmt.Errorf("destroy ip set %s: %w", name, mapError(err, false))
	}
	return nil
}

func (k *Kernel) Entries(name string) ([]Entry, error) {
	r, err := k.list(name)
	if err != nil {
		return nil, fmt.Errorf("list entries of ip set %s: %w", name, err)
	}
	s := setFromResult(r)
	entries := make([]Entry, 0, len(r.Entries))
	for _, ne := range r.Entries {
		entries = append(entries, entryFromNetlink(s.Type, ne))
	}
	return entries, nil
}

func (k *Kernel) AddEntry(name string, e Entry) error {
	return k.addDel("add", nl.IPSET_CMD_ADD, name, e, k.h.IpsetAdd)
}

func (k *Kernel) DeleteEntry(name string, e Entry) error {
	return k.addDel("delete", nl.IPSET_CMD_DEL, name, e, k.h.IpsetDel)
}

func (k *Kernel) addDel(op string, cmd int, name string, e Entry, call func(string, *netlink.IPSetEntry) error) error {
	s, err := k.lookup(name)
	if err != nil {
		return fmt.Errorf("%s entry in ip set %s: %w", op, name, err)
	}
	e, err = checkEntry(s, e)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	send := func() error { return call(name, entryToNetlink(s.Type, e)) }
	if s.Type == BitmapPort {
		send = func() error { return k.raw.port(cmd, name, e.Port) }
	}
	if err := guard(send); err != nil {
		k.forget(name)
		return fmt.Errorf("%s entry %s in %s set %s: %w", op, e.String(s.Type), s.Type, name, mapError(err, op == "delete"))
	}
	return nil
}

func (k *Kernel) SwapSets(a, b string) error {
	k.forget(a)
	k.forget(b)
	if err := guard(func() error { return k.h.IpsetSwap(a, b) }); err != nil {
		return fmt.Errorf("swap ip sets %s and %s: %w", a, b, mapError(err, false))
	}
	return nil
}

// list dumps one set, merging the messages a large set is split into.
func (k *Kernel) list(name string) (*netlink.IPSetResult, error) {
	var r *netlink.IPSetResult
	err := guard(func() (err error) { r, err = k.h.IpsetList(name); return err })
	if err != nil {
		k.forget(name)
		return nil, mapError(err, false)
	}
	k.remember(setFromResult(r))
	return r, nil
}

// lookup returns the set's type and family, from memory or the kernel.
func (k *Kernel) lookup(name string) (Set, error) {
	k.mu.Lock()
	s, ok := k.sets[name]
	k.mu.Unlock()
	if ok {
		return s, nil
	}
	r, err := k.list(name)
	if err != nil {
		return Set{}, err
	}
	return setFromResult(r), nil
}

func (k *Kernel) remember(s Set) {
	k.mu.Lock()
	k.sets[s.Name] = s
	k.mu.Unlock()
}

func (k *Kernel) forget(name string) {
	k.mu.Lock()
	delete(k.sets, name)
	k.mu.Unlock()
}

// guard turns a panic in the library into an error: in v1.3.1 ipsetExecute
// type-asserts every error to syscall.Errno, which panics on any other error
// (a short read, a sequence mismatch, netlink.ErrDumpInterrupted).
func guard(call func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("netlink library panicked: %v", r)
		}
	}()
	return call()
}

// mapError maps the kernel's answers (include/uapi/linux/netfilter/ipset/ip_set.h
// and net/netfilter/ipset/ip_set_core.c) to this package's sentinels.
func mapError(err error, deleting bool) error {
	var ipsetErr nl.IPSetError
	if errors.As(err, &ipsetErr) {
		switch int(ipsetErr) {
		case nl.IPSET_ERR_EXIST:
			// The kernel answers IPSET_ERR_EXIST ("element already added"
			// or "element not added/deleted") both to a duplicate add
			// and to a delete of a missing element.
			if deleting {
				return fmt.Errorf("%w (%v)", ErrNotFound, err)
			}
			return fmt.Errorf("%w (%v)", ErrExists, err)
		case nl.IPSET_ERR_EXIST_SETNAME2:
			// The second set of a swap is missing.
			return fmt.Errorf("%w (second set: %v)", ErrNotFound, err)
		case nl.IPSET_ERR_BUSY, nl.IPSET_ERR_REFERENCED:
			return fmt.Errorf("%w (%v)", ErrBusy, err)
		case nl.IPSET_ERR_TYPE_SPECIFIC: // IPSET_ERR_HASH_FULL
			if !deleting {
				return fmt.Errorf("%w (%v)", ErrFull, err)
			}
		case nl.IPSET_ERR_FIND_TYPE:
			return fmt.Errorf("%w (%v)", ErrUnsupported, err)
		case nl.IPSET_ERR_PROTOCOL, nl.IPSET_ERR_TYPE_MISMATCH, nl.IPSET_ERR_INVALID_CIDR,
			nl.IPSET_ERR_INVALID_FAMILY, nl.IPSET_ERR_IPADDR_IPV4, nl.IPSET_ERR_IPADDR_IPV6:
			// IPSET_ERR_PROTOCOL is what the kernel answers when an
			// attribute the type needs is missing or of the wrong family.
			return fmt.Errorf("%w (%v)", ErrInvalidEntry, err)
		}
		if int(ipsetErr) >= nl.IPSET_ERR_TYPE_SPECIFIC {
			// e.g. IPSET_ERR_BITMAP_RANGE, IPSET_ERR_INVALID_PROTO.
			return fmt.Errorf("%w (%v)", ErrInvalidEntry, err)
		}
		return err
	}
	switch {
	case errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("%w (%v)", ErrExists, err)
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("%w (%v)", ErrNotFound, err)
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("%w (%v)", ErrBusy, err)
	case errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.EPROTONOSUPPORT):
		// nfnetlink has no ipset subsystem: ip_set is not built or loaded.
		return fmt.Errorf("%w (%v)", ErrUnsupported, err)
	}
	return err
}

func familyNumber(f Family) uint8 {
	if f == IPv6 {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

func setFromResult(r *netlink.IPSetResult) Set {
	s := Set{Name: r.SetName, Type: Type(r.TypeName), MaxElem: r.MaxElements}
	switch r.Family {
	case unix.AF_INET:
		s.Family = IPv4
	case unix.AF_INET6:
		s.Family = IPv6
	}
	return s
}

func ipBytes(a netip.Addr) net.IP {
	return net.IP(a.AsSlice())
}

func entryToNetlink(t Type, e Entry) *netlink.IPSetEntry {
	ne := &netlink.IPSetEntry{}
	port := e.Port
	switch t {
	case HashIP:
		ne.IP = ipBytes(e.IP)
	case HashIPPort, HashIPPortIP, HashIPPortNet:
		ne.IP = ipBytes(e.IP)
		proto := protocolNumbers[e.Protocol]
		ne.Protocol, ne.Port = &proto, &port
		switch t {
		case HashIPPortIP:
			ne.IP2 = ipBytes(e.IP2)
		case HashIPPortNet:
			ne.IP2 = ipBytes(e.Net.Addr())
			ne.CIDR2 = uint8(e.Net.Bits())
		}
	case HashNet:
		ne.IP = ipBytes(e.Net.Addr())
		ne.CIDR = uint8(e.Net.Bits())
	}
	return ne
}

func addrFrom(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a
}

func entryFromNetlink(t Type, ne netlink.IPSetEntry) Entry {
	var e Entry
	if ne.Port != nil {
		e.Port = *ne.Port
	}
	switch t {
	case HashIP:
		e.IP = addrFrom(ne.IP)
	case HashIPPort, HashIPPortIP, HashIPPortNet:
		e.IP = addrFrom(ne.IP)
		if ne.Protocol != nil {
			e.Protocol = protocolName(*ne.Protocol)
		}
		switch t {
		case HashIPPortIP:
			e.IP2 = addrFrom(ne.IP2)
		case HashIPPortNet:
			e.Net = netip.PrefixFrom(addrFrom(ne.IP2), int(ne.CIDR2))
		}
	case HashNet:
		e.Net = netip.PrefixFrom(addrFrom(ne.IP), int(ne.CIDR))
	}
	return e
}
