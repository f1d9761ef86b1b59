package listeners

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Protocol of a listening socket.
type Protocol string

const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// Listener is one socket that takes traffic a virtual server on its address
// and port would take from it: a TCP or SCTP socket in LISTEN, or a bound
// UDP socket, connected or not (every datagram to a connected socket's
// address and port, its peer's replies included, is a new flow to IPVS,
// while TCP and SCTP schedule only a connection's first packet, so their
// connected sockets are safe). Addr is the unspecified address (0.0.0.0 or
// ::) for a socket bound to every address of its family; an IPv6 wildcard
// may also take IPv4 (unless IPV6_V6ONLY), so callers should take :: as
// every address.
type Listener struct {
	Protocol Protocol
	Addr     netip.Addr
	Port     uint16
}

func (l Listener) String() string {
	return fmt.Sprintf("%s %s", l.Protocol, netip.AddrPortFrom(l.Addr, l.Port))
}

// Covers reports whether the socket takes protocol traffic to a:port.
func (l Listener) Covers(protocol Protocol, a netip.AddrPort) bool {
	if l.Protocol != protocol || l.Port != a.Port() {
		return false
	}
	if l.Addr.IsUnspecified() {
		return l.Addr.Is6() || a.Addr().Unmap().Is4()
	}
	return l.Addr == a.Addr().Unmap()
}

// Interface lists the host's listening sockets.
type Interface interface {
	// Listening returns every TCP and SCTP socket in LISTEN and every UDP
	// socket bound to a port, connected or not, both families, sorted and
	// without duplicates (SO_REUSEPORT groups are one entry; an SCTP socket
	// bound to several addresses is one entry per address). An empty list
	// is no error.
	Listening() ([]Listener, error)
}

// Table reads the listening sockets of one network namespace.
type Table struct{ nsFD int }

var _ Interface = Table{}

// New reads the caller's network namespace.
func New() Table { return Table{} }

// NewInNamespace reads the namespace whose file descriptor is nsFD.
func NewInNamespace(nsFD int) Table { return Table{nsFD: nsFD} }

// Kernel constants of inet_diag (linux/inet_diag.h, include/net/tcp_states.h).
const (
	sockDiagByFamily = 20
	tcpEstablished   = 1  // TCP_ESTABLISHED: a connected UDP socket
	tcpClose         = 7  // TCP_CLOSE: an unconnected UDP socket
	tcpListen        = 10 // TCP_LISTEN, also SCTP_SS_LISTENING
	inetDiagReqLen   = 56 // struct inet_diag_req_v2
	inetDiagMsgMin   = 72 // struct inet_diag_msg
)

func (t Table) Listening() ([]Listener, error) {
	conn, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, &netlink.Config{NetNS: t.nsFD})
	if err != nil {
		return nil, fmt.Errorf("open sock_diag netlink socket: %w", err)
	}
	defer conn.Close()
	var out []Listener
	for _, q := range []struct {
		protocol Protocol
		proto    uint8
		states   uint32
	}{{TCP, unix.IPPROTO_TCP, 1 << tcpListen}, {UDP, unix.IPPROTO_UDP, 1<<tcpClose | 1<<tcpEstablished}} {
		for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
			found, err := dump(conn, family, q.proto, q.states)
			if err != nil {
				return nil, fmt.Errorf("list %s listeners (family %d): %w", q.protocol, family, err)
			}
			for _, ap := range found {
				out = append(out, Listener{Protocol: q.protocol, Addr: ap.Addr(), Port: ap.Port()})
			}
		}
	}
	sctp, err := t.sctpListening()
	if err != nil {
		return nil, err
	}
	return normalize(append(out, sctp...)), nil
}

// dump asks for the sockets of one family and protocol in the states of
// the bit mask and returns their local addresses.
func dump(conn *netlink.Conn, family, proto uint8, states uint32) ([]netip.AddrPort, error) {
	req := make([]byte, inetDiagReqLen)
	req[0], req[1] = family, proto
	binary.NativeEndian.PutUint32(req[4:8], states)
	msgs, err := conn.Execute(netlink.Message{
		Header: netlink.Header{Type: sockDiagByFamily, Flags: netlink.Request | netlink.Dump},
		Data:   req,
	})
	if err != nil {
		return nil, err
	}
	var out []netip.AddrPort
	for _, m := range msgs {
		b := m.Data
		if len(b) < inetDiagMsgMin {
			return nil, errors.New("short inet_diag_msg")
		}
		port := binary.BigEndian.Uint16(b[4:6])
		var a netip.Addr
		if b[0] == unix.AF_INET {
			a = netip.AddrFrom4([4]byte(b[8:12]))
		} else {
			a = netip.AddrFrom16([16]byte(b[8:24])).Unmap()
		}
		out = append(out, netip.AddrPortFrom(a, port))
	}
	return out, nil
}

// normalize sorts listeners and drops duplicates.
func normalize(in []Listener) []Listener {
	slices.SortFunc(in, func(a, b Listener) int {
		if a.Protocol != b.Protocol {
			if a.Protocol < b.Protocol {
				return -1
			}
			return 1
		}
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
	return slices.Compact(in)
}
