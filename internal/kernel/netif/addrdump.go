package netif

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nldump"
)

// Addresses read in one streamed dump. The netlink library's AddrList
// gathers the whole answer and builds a netlink.Addr for each address (a
// net.IPNet, a label, its cache times): eight allocations and about 1.5 KB
// an address, 14.6 MB for the 10,000 of a node that binds every cluster IP,
// read again by every full re-check. Here each message is parsed in the
// receive buffer and only the address and its link are kept.

// addressDumpTries bounds the reads of a dump the kernel keeps marking
// interrupted (addresses changing all the while).
const addressDumpTries = 5

// dumpAddrs reads the addresses of the link with index linkIndex, or of
// every link when it is 0. A dump the kernel marks interrupted (an address
// added or removed between two of its buffers, which may have skipped one)
// is read again.
func (k *kernel) dumpAddrs(linkIndex int) ([]indexedAddr, error) {
	var err error
	for range addressDumpTries {
		var out []indexedAddr
		out, err = k.batches.dumpAddrs(linkIndex, k.onAddressDumpBuffer)
		if !errors.Is(err, nldump.ErrDumpInterrupted) {
			return out, err
		}
		k.batches.interruptedDumps.Add(1)
	}
	return nil, fmt.Errorf("list addresses: %w %d times", err, addressDumpTries)
}

// dumpAddrs sends one RTM_GETADDR dump of both families and keeps each
// address of linkIndex (every link's when 0): the kernel filters a dump by
// link only on a strict-checking socket, so the filter is applied here.
// afterBuffer, when set, runs after each received buffer (tests).
func (e *exchanger) dumpAddrs(linkIndex int, afterBuffer func()) ([]indexedAddr, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []indexedAddr
	req := netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETADDR},
		Data:   make([]byte, unix.SizeofIfAddrmsg), // AF_UNSPEC: both families
	}
	var endOfBuffer func() error
	if afterBuffer != nil {
		endOfBuffer = func() error { afterBuffer(); return nil }
	}
	err := e.reader.DumpConsistent(req, func(payload []byte) error {
		a, ok, err := parseAddressMessage(payload)
		if err != nil || !ok || linkIndex != 0 && a.linkIndex != linkIndex {
			return err
		}
		out = append(out, a)
		return nil
	}, endOfBuffer)
	return out, err
}

// parseAddressMessage reads one RTM_NEWADDR: its link from the ifaddrmsg,
// its address from IFA_LOCAL, else IFA_ADDRESS (on a point-to-point link
// IFA_ADDRESS is the peer; the netlink library reads them the same way).
// ok is false for a family other than IPv4 and IPv6.
func parseAddressMessage(payload []byte) (a indexedAddr, ok bool, err error) {
	if len(payload) < unix.SizeofIfAddrmsg {
		return a, false, fmt.Errorf("address message of %d bytes", len(payload))
	}
	family := payload[0]
	if family != unix.AF_INET && family != unix.AF_INET6 {
		return a, false, nil
	}
	a.linkIndex = int(binary.NativeEndian.Uint32(payload[4:8]))
	var local, address netip.Addr
	err = nldump.Attributes(payload[unix.SizeofIfAddrmsg:], func(typ uint16, value []byte) error {
		switch typ {
		case unix.IFA_LOCAL:
			local, _ = netip.AddrFromSlice(value)
		case unix.IFA_ADDRESS:
			address, _ = netip.AddrFromSlice(value)
		}
		return nil
	})
	if err != nil {
		return a, false, err
	}
	a.addr = local
	if !a.addr.IsValid() {
		a.addr = address
	}
	if !a.addr.IsValid() {
		return a, false, fmt.Errorf("address message of link %d without an address", a.linkIndex)
	}
	a.addr = a.addr.Unmap()
	return a, true, nil
}
