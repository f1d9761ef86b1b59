package netif

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nldump"
)

// Addresses bound and unbound in batches. AddDummyAddress looks the link up
// and sends one RTM_NEWADDR, waiting for each answer: two round trips an
// address, 10,000 of them on a node that binds every cluster IP. The kernel
// also takes many address messages in one send and acknowledges each
// (netlink_rcv_skb): the batches look the link up once and send up to
// nldump.MaxExchange messages at a time.

// AddressBatcher is a dummy interface that binds and unbinds several
// addresses at once (the kernel's); AddDummyAddresses and
// DeleteDummyAddresses use it when there is one.
type AddressBatcher interface {
	// AddDummyAddresses binds addrs and returns each one's outcome in
	// order, as AddDummyAddress's.
	AddDummyAddresses(addrs []netip.Addr) []error
	// DeleteDummyAddresses unbinds addrs and returns each one's outcome
	// in order, as DeleteDummyAddress's.
	DeleteDummyAddresses(addrs []netip.Addr) []error
}

// AddDummyAddresses binds addrs on i, in batches when i is an
// AddressBatcher, else one AddDummyAddress each (the fake, and wrappers
// that count or fail calls). It returns each address's outcome in order.
func AddDummyAddresses(i Interface, addrs []netip.Addr) []error {
	if b, ok := i.(AddressBatcher); ok {
		return b.AddDummyAddresses(addrs)
	}
	return eachAddress(addrs, i.AddDummyAddress)
}

// DeleteDummyAddresses unbinds addrs from i, in batches when i is an
// AddressBatcher, else one DeleteDummyAddress each.
func DeleteDummyAddresses(i Interface, addrs []netip.Addr) []error {
	if b, ok := i.(AddressBatcher); ok {
		return b.DeleteDummyAddresses(addrs)
	}
	return eachAddress(addrs, i.DeleteDummyAddress)
}

func eachAddress(addrs []netip.Addr, write func(netip.Addr) error) []error {
	out := make([]error, len(addrs))
	for i, a := range addrs {
		out[i] = write(a)
	}
	return out
}

// exchanger sends batches of rtnetlink requests, and reads address dumps,
// over its own socket, one at a time.
type exchanger struct {
	mu     sync.Mutex
	conn   *netlink.Conn
	reader *nldump.Reader
	// failedSends counts the sends that failed as a whole, whose
	// addresses then went one at a time: otherwise only slowness.
	failedSends atomic.Int64
	// interruptedDumps counts the address dumps read again because the
	// kernel marked them interrupted.
	interruptedDumps atomic.Int64
}

func dialExchanger(nsFD int) (*exchanger, error) {
	conn, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: nsFD})
	if err != nil {
		return nil, fmt.Errorf("open rtnetlink socket: %w", err)
	}
	reader, err := nldump.NewReader(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &exchanger{conn: conn, reader: reader}, nil
}

func (e *exchanger) exchange(reqs []netlink.Message) ([]error, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reader.Exchange(reqs)
}

func (e *exchanger) close() { e.conn.Close() }

func (k *kernel) AddDummyAddresses(addrs []netip.Addr) []error {
	return k.writeAddresses(addrs, true)
}

func (k *kernel) DeleteDummyAddresses(addrs []netip.Addr) []error {
	return k.writeAddresses(addrs, false)
}

// writeAddresses binds (add) or unbinds addrs with one lookup of the link
// and their messages nldump.MaxExchange per send. A send that fails as a
// whole goes again one address at a time, each answered; an unbind the
// kernel refuses for the prefix length goes through DeleteDummyAddress,
// which finds the address bound with another.
func (k *kernel) writeAddresses(addrs []netip.Addr, add bool) []error {
	verb, dir := "add", "to"
	single := k.AddDummyAddress
	if !add {
		verb, dir, single = "delete", "from", k.DeleteDummyAddress
	}
	out := make([]error, len(addrs))
	if len(addrs) == 0 {
		return out
	}
	link, err := k.dummyLink()
	if err != nil {
		for i, a := range addrs {
			out[i] = fmt.Errorf("%s address %s %s %s: %w", verb, a, dir, k.dummy, err)
		}
		return out
	}
	var (
		reqs  []netlink.Message
		valid []netip.Addr
		at    []int
	)
	for i, a := range addrs {
		a, err := canonicalAddr(a)
		if err != nil {
			out[i] = fmt.Errorf("%s address %s %s: %w", verb, dir, k.dummy, err)
			continue
		}
		reqs = append(reqs, addressMessage(uint32(link.Attrs().Index), a, add))
		valid, at = append(valid, a), append(at, i)
	}
	for start := 0; start < len(reqs); start += nldump.MaxExchange {
		end := min(start+nldump.MaxExchange, len(reqs))
		outcomes, err := k.batches.exchange(reqs[start:end])
		if err != nil {
			k.batches.failedSends.Add(1)
			// What the kernel did with these is unknown: each again
			// alone (an address bound or gone since answers so).
			for v := start; v < end; v++ {
				out[at[v]] = single(valid[v])
			}
			continue
		}
		for j, o := range outcomes {
			v := start + j
			switch {
			case o == nil:
			case add && errors.Is(o, unix.EEXIST):
				out[at[v]] = fmt.Errorf("add address %s to %s: %w (%w)", valid[v], k.dummy, ErrExists, o)
			case !add && errors.Is(o, unix.EADDRNOTAVAIL):
				out[at[v]] = single(valid[v])
			default:
				out[at[v]] = fmt.Errorf("%s address %s %s %s: %w", verb, valid[v], dir, k.dummy, o)
			}
		}
	}
	return out
}

// addressMessage is the RTM_NEWADDR (add, which must not replace a bound
// address: NLM_F_EXCL) or RTM_DELADDR of a as a host prefix on the link of
// index, with what AddDummyAddress sends through the netlink library:
// IFA_LOCAL and IFA_ADDRESS both a, universe scope, IFA_F_NODAD for an IPv6
// one bound.
func addressMessage(index uint32, a netip.Addr, add bool) netlink.Message {
	family, flags := uint8(unix.AF_INET), uint8(0)
	if a.Is6() {
		family = unix.AF_INET6
		if add {
			flags = unix.IFA_F_NODAD
		}
	}
	data := []byte{family, uint8(a.BitLen()), flags, unix.RT_SCOPE_UNIVERSE} // struct ifaddrmsg
	data = binary.NativeEndian.AppendUint32(data, index)
	data = nldump.AppendAttribute(data, unix.IFA_LOCAL, a.AsSlice())
	data = nldump.AppendAttribute(data, unix.IFA_ADDRESS, a.AsSlice())
	header := netlink.Header{Type: unix.RTM_NEWADDR, Flags: netlink.Create | netlink.Excl}
	if !add {
		header = netlink.Header{Type: unix.RTM_DELADDR}
	}
	return netlink.Message{Header: header, Data: data}
}
