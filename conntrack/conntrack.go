package conntrack

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"github.com/ti-mo/netfilter"
	"golang.org/x/sys/unix"
)

// Table is the conntrack table of one network namespace, reached over
// ctnetlink through github.com/ti-mo/conntrack.
type Table struct {
	conn *ct.Conn
}

var _ Interface = (*Table)(nil)

// New opens a ctnetlink socket in the caller's network namespace.
func New() (*Table, error) {
	return NewInNamespace(0)
}

// NewInNamespace opens a ctnetlink socket in the network namespace whose file
// descriptor is nsFD (a netns.NsHandle converted to int); 0 means the
// caller's own. The socket stays in that namespace for its lifetime.
func NewInNamespace(nsFD int) (*Table, error) {
	conn, err := ct.Dial(&netlink.Config{NetNS: nsFD})
	if err != nil {
		return nil, fmt.Errorf("open conntrack netlink socket: %w", mapError(err))
	}
	return &Table{conn: conn}, nil
}

func (t *Table) Close() error {
	return t.conn.Close()
}

func (t *Table) Flows(family int) ([]Flow, error) {
	var pf netfilter.ProtoFamily
	switch family {
	case 4:
		pf = netfilter.ProtoIPv4
	case 6:
		pf = netfilter.ProtoIPv6
	default:
		return nil, fmt.Errorf("list conntrack flows: address family %d is neither 4 nor 6", family)
	}
	// The family travels in the request header only (no filter
	// attributes); flows are checked again here, which costs nothing.
	flows, err := t.dump(pf)
	if err != nil {
		return nil, fmt.Errorf("list IPv%d conntrack flows: %w", family, err)
	}
	var out []Flow
	for _, f := range flows {
		if flow, ok := fromKernel(f); ok && flowFamily(flow) == family {
			out = append(out, flow)
		}
	}
	return out, nil
}

// DeleteFlows dumps the whole table once and deletes each matching flow by
// its tuples. Matching happens here: ti-mo/conntrack v0.6.0 filters dumps and
// flushes by family, mark, status and zone only, and the kernel's tuple
// filter for dumps (CTA_FILTER with CTA_FILTER_ORIG_FLAGS/REPLY_FLAGS) exists
// only since Linux 5.8 and never applies to a flush or delete.
func (t *Table) DeleteFlows(filters ...Filter) (int, error) {
	if len(filters) == 0 {
		return 0, nil
	}
	flows, err := t.dump(netfilter.ProtoUnspec)
	if err != nil {
		return 0, fmt.Errorf("delete conntrack flows: list: %w", err)
	}
	return t.deleteMatching(flows, filters)
}

func (t *Table) deleteMatching(flows []ct.Flow, filters []Filter) (int, error) {
	deleted := 0
	var errs []error
	for _, f := range flows {
		flow, ok := fromKernel(f)
		if !ok || !matchesAny(filters, flow) {
			continue
		}
		err := t.conn.Delete(ct.Flow{TupleOrig: f.TupleOrig, TupleReply: f.TupleReply, Zone: f.Zone})
		switch {
		case err == nil:
			deleted++
		case errors.Is(err, unix.ENOENT):
			// The flow expired or was deleted since the dump: the goal
			// is met.
		default:
			errs = append(errs, fmt.Errorf("delete conntrack flow %s: %w", flow, mapError(err)))
		}
	}
	return deleted, errors.Join(errs...)
}

func (t *Table) dump(pf netfilter.ProtoFamily) ([]ct.Flow, error) {
	var (
		flows []ct.Flow
		err   error
	)
	if pf == netfilter.ProtoUnspec {
		flows, err = t.conn.Dump(nil)
	} else {
		flows, err = t.conn.DumpFilter(ct.NewFilter().Family(pf), nil)
	}
	if err != nil {
		return nil, mapError(err)
	}
	return flows, nil
}

func mapError(err error) error {
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) {
		// nfnetlink has no ctnetlink subsystem: nf_conntrack_netlink is
		// not built or loaded.
		return fmt.Errorf("%w (%v)", ErrUnsupported, err)
	}
	return err
}

func matchesAny(filters []Filter, flow Flow) bool {
	for _, f := range filters {
		if f.Matches(flow) {
			return true
		}
	}
	return false
}

// fromKernel converts a dumped flow; flows without ports (icmp, gre) are
// reported with port 0. ok is false for a flow without addresses.
func fromKernel(f ct.Flow) (Flow, bool) {
	o, r := f.TupleOrig, f.TupleReply
	if !o.IP.SourceAddress.IsValid() || !r.IP.SourceAddress.IsValid() {
		return Flow{}, false
	}
	ap := func(a netip.Addr, port uint16) netip.AddrPort { return netip.AddrPortFrom(a, port) }
	return Flow{
		Protocol: o.Proto.Protocol,
		OrigSrc:  ap(o.IP.SourceAddress, o.Proto.SourcePort),
		OrigDst:  ap(o.IP.DestinationAddress, o.Proto.DestinationPort),
		ReplySrc: ap(r.IP.SourceAddress, r.Proto.SourcePort),
		ReplyDst: ap(r.IP.DestinationAddress, r.Proto.DestinationPort),
		State:    flowState(f),
		Timeout:  time.Duration(f.Timeout) * time.Second,
	}, true
}

// tcpStates are the names of enum tcp_conntrack
// (include/uapi/linux/netfilter/nf_conntrack_tcp.h), as conntrack -L prints them.
var tcpStates = []string{"NONE", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT", "CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE", "SYN_SENT2"}

func flowState(f ct.Flow) string {
	if f.ProtoInfo.TCP != nil {
		if s := int(f.ProtoInfo.TCP.State); s < len(tcpStates) {
			return tcpStates[s]
		}
		return fmt.Sprintf("TCP_STATE_%d", f.ProtoInfo.TCP.State)
	}
	switch {
	case f.Status.Assured():
		return "ASSURED"
	case f.Status.SeenReply():
		return "REPLIED"
	}
	return "UNREPLIED"
}

func flowFamily(f Flow) int {
	if f.OrigSrc.Addr().Is4() {
		return 4
	}
	return 6
}
