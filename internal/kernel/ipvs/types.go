package ipvs

import (
	"fmt"
	"net/netip"
	"time"
)

// Protocol is an IP protocol number as IPVS stores it.
type Protocol uint8

// The transport protocols Kubernetes Services use.
const (
	TCP  Protocol = 6
	UDP  Protocol = 17
	SCTP Protocol = 132
)

func (p Protocol) String() string {
	switch p {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	case SCTP:
		return "SCTP"
	}
	return fmt.Sprintf("proto-%d", uint8(p))
}

// VirtualServerKey identifies a virtual server the way the kernel does.
type VirtualServerKey struct {
	Address  netip.Addr
	Port     uint16
	Protocol Protocol
}

// String renders the key as "TCP 10.96.0.10:80" or "UDP [fd00::a]:53".
func (k VirtualServerKey) String() string {
	return k.Protocol.String() + " " + netip.AddrPortFrom(k.Address, k.Port).String()
}

// VirtualServer is one IPVS service (an address, port and protocol that the
// kernel load-balances).
type VirtualServer struct {
	VirtualServerKey
	// Scheduler is the IPVS scheduler name ("twos", "wrr", "rr", ...).
	Scheduler string
	// SchedulerFlags are the scheduler's flags (ipvsadm -b), meaningful to
	// sh and mh only. See ParseSchedulerFlags.
	SchedulerFlags SchedulerFlags
	// PersistenceTimeout, when non-zero, makes the virtual server persistent:
	// one client address keeps its real server for this long (ClientIP
	// session affinity). Zero means not persistent.
	PersistenceTimeout time.Duration
}

// RealServerKey identifies a real server within one virtual server.
type RealServerKey struct {
	Address netip.Addr
	Port    uint16
}

func (k RealServerKey) String() string { return netip.AddrPortFrom(k.Address, k.Port).String() }

// RealServer is one destination of a virtual server. The proxier always uses
// masquerading (NAT) forwarding, so no forwarding method is carried here.
type RealServer struct {
	RealServerKey
	// Weight 0 stops new connections while existing ones drain. The kernel
	// keeps it in 32 bits; the adapters accept 0-65535, as ipvsadm.
	Weight int32
	// ActiveConnections and InactiveConnections are read from the kernel
	// (32-bit counters there); they are ignored on writes.
	ActiveConnections   uint32
	InactiveConnections uint32
}

// Timeouts are the IPVS connection timeouts (ipvsadm --set). A zero field
// leaves that timeout unchanged.
type Timeouts struct {
	TCP    time.Duration
	TCPFin time.Duration
	UDP    time.Duration
}

// Interface is the IPVS table of one network namespace.
type Interface interface {
	// VirtualServers lists every virtual server in the namespace, including
	// ones the proxier did not create, in no particular order (the
	// kernel's is its hash table's; nobody needs another, and sorting
	// 10,000 cost each full read and each period's re-check 5 ms). It
	// returns an empty slice when there are none.
	VirtualServers() ([]VirtualServer, error)
	// AddVirtualServer creates a virtual server. It fails with ErrExists when
	// the key is taken, and with ErrNoScheduler when the kernel does not know
	// the scheduler.
	AddVirtualServer(vs VirtualServer) error
	// UpdateVirtualServer changes the scheduler or persistence of an existing
	// virtual server; ErrNotFound when it does not exist.
	UpdateVirtualServer(vs VirtualServer) error
	// DeleteVirtualServer deletes a virtual server and all its real servers;
	// ErrNotFound when it does not exist.
	DeleteVirtualServer(key VirtualServerKey) error
	// RealServers lists the real servers of a virtual server (empty when it
	// has none), sorted by address and port in a new slice the caller may
	// keep; ErrNotFound when the virtual server does not exist.
	RealServers(vs VirtualServerKey) ([]RealServer, error)
	// ListedRealServers is RealServers without first asking whether the
	// virtual server exists: one netlink request instead of two, for a
	// caller that has just listed vs. The kernel answers the dump of a
	// virtual server that is gone with an empty list, not an error, so an
	// empty answer proves nothing: ask RealServers then.
	// The list is put in into's room (into[:0]; nil: new room) and
	// returned, never nil: a caller reading every virtual server in a row
	// lends one slice to all of them, and keeps what it needs of each by
	// copying it (a full re-check of 10,000 × 10 otherwise allocated
	// 5.6 MB of lists that it dropped at once).
	ListedRealServers(vs VirtualServerKey, into []RealServer) ([]RealServer, error)
	// AddRealServer adds a masqueraded real server; ErrExists when present,
	// ErrNotFound when the virtual server does not exist.
	AddRealServer(vs VirtualServerKey, rs RealServer) error
	// UpdateRealServer changes a real server's weight; ErrNotFound when the
	// virtual server or the real server does not exist.
	UpdateRealServer(vs VirtualServerKey, rs RealServer) error
	// DeleteRealServer removes a real server; ErrNotFound when the virtual
	// server or the real server does not exist.
	DeleteRealServer(vs VirtualServerKey, rs RealServerKey) error
	// SetTimeouts sets the IPVS connection timeouts.
	SetTimeouts(t Timeouts) error
	// Close releases the netlink handle.
	Close() error
}
