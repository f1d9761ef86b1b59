package conntrack

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"
)

// Table is the conntrack table of one network namespace, reached over
// ctnetlink: dumps stream on a socket of their own (dump.go), deletes go
// through github.com/ti-mo/conntrack on another, so a clean-up deletes while
// the dump is still running.
type Table struct {
	conn *ct.Conn
	dump *netlink.Conn
}

var _ Interface = (*Table)(nil)

// New opens ctnetlink sockets in the caller's network namespace.
func New() (*Table, error) {
	return NewInNamespace(0)
}

// NewInNamespace opens ctnetlink sockets in the network namespace whose file
// descriptor is nsFD (a netns.NsHandle converted to int); 0 means the
// caller's own. The sockets stay in that namespace for their lifetime.
func NewInNamespace(nsFD int) (*Table, error) {
	conn, err := ct.Dial(&netlink.Config{NetNS: nsFD})
	if err != nil {
		return nil, fmt.Errorf("open conntrack netlink socket: %w", mapError(err))
	}
	dump, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: nsFD})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("open conntrack dump socket: %w", mapError(err))
	}
	return &Table{conn: conn, dump: dump}, nil
}

func (t *Table) Close() error {
	return errors.Join(t.conn.Close(), t.dump.Close())
}

func (t *Table) Flows(family int) ([]Flow, error) {
	af, err := addressFamily(family)
	if err != nil {
		return nil, fmt.Errorf("list conntrack flows: %w", err)
	}
	var out []Flow
	err = streamFlows(t.dump, af, 0, func(batch []kernelFlow) error {
		for _, f := range batch {
			if flow, ok := f.toFlow(); ok && flowFamily(flow) == family {
				out = append(out, flow)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list IPv%d conntrack flows: %w", family, mapError(err))
	}
	return out, nil
}

// DeleteFlows streams each family's table once and deletes each flow that
// matches a filter. Matching happens here: the kernel's tuple filter for
// dumps (CTA_FILTER, Linux 5.8) takes one tuple per request and never
// applies to a delete; only the protocol, when every filter names the same
// one, is left to the kernel.
func (t *Table) DeleteFlows(filters ...Filter) (int, error) {
	if len(filters) == 0 {
		return 0, nil
	}
	protocol := filters[0].Protocol
	for _, f := range filters {
		if f.Protocol != protocol {
			protocol = 0
		}
	}
	idx := newFilterIndex(filters)
	deleted := 0
	var errs []error
	for _, family := range filterFamilies(filters) {
		n, err := t.DeleteFlowsMatching(family, protocol, idx.matches)
		deleted += n
		if err != nil {
			errs = append(errs, fmt.Errorf("delete conntrack flows: %w", err))
		}
	}
	return deleted, errors.Join(errs...)
}

// DeleteFlowsMatching streams the table of one family, filtered by protocol
// in the kernel, and deletes each flow stale selects while the dump goes on.
// It holds one receive buffer and one batch of flows at a time.
func (t *Table) DeleteFlowsMatching(family int, protocol uint8, stale func(Flow) bool) (int, error) {
	af, err := addressFamily(family)
	if err != nil {
		return 0, fmt.Errorf("delete conntrack flows: %w", err)
	}
	deleted := 0
	var errs []error
	err = streamFlows(t.dump, af, protocol, func(batch []kernelFlow) error {
		n, err := t.deleteMatching(batch, func(flow Flow) bool {
			return (protocol == 0 || flow.Protocol == protocol) && flowFamily(flow) == family && stale(flow)
		})
		deleted += n
		if err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("list IPv%d conntrack flows: %w", family, mapError(err)))
	}
	return deleted, errors.Join(errs...)
}

func (t *Table) deleteMatching(flows []kernelFlow, match func(Flow) bool) (int, error) {
	deleted := 0
	var errs []error
	for _, f := range flows {
		flow, ok := f.toFlow()
		if !ok || !match(flow) {
			continue
		}
		err := t.conn.Delete(ct.Flow{TupleOrig: f.orig, TupleReply: f.reply, Zone: f.zone})
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

// filterFamilies are the address families whose table a filter can match:
// the family of its addresses, or both when it names none.
func filterFamilies(filters []Filter) []int {
	var v4, v6 bool
	for _, f := range filters {
		switch a := cmp.Or(f.OrigDst, f.ReplySrc); {
		case !a.IsValid():
			v4, v6 = true, true
		case a.Is4():
			v4 = true
		default:
			v6 = true
		}
	}
	var out []int
	if v4 {
		out = append(out, 4)
	}
	if v6 {
		out = append(out, 6)
	}
	return out
}

func addressFamily(family int) (uint8, error) {
	switch family {
	case 4:
		return unix.AF_INET, nil
	case 6:
		return unix.AF_INET6, nil
	}
	return 0, fmt.Errorf("address family %d is neither 4 nor 6", family)
}

func mapError(err error) error {
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) {
		// nfnetlink has no ctnetlink subsystem: nf_conntrack_netlink is
		// not built or loaded.
		return fmt.Errorf("%w (%v)", ErrUnsupported, err)
	}
	return err
}

// filterIndex matches a flow against many filters without trying each: a
// sync that removes endpoints of many UDP Services hands over hundreds of
// filters, often the same one twice, and a table of a million flows was
// matched against every one of them.
type filterIndex struct {
	// byOrigDst holds the filters naming the address the client dialled,
	// by that address; the others are tried on every flow.
	byOrigDst map[netip.Addr][]Filter
	anyDst    []Filter
}

func newFilterIndex(filters []Filter) filterIndex {
	idx := filterIndex{byOrigDst: map[netip.Addr][]Filter{}}
	seen := make(map[Filter]bool, len(filters))
	for _, f := range filters {
		if seen[f] {
			continue
		}
		seen[f] = true
		if f.OrigDst.IsValid() {
			idx.byOrigDst[f.OrigDst] = append(idx.byOrigDst[f.OrigDst], f)
		} else {
			idx.anyDst = append(idx.anyDst, f)
		}
	}
	return idx
}

func (idx filterIndex) matches(flow Flow) bool {
	for _, f := range idx.byOrigDst[flow.OrigDst.Addr()] {
		if f.Matches(flow) {
			return true
		}
	}
	for _, f := range idx.anyDst {
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
