package ipset

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nldump"
)

// Entries added and deleted in batches. AddEntry and DeleteEntry send one
// message each and wait for its answer; the kernel also takes many entries
// in one IPSET_CMD_ADD or IPSET_CMD_DEL, each an IPSET_ATTR_DATA inside
// IPSET_ATTR_ADT (what `ipset restore` sends), and writes them in order,
// stopping at the first it refuses (ip_set_ad).

// EntryAdder is an IP set table that adds several entries at once (the
// kernel's); AddEntries uses it when there is one.
type EntryAdder interface {
	// AddEntries adds es to set name and returns each one's outcome in
	// order: the errors of AddEntry, except that an entry already
	// present is no error.
	AddEntries(name string, es []Entry) []error
}

// EntryDeleter is an IP set table that deletes several entries at once
// (the kernel's); DeleteEntries uses it when there is one.
type EntryDeleter interface {
	// DeleteEntries deletes es from set name and returns each one's
	// outcome in order: the errors of DeleteEntry, except that an entry
	// already absent, or whose set is missing, is no error (it is gone).
	DeleteEntries(name string, es []Entry) []error
}

// AddEntries adds es to set name on a, in batches when a is an EntryAdder,
// else one AddEntry each (the fakes, and wrappers that count or fail
// calls). An entry already present is no error. It returns each entry's
// outcome in order.
func AddEntries(a Interface, name string, es []Entry) []error {
	if b, ok := a.(EntryAdder); ok {
		return b.AddEntries(name, es)
	}
	return eachEntry(es, func(e Entry) error { return a.AddEntry(name, e) }, ErrExists)
}

// DeleteEntries deletes es from set name on a, in batches when a is an
// EntryDeleter, else one DeleteEntry each. An entry already absent, or
// whose set is missing, is no error. It returns each entry's outcome in
// order.
func DeleteEntries(a Interface, name string, es []Entry) []error {
	if b, ok := a.(EntryDeleter); ok {
		return b.DeleteEntries(name, es)
	}
	return eachEntry(es, func(e Entry) error { return a.DeleteEntry(name, e) }, ErrNotFound)
}

// eachEntry writes es one call each; done is the error that means the
// entry is already as wanted.
func eachEntry(es []Entry, write func(Entry) error, done error) []error {
	out := make([]error, len(es))
	for i, e := range es {
		if err := write(e); err != nil && !errors.Is(err, done) {
			out[i] = err
		}
	}
	return out
}

// A batch message holds entries up to entryBatchBytes of attributes (about
// 370 of the largest IPv4 ones): a refused message's acknowledgement carries
// it back, and must fit nldump's receive buffer. Up to entryBatchesPerSend
// messages go in one send, well inside the socket's default buffers.
const (
	entryBatchBytes     = 16 << 10
	entryBatchesPerSend = 4
)

// entryWrite is one kind of batched write: its command, its verb for
// errors, the one-at-a-time call its fallback makes, and the error of that
// call that means the entry is already as wanted.
type entryWrite struct {
	cmd  uint8
	verb string
	one  func(k *Kernel, name string, e Entry) error
	done error
}

var (
	adding   = entryWrite{nl.IPSET_CMD_ADD, "add", (*Kernel).AddEntry, ErrExists}
	deleting = entryWrite{nl.IPSET_CMD_DEL, "delete", (*Kernel).DeleteEntry, ErrNotFound}
)

// AddEntries checks each entry as AddEntry does, sends the valid ones in
// batch messages and, for a message the kernel refused part-way, adds its
// entries again one at a time, so that each gets its own answer (those the
// kernel had added are present, no error).
func (k *Kernel) AddEntries(name string, es []Entry) []error {
	return k.writeEntries(adding, name, es, entryBatchBytes, entryBatchesPerSend)
}

// DeleteEntries is AddEntries' counterpart: a message the kernel refused
// part-way is deleted again one entry at a time; an entry already absent,
// or whose set is missing, is no error.
func (k *Kernel) DeleteEntries(name string, es []Entry) []error {
	return k.writeEntries(deleting, name, es, entryBatchBytes, entryBatchesPerSend)
}

func (k *Kernel) writeEntries(w entryWrite, name string, es []Entry, batchBytes, perSend int) []error {
	out := make([]error, len(es))
	if len(es) == 0 {
		return out
	}
	s, err := k.lookup(name)
	if err != nil {
		if w.cmd == nl.IPSET_CMD_DEL && errors.Is(err, ErrNotFound) {
			return out // the set is gone, and its entries with it
		}
		for i := range out {
			out[i] = fmt.Errorf("%s entry in ip set %s: %w", w.verb, name, err)
		}
		return out
	}
	// The valid entries, encoded into messages; first[m] is the index in
	// valid of message m's first entry.
	var (
		valid []Entry
		at    []int
		msgs  []netlink.Message
		first []int
		adt   []byte
	)
	flush := func() {
		if len(adt) == 0 {
			return
		}
		msgs = append(msgs, k.dump.adtRequest(w.cmd, name, adt))
		adt = nil
	}
	for i, e := range es {
		e, err := checkEntry(s, e)
		if err != nil {
			out[i] = fmt.Errorf("%s: %w", w.verb, err)
			continue
		}
		data := appendEntryData(nil, s.Type, e)
		if len(adt) > 0 && len(adt)+len(data) > batchBytes {
			flush()
		}
		if len(adt) == 0 {
			first = append(first, len(valid))
		}
		adt = append(adt, data...)
		valid, at = append(valid, e), append(at, i)
	}
	flush()
	first = append(first, len(valid))

	fail := func(from int, err error) {
		for j := from; j < len(valid); j++ {
			out[at[j]] = fmt.Errorf("%s entry %s in %s set %s: %w", w.verb, valid[j].String(s.Type), s.Type, name, err)
		}
	}
	// oneByOne writes the members of messages [from, to) one at a time.
	oneByOne := func(from, to int) {
		for v := first[from]; v < first[to]; v++ {
			if err := w.one(k, name, valid[v]); err != nil && !errors.Is(err, w.done) {
				out[at[v]] = err
			}
		}
	}
	for m := 0; m < len(msgs); {
		end := min(m+perSend, len(msgs))
		outcomes, err := k.dump.exchange(msgs[m:end])
		switch {
		case errors.Is(err, unix.EMSGSIZE) && end-m > 1:
			// The send was larger than the socket's buffer (a node
			// with a small net.core.wmem_default); the kernel took
			// none of it: one message per send from here.
			perSend = 1
			continue
		case errors.Is(err, unix.EMSGSIZE), errors.Is(err, unix.ENOBUFS):
			// One message is larger than the buffer, or answers were
			// dropped: its members one at a time, each answered.
			k.refusedBatches.Add(int64(end - m))
			oneByOne(m, end)
			m = end
			continue
		case err != nil:
			// What the kernel did with these is unknown; the caller's
			// retry reads the set back.
			k.forget(name)
			fail(first[m], err)
			return out
		}
		for j, refused := range outcomes {
			if refused == nil {
				continue
			}
			k.refusedBatches.Add(1)
			// Without NLM_F_EXCL an entry already present (added) or
			// absent (deleted) is no refusal: not found is the set.
			if mapped := mapError(refused, false); errors.Is(mapped, ErrNotFound) {
				k.forget(name)
				if w.cmd == nl.IPSET_CMD_ADD {
					fail(first[m+j], mapped)
				}
				return out // deleted: the set is gone, and its entries with it
			}
			oneByOne(m+j, m+j+1)
		}
		m = end
	}
	return out
}

// addEntries and deleteEntries take the batch's size and the messages per
// send, for tests that need many batches of a few entries.
func (k *Kernel) addEntries(name string, es []Entry, batchBytes, perSend int) []error {
	return k.writeEntries(adding, name, es, batchBytes, perSend)
}

func (k *Kernel) deleteEntries(name string, es []Entry, batchBytes, perSend int) []error {
	return k.writeEntries(deleting, name, es, batchBytes, perSend)
}

// adtRequest is one IPSET_CMD_ADD or IPSET_CMD_DEL of the entries encoded
// in adt, without NLM_F_EXCL: an entry already present (added) or absent
// (deleted) is no error (ipset -exist). The kernel takes IPSET_ATTR_ADT
// only beside IPSET_ATTR_LINENO (ip_set_ad); it then answers a refusal
// with its own error message, in place of the acknowledgement, of the
// same sequence number.
func (d *dumper) adtRequest(cmd uint8, name string, adt []byte) netlink.Message {
	attrs := nldump.AppendAttribute(nil, nl.IPSET_ATTR_PROTOCOL, []byte{nl.IPSET_PROTOCOL})
	attrs = nldump.AppendAttribute(attrs, nl.IPSET_ATTR_SETNAME, append([]byte(name), 0))
	attrs = nldump.AppendAttribute(attrs, nl.IPSET_ATTR_LINENO|unix.NLA_F_NET_BYTEORDER, binary.BigEndian.AppendUint32(nil, 0))
	attrs = nldump.AppendAttribute(attrs, nl.IPSET_ATTR_ADT|unix.NLA_F_NESTED, adt)
	return netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_IPSET<<8 | int(cmd))},
		Data:   append([]byte{unix.AF_INET, unix.NFNETLINK_V0, 0, 0}, attrs...), // struct nfgenmsg
	}
}

// exchange sends reqs in one send and returns each one's answer, as
// ipsetError makes it.
func (d *dumper) exchange(reqs []netlink.Message) ([]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	outcomes, err := d.reader.Exchange(reqs)
	for i, o := range outcomes {
		outcomes[i] = ipsetError(o)
	}
	return outcomes, err
}

// appendEntryData appends e, already checked against a set of type t, as
// one IPSET_ATTR_DATA with the attributes the kernel's uadt of t reads
// (the same the netlink library sends for AddEntry, and for bitmap:port the
// port alone, request.go).
func appendEntryData(b []byte, t Type, e Entry) []byte {
	var data []byte
	ip := func(typ uint16, a []byte) {
		inner := uint16(nl.IPSET_ATTR_IPADDR_IPV4)
		if len(a) == 16 {
			inner = nl.IPSET_ATTR_IPADDR_IPV6
		}
		addr := nldump.AppendAttribute(nil, inner|unix.NLA_F_NET_BYTEORDER, a)
		data = nldump.AppendAttribute(data, typ|unix.NLA_F_NESTED, addr)
	}
	port := func() {
		data = nldump.AppendAttribute(data, nl.IPSET_ATTR_PORT|unix.NLA_F_NET_BYTEORDER, binary.BigEndian.AppendUint16(nil, e.Port))
	}
	switch t {
	case HashIP:
		ip(nl.IPSET_ATTR_IP, e.IP.AsSlice())
	case HashIPPort, HashIPPortIP, HashIPPortNet:
		ip(nl.IPSET_ATTR_IP, e.IP.AsSlice())
		data = nldump.AppendAttribute(data, nl.IPSET_ATTR_PROTO, []byte{protocolNumbers[e.Protocol]})
		port()
		switch t {
		case HashIPPortIP:
			ip(nl.IPSET_ATTR_IP2, e.IP2.AsSlice())
		case HashIPPortNet:
			ip(nl.IPSET_ATTR_IP2, e.Net.Addr().AsSlice())
			data = nldump.AppendAttribute(data, nl.IPSET_ATTR_CIDR2, []byte{uint8(e.Net.Bits())})
		}
	case HashNet:
		ip(nl.IPSET_ATTR_IP, e.Net.Addr().AsSlice())
		data = nldump.AppendAttribute(data, nl.IPSET_ATTR_CIDR, []byte{uint8(e.Net.Bits())})
	case BitmapPort:
		port()
	}
	return nldump.AppendAttribute(b, nl.IPSET_ATTR_DATA|unix.NLA_F_NESTED, data)
}
