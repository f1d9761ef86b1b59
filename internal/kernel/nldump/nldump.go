// Package nldump streams netlink dumps: one request, then one reused receive
// buffer at a time, each message handed to the caller and dropped.
//
// The libraries under the adapters (mdlayher/netlink's Execute, moby/ipvs,
// vishvananda/netlink) gather a whole multi-part answer, copy it and parse
// every attribute into its own slice before returning; at 10,000 IPVS
// services or a million conntrack flows that is tens to hundreds of MB made
// and dropped per read. Here a read costs one buffer, whatever the size of
// the table, and parsing allocates nothing per attribute.
package nldump

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// bufferSize holds one dump batch: the kernel fills at most 32 KiB per
// multi-part message (netlink_dump caps the allocation at
// SKB_WITH_OVERHEAD(32768)); twice that leaves room.
const bufferSize = 64 << 10

// receiveTimeout bounds one receive: a kernel that stops answering must not
// hang the sync. The deadline is per receive, so a long dump is fine.
const receiveTimeout = 30 * time.Second

// Reader reads dumps on one netlink connection. It is not safe for
// concurrent use; its buffer is reused by every dump.
type Reader struct {
	conn *netlink.Conn
	raw  syscall.RawConn
	buf  []byte
}

// NewReader reads dumps on conn, which stays the caller's to close.
func NewReader(conn *netlink.Conn) (*Reader, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &Reader{conn: conn, raw: raw, buf: make([]byte, bufferSize)}, nil
}

// ErrDumpInterrupted is DumpConsistent's answer when the kernel marked the
// dump's messages NLM_F_DUMP_INTR: the table changed between two of its
// buffers, and a dump that resumes by position may have skipped or
// repeated entries. What the caller gathered is not a consistent read; it
// reads again. rtnetlink's address, route and link dumps are marked so.
var ErrDumpInterrupted = errors.New("dump interrupted: the table changed while it was read")

// Dump sends req (the Request and Dump flags are added) and calls message
// with the payload of each answer, after the netlink header. payload points
// into the receive buffer: message must not keep it. endOfBuffer, when not
// nil, runs after each received buffer's messages (a point to hand over a
// batch). An error from either stops the dump, drains the rest of it and is
// returned; an error the kernel answers with is returned as its
// syscall.Errno.
func (r *Reader) Dump(req netlink.Message, message func(payload []byte) error, endOfBuffer func() error) error {
	return r.dump(req, message, endOfBuffer, false)
}

// DumpConsistent is Dump, returning ErrDumpInterrupted, once the dump has
// run to its end, when the kernel marked it interrupted.
func (r *Reader) DumpConsistent(req netlink.Message, message func(payload []byte) error, endOfBuffer func() error) error {
	return r.dump(req, message, endOfBuffer, true)
}

func (r *Reader) dump(req netlink.Message, message func(payload []byte) error, endOfBuffer func() error, consistent bool) error {
	req.Header.Flags |= netlink.Request | netlink.Dump
	sent, err := r.conn.Send(req)
	if err != nil {
		return fmt.Errorf("send dump request: %w", err)
	}
	defer r.conn.SetReadDeadline(time.Time{})
	interrupted := false
	for {
		n, err := r.receive()
		if err != nil {
			return fmt.Errorf("receive dump: %w", err)
		}
		done := false
		err = messages(r.buf[:n], func(typ, flags uint16, seq uint32, payload []byte) error {
			if seq != sent.Header.Sequence {
				return nil // left over from an abandoned dump or exchange
			}
			interrupted = interrupted || flags&unix.NLM_F_DUMP_INTR != 0
			switch typ {
			case unix.NLMSG_DONE:
				done = true
			case unix.NLMSG_ERROR:
				done = true // an error ends the dump
				if len(payload) < 4 {
					return errors.New("dump: short error message")
				}
				if errno := -int32(binary.NativeEndian.Uint32(payload)); errno != 0 {
					return syscall.Errno(errno)
				}
			default:
				return message(payload)
			}
			return nil
		})
		if err == nil && endOfBuffer != nil {
			err = endOfBuffer()
		}
		if err != nil {
			if !done {
				r.drain()
			}
			return err
		}
		if done {
			if consistent && interrupted {
				return ErrDumpInterrupted
			}
			return nil
		}
	}
}

// receive reads one datagram into the buffer. MSG_TRUNC makes the kernel
// report a datagram's real length, so one larger than the buffer is an
// error instead of a silently cut answer.
func (r *Reader) receive() (int, error) {
	if err := r.conn.SetReadDeadline(time.Now().Add(receiveTimeout)); err != nil {
		return 0, err
	}
	var n int
	var recvErr error
	if err := r.raw.Read(func(fd uintptr) bool {
		n, _, recvErr = unix.Recvfrom(int(fd), r.buf, unix.MSG_DONTWAIT|unix.MSG_TRUNC)
		return recvErr != unix.EAGAIN
	}); err != nil {
		return 0, err
	}
	if recvErr == nil && n > len(r.buf) {
		return 0, fmt.Errorf("netlink datagram of %d bytes exceeds the %d-byte buffer", n, len(r.buf))
	}
	return n, recvErr
}

// drain reads the rest of an abandoned dump (up to its end, or a receive
// failing), so the next dump starts on a quiet socket; messages of it that
// still arrive later carry its sequence number and are skipped.
func (r *Reader) drain() {
	for {
		n, err := r.receive()
		if err != nil {
			return
		}
		end := false
		Messages(r.buf[:n], func(typ uint16, _ uint32, _ []byte) error {
			end = end || typ == unix.NLMSG_DONE || typ == unix.NLMSG_ERROR
			return nil
		})
		if end {
			return
		}
	}
}

// Messages calls fn for each netlink message in b (its type, sequence
// number and payload).
func Messages(b []byte, fn func(typ uint16, seq uint32, payload []byte) error) error {
	return messages(b, func(typ, _ uint16, seq uint32, payload []byte) error { return fn(typ, seq, payload) })
}

// messages is Messages with each message's flags.
func messages(b []byte, fn func(typ, flags uint16, seq uint32, payload []byte) error) error {
	for len(b) >= unix.SizeofNlMsghdr {
		length := int(binary.NativeEndian.Uint32(b[0:4]))
		typ := binary.NativeEndian.Uint16(b[4:6])
		flags := binary.NativeEndian.Uint16(b[6:8])
		seq := binary.NativeEndian.Uint32(b[8:12])
		if length < unix.SizeofNlMsghdr || length > len(b) {
			return fmt.Errorf("netlink message of length %d in %d bytes", length, len(b))
		}
		if err := fn(typ, flags, seq, b[unix.SizeofNlMsghdr:length]); err != nil {
			return err
		}
		aligned := (length + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if aligned > len(b) {
			break
		}
		b = b[aligned:]
	}
	return nil
}

// Attributes calls fn for each netlink attribute in b (its type without
// the nested and byte-order flags, and its payload). Parsing by hand,
// without an AttributeDecoder per level, allocates nothing.
func Attributes(b []byte, fn func(typ uint16, payload []byte) error) error {
	for len(b) >= unix.SizeofNlAttr {
		length := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if length < unix.SizeofNlAttr || length > len(b) {
			return fmt.Errorf("netlink attribute of length %d in %d bytes", length, len(b))
		}
		if err := fn(typ, b[unix.SizeofNlAttr:length]); err != nil {
			return err
		}
		aligned := (length + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if aligned > len(b) {
			break
		}
		b = b[aligned:]
	}
	return nil
}

// AppendAttribute appends one netlink attribute to b, padded to its
// alignment.
func AppendAttribute(b []byte, typ uint16, payload []byte) []byte {
	length := unix.SizeofNlAttr + len(payload)
	b = binary.NativeEndian.AppendUint16(b, uint16(length))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, payload...)
	for pad := (length+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1) - length; pad > 0; pad-- {
		b = append(b, 0)
	}
	return b
}

// Exchange sends reqs in one sendmsg, each asking for an acknowledgement,
// and returns each request's outcome in order: nil, or the errno the kernel
// answered it with as a syscall.Errno. The kernel runs the messages of one
// send one after the other and acknowledges each (netlink_rcv_skb), so a
// failed request does not stop the ones after it. Each acknowledgement
// waits in the socket's receive buffer until it is read: a caller keeps a
// send to at most MaxExchange requests, whose acknowledgements fit in the
// default buffer whatever they carry back.
func (r *Reader) Exchange(reqs []netlink.Message) ([]error, error) {
	if len(reqs) > MaxExchange {
		return nil, fmt.Errorf("%d requests in one send, at most %d", len(reqs), MaxExchange)
	}
	for i := range reqs {
		reqs[i].Header.Flags |= netlink.Request | netlink.Acknowledge
		reqs[i].Header.Sequence = 0 // numbered by the connection
	}
	sent, err := r.conn.SendMessages(reqs)
	if err != nil {
		return nil, fmt.Errorf("send %d requests: %w", len(reqs), err)
	}
	first := sent[0].Header.Sequence
	outcomes := make([]error, len(reqs))
	answered := 0
	defer r.conn.SetReadDeadline(time.Time{})
	for answered < len(reqs) {
		n, err := r.receive()
		if err != nil {
			return nil, fmt.Errorf("receive acknowledgements (%d of %d): %w", answered, len(reqs), err)
		}
		err = Messages(r.buf[:n], func(typ uint16, seq uint32, payload []byte) error {
			i := int(seq - first)
			if typ != unix.NLMSG_ERROR || seq-first >= uint32(len(reqs)) {
				return nil // left over from an abandoned dump or exchange
			}
			if len(payload) < 4 {
				return errors.New("short acknowledgement")
			}
			if errno := -int32(binary.NativeEndian.Uint32(payload)); errno != 0 {
				outcomes[i] = syscall.Errno(errno)
			}
			answered++
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return outcomes, nil
}

// MaxExchange bounds one Exchange. An acknowledgement of a failed request
// carries the request back (no NETLINK_CAP_ACK): 64 of IPVS's largest,
// with each one's socket-buffer overhead, stay well inside the default
// 208 KiB receive buffer. One that did not fit would be dropped, and the
// next receive fail with ENOBUFS (netlink_overrun): the exchange fails its
// unanswered requests, whose callers retry them.
const MaxExchange = 64
