package ipvs

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nldump"
)

// IPVS commands and real-server attributes the batched writes send
// (linux/ip_vs.h); dump.go has the rest.
const (
	ipvsCmdNewDest = 5
	ipvsCmdSetDest = 6
	ipvsCmdDelDest = 7

	ipvsDestAttrFwdMethod = 3
	ipvsDestAttrUThresh   = 5
	ipvsDestAttrLThresh   = 6

	ipvsConnFMasq = 0 // IP_VS_CONN_F_MASQ
)

// Real-server writes in batches. moby/ipvs sends one message and waits for
// its answer per call; the kernel also takes several generic netlink
// messages in one send, runs them one after the other and acknowledges each
// (netlink_rcv_skb), a failed one not stopping the rest. Under the VM's
// emulated CPU a real-server write ten per send cost 54 us against 105 us a
// call through moby/ipvs (BenchmarkKernelRealServerWrites, docs/performance.md).

// RealServerWriter is an IPVS table that writes several real servers at
// once (the kernel's); WriteRealServers uses it when there is one.
type RealServerWriter interface {
	// WriteRealServers runs ws in order and returns each one's outcome,
	// the errors those of AddRealServer, UpdateRealServer and
	// DeleteRealServer.
	WriteRealServers(ws []RealServerWrite) []error
}

// WriteRealServers runs ws on a, in batches when a is a RealServerWriter,
// else one call each (the fakes, and wrappers that count or fail calls).
// It returns each write's outcome in order.
func WriteRealServers(a Interface, ws []RealServerWrite) []error {
	if w, ok := a.(RealServerWriter); ok {
		return w.WriteRealServers(ws)
	}
	out := make([]error, len(ws))
	for i, w := range ws {
		switch w.Op {
		case AddReal:
			out[i] = a.AddRealServer(w.VirtualServer, w.RealServer)
		case UpdateReal:
			out[i] = a.UpdateRealServer(w.VirtualServer, w.RealServer)
		case DeleteReal:
			out[i] = a.DeleteRealServer(w.VirtualServer, w.RealServer.RealServerKey)
		default:
			out[i] = fmt.Errorf("%v: %w", w, errUnknownOp)
		}
	}
	return out
}

var errUnknownOp = errors.New("unknown real server operation")

// RealServerOp says what a RealServerWrite does.
type RealServerOp uint8

const (
	AddReal RealServerOp = iota + 1
	UpdateReal
	DeleteReal
)

// RealServerWrite is one real-server command of WriteRealServers: add,
// update (the weight) or delete (the key only) RealServer of VirtualServer.
type RealServerWrite struct {
	Op            RealServerOp
	VirtualServer VirtualServerKey
	RealServer    RealServer
}

func (w RealServerWrite) String() string {
	switch w.Op {
	case AddReal:
		return fmt.Sprintf("add real server %s to %s", w.RealServer.RealServerKey, w.VirtualServer)
	case UpdateReal:
		return fmt.Sprintf("update real server %s of %s", w.RealServer.RealServerKey, w.VirtualServer)
	case DeleteReal:
		return fmt.Sprintf("delete real server %s of %s", w.RealServer.RealServerKey, w.VirtualServer)
	}
	return fmt.Sprintf("operation %d on real server %s of %s", w.Op, w.RealServer.RealServerKey, w.VirtualServer)
}

// realServerRequest is w as one generic netlink message: the service by its
// key, the destination in full (a delete's full entry is what the kernel
// parses too, ip_vs_genl_parse_dest).
func (d *dumper) realServerRequest(w RealServerWrite) netlink.Message {
	cmd := map[RealServerOp]uint8{AddReal: ipvsCmdNewDest, UpdateReal: ipvsCmdSetDest, DeleteReal: ipvsCmdDelDest}[w.Op]
	rs := w.RealServer
	af := uint16(unix.AF_INET)
	if rs.Address.Is6() {
		af = unix.AF_INET6
	}
	var dest []byte
	dest = nldump.AppendAttribute(dest, ipvsDestAttrAddr, rs.Address.AsSlice())
	dest = nldump.AppendAttribute(dest, ipvsDestAttrPort, binary.BigEndian.AppendUint16(nil, rs.Port))
	dest = nldump.AppendAttribute(dest, ipvsDestAttrFwdMethod, binary.NativeEndian.AppendUint32(nil, ipvsConnFMasq))
	dest = nldump.AppendAttribute(dest, ipvsDestAttrWeight, binary.NativeEndian.AppendUint32(nil, uint32(rs.Weight)))
	dest = nldump.AppendAttribute(dest, ipvsDestAttrUThresh, binary.NativeEndian.AppendUint32(nil, 0))
	dest = nldump.AppendAttribute(dest, ipvsDestAttrLThresh, binary.NativeEndian.AppendUint32(nil, 0))
	dest = nldump.AppendAttribute(dest, ipvsDestAttrAddrFamily, binary.NativeEndian.AppendUint16(nil, af))
	attrs := serviceKeyAttributes(w.VirtualServer)
	attrs = nldump.AppendAttribute(attrs, ipvsCmdAttrDest|unix.NLA_F_NESTED, dest)
	return d.request(cmd, attrs)
}

// WriteRealServers checks each write as the single calls do and sends the
// valid ones in batches (writeBatch), each answer mapped as the single
// calls map it.
func (k *kernel) WriteRealServers(ws []RealServerWrite) []error {
	out := make([]error, len(ws))
	valid := make([]RealServerWrite, 0, len(ws))
	at := make([]int, 0, len(ws))
	for i, w := range ws {
		var err error
		switch w.Op {
		case AddReal, UpdateReal:
			w.VirtualServer, w.RealServer, err = checkRealServer(w.VirtualServer, w.RealServer)
		case DeleteReal:
			w.VirtualServer, w.RealServer.RealServerKey, err = checkRealServerKey(w.VirtualServer, w.RealServer.RealServerKey)
		default:
			err = errUnknownOp
		}
		if err != nil {
			out[i] = fmt.Errorf("%v: %w", w, err)
			continue
		}
		valid, at = append(valid, w), append(at, i)
	}
	return writeBatch(k, out, valid, at, k.dump.realServerRequest, RealServerWrite.String, destinationError)
}

// writeBatch sends one request per valid item (at their places in out)
// under the adapter's lock, nldump.MaxExchange per send, and maps each
// answer into out with mapErr, named by the item's name. A send
// larger than the socket's buffer (a node with a small
// net.core.wmem_default), or answers dropped, sends the rest one per send,
// each answered (a write already done answers as done: "exists"). A send
// or receive that fails otherwise fails every item not yet answered: what
// the kernel did with them is unknown, and the caller's retry finds out.
func writeBatch[T any](k *kernel, out []error, valid []T, at []int, request func(T) netlink.Message, name func(T) string, mapErr func(error) error) []error {
	if len(valid) == 0 {
		return out
	}
	if _, err := k.lock(); err != nil {
		for _, i := range at {
			out[i] = err
		}
		return out
	}
	defer k.mu.Unlock()
	send := func(items []T, perSend int) ([]error, error) {
		return k.dump.exchangeAll(len(items), perSend, func(i int) netlink.Message { return request(items[i]) })
	}
	outcomes, err := send(valid, nldump.MaxExchange)
	if errors.Is(err, unix.EMSGSIZE) || errors.Is(err, unix.ENOBUFS) {
		var rest []error
		rest, err = send(valid[len(outcomes):], 1)
		outcomes = append(outcomes, rest...)
	}
	for j, i := range at {
		switch {
		case j < len(outcomes) && outcomes[j] != nil:
			out[i] = fmt.Errorf("%s: %w", name(valid[j]), mapErr(outcomes[j]))
		case j >= len(outcomes):
			out[i] = fmt.Errorf("%s: %w", name(valid[j]), err)
		}
	}
	return out
}

// exchangeAll sends n requests (request(i) the i-th), perSend (at most
// nldump.MaxExchange) per send, and returns the outcome of each one
// answered, in order: all of them, or those before the send that failed,
// with its error.
func (d *dumper) exchangeAll(n, perSend int, request func(i int) netlink.Message) ([]error, error) {
	perSend = min(max(perSend, 1), nldump.MaxExchange)
	out := make([]error, 0, n)
	reqs := make([]netlink.Message, 0, perSend)
	for start := 0; start < n; start += perSend {
		reqs = reqs[:0]
		for i := start; i < min(start+perSend, n); i++ {
			reqs = append(reqs, request(i))
		}
		outcomes, err := d.reader.Exchange(reqs)
		if err != nil {
			return out, err
		}
		out = append(out, outcomes...)
	}
	return out, nil
}

// writeRealServers sends ws, perSend per send (exchangeAll).
func (d *dumper) writeRealServers(ws []RealServerWrite, perSend int) ([]error, error) {
	return d.exchangeAll(len(ws), perSend, func(i int) netlink.Message { return d.realServerRequest(ws[i]) })
}
