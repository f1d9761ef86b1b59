package conntrack

import (
	"net/netip"
	"time"
)

// Protocol numbers used in filters.
const (
	TCP  uint8 = 6
	UDP  uint8 = 17
	SCTP uint8 = 132
)

// Flow is one conntrack entry: the original direction as the client sent it
// and the reply direction as the kernel expects it back (after NAT).
type Flow struct {
	Protocol uint8
	OrigSrc  netip.AddrPort
	OrigDst  netip.AddrPort
	ReplySrc netip.AddrPort
	ReplyDst netip.AddrPort
	// State is the TCP state (ESTABLISHED, TIME_WAIT, ...), or for other
	// protocols ASSURED, REPLIED or UNREPLIED. Read only; filters ignore it.
	State string
	// Timeout is the time left before the kernel expires the flow. Read only.
	Timeout time.Duration
}

// Filter selects flows of one protocol. A zero field matches anything; every
// set field must match.
type Filter struct {
	Protocol uint8
	// OrigDst and OrigDstPort select by the address the client dialled
	// (a service IP and port).
	OrigDst     netip.Addr
	OrigDstPort uint16
	// ReplySrc and ReplySrcPort select by who answers (an endpoint after DNAT).
	ReplySrc     netip.Addr
	ReplySrcPort uint16
}

// Matches reports whether f selects flow.
func (f Filter) Matches(flow Flow) bool {
	if f.Protocol != 0 && f.Protocol != flow.Protocol {
		return false
	}
	if f.OrigDst.IsValid() && f.OrigDst != flow.OrigDst.Addr() {
		return false
	}
	if f.OrigDstPort != 0 && f.OrigDstPort != flow.OrigDst.Port() {
		return false
	}
	if f.ReplySrc.IsValid() && f.ReplySrc != flow.ReplySrc.Addr() {
		return false
	}
	if f.ReplySrcPort != 0 && f.ReplySrcPort != flow.ReplySrc.Port() {
		return false
	}
	return true
}

// Interface is the conntrack table of one network namespace.
type Interface interface {
	// Flows lists every flow of the given address family (4 or 6).
	Flows(family int) ([]Flow, error)
	// DeleteFlows deletes every flow that matches any of filters and returns
	// how many it deleted. A flow that vanishes meanwhile is not an error.
	DeleteFlows(filters ...Filter) (int, error)
	// DeleteFlowsMatching deletes every flow of one address family (4 or 6)
	// and, unless protocol is 0, one protocol, for which stale returns true,
	// and returns how many it deleted. The table is streamed, not loaded:
	// memory does not grow with its size. A flow that vanishes meanwhile
	// is not an error.
	DeleteFlowsMatching(family int, protocol uint8, stale func(Flow) bool) (int, error)
	// Close releases the netlink socket.
	Close() error
}
