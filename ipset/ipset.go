package ipset

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/stdlog"
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
	// dump reads the sets (dump.go); h and raw write.
	dump *dumper

	// sets remembers each set's type and family: an add or delete names only
	// the set, but the entry must be encoded (and checked) for its type.
	// Filled by CreateSet, Sets and Entries; read from the kernel on a miss;
	// forgotten on any error so that a set recreated behind our back is
	// re-read.
	mu   sync.Mutex
	sets map[string]Set

	// refusedBatches counts the batch messages the kernel refused
	// (batch.go), whose members were then added one at a time: a message
	// the kernel cannot parse would otherwise only show as slowness.
	refusedBatches atomic.Int64
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
	nsFD := 0
	if ns != netns.None() {
		nsFD = int(ns)
	}
	d, err := dialDumper(nsFD)
	if err != nil {
		h.Close()
		raw.close()
		return nil, fmt.Errorf("open ipset netlink socket: %w", err)
	}
	return &Kernel{h: h, raw: raw, dump: d, sets: map[string]Set{}}, nil
}

// RefusedBatches is how many batch messages (batch.go) the kernel has
// refused since k was opened; each one's members then went one at a time.
func (k *Kernel) RefusedBatches() int64 { return k.refusedBatches.Load() }

// Close releases the netlink sockets.
func (k *Kernel) Close() error {
	k.h.Close()
	k.raw.close()
	k.dump.close()
	return nil
}

// Sets lists the sets' headers alone: the kernel leaves the entries out.
func (k *Kernel) Sets() ([]Set, error) {
	sets := []Set{}
	if err := k.dump.list("", true, func(s Set) { sets = append(sets, s) }, nil); err != nil {
		return nil, fmt.Errorf("list ip sets: %w", mapError(err, false))
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
	entries := []Entry{}
	if err := k.EachEntry(name, func(e Entry) { entries = append(entries, e) }); err != nil {
		return nil, err
	}
	return entries, nil
}

func (k *Kernel) EachEntry(name string, fn func(Entry)) error {
	if name == "" {
		return fmt.Errorf("list entries of an ip set without a name: %w", ErrNotFound)
	}
	if err := k.dump.list(name, false, k.remember, fn); err != nil {
		k.forget(name)
		return fmt.Errorf("list entries of ip set %s: %w", name, mapError(err, false))
	}
	return nil
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

// lookup returns the set's type and family, from memory or the kernel.
func (k *Kernel) lookup(name string) (Set, error) {
	k.mu.Lock()
	s, ok := k.sets[name]
	k.mu.Unlock()
	if ok {
		return s, nil
	}
	var found Set
	err := k.dump.list(name, true, func(s Set) { found = s }, nil)
	if err != nil {
		k.forget(name)
		return Set{}, mapError(err, false)
	}
	k.remember(found)
	return found, nil
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
