package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"
)

// This file streams the conntrack table: one dump request, then one
// receive buffer at a time, each flow handed to the caller and dropped.
// ti-mo/conntrack's Dump (like mdlayher/netlink's Receive under it) gathers
// the whole multi-part answer before returning, about 470 MiB per million
// flows; here memory is one buffer and one batch, whatever the
// size of the table.

// ctnetlink message and attribute numbers (linux/netfilter/nfnetlink.h,
// nfnetlink_conntrack.h).
const (
	nfnlSubsysCTNetlink = 1
	ctMsgGet            = 1

	ctaTupleOrig  = 1
	ctaTupleReply = 2
	ctaStatus     = 3
	ctaProtoInfo  = 4
	ctaTimeout    = 7
	ctaZone       = 18
	ctaFilter     = 25

	ctaProtoInfoTCP      = 1
	ctaProtoInfoTCPState = 1

	ctaTupleIP    = 1
	ctaTupleProto = 2

	ctaIPv4Src = 1
	ctaIPv4Dst = 2
	ctaIPv6Src = 3
	ctaIPv6Dst = 4

	ctaProtoNum     = 1
	ctaProtoSrcPort = 2
	ctaProtoDstPort = 3

	ctaFilterOrigFlags  = 1
	ctaFilterReplyFlags = 2
	// ctaFilterFlagProtoNum is CTA_FILTER_F_CTA_PROTO_NUM.
	ctaFilterFlagProtoNum = 1 << 3
)

// receiveBufferSize holds one dump batch: the kernel fills at most 32 KiB
// per multi-part message (netlink_dump); twice that leaves room.
const receiveBufferSize = 64 << 10

// kernelFlow is a dumped flow with what a delete needs.
type kernelFlow struct {
	orig, reply ct.Tuple
	zone        uint16
	// status, timeout and tcpState are what inspect shows; tcpState is
	// -1 for a flow without TCP protocol info.
	status   uint32
	timeout  uint32
	tcpState int16
}

// dumpRequest asks for every flow of family (unix.AF_INET or AF_INET6) and,
// when protocol is not 0, only that layer 4 protocol. The protocol filter
// (CTA_FILTER, Linux 5.8) is applied by the kernel; older kernels ignore the
// attribute and send everything, which streamFlows' caller checks anyway.
func dumpRequest(family uint8, protocol uint8) (netlink.Message, error) {
	data := []byte{family, unix.NFNETLINK_V0, 0, 0}
	if protocol != 0 {
		ae := netlink.NewAttributeEncoder()
		ae.Nested(ctaFilter, func(nae *netlink.AttributeEncoder) error {
			nae.Uint32(ctaFilterOrigFlags, ctaFilterFlagProtoNum)
			nae.Uint32(ctaFilterReplyFlags, 0)
			return nil
		})
		ae.Nested(ctaTupleOrig, func(nae *netlink.AttributeEncoder) error {
			nae.Nested(ctaTupleProto, func(pae *netlink.AttributeEncoder) error {
				pae.Uint8(ctaProtoNum, protocol)
				return nil
			})
			return nil
		})
		attrs, err := ae.Encode()
		if err != nil {
			return netlink.Message{}, err
		}
		data = append(data, attrs...)
	}
	return netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(nfnlSubsysCTNetlink<<8 | ctMsgGet),
			Flags: netlink.Request | netlink.Dump,
		},
		Data: data,
	}, nil
}

// streamFlows dumps the flows of family (and protocol, if not 0) on conn and
// calls batch once per received buffer. The slice is reused: batch must not
// keep it. A batch error stops the dump and is returned.
func streamFlows(conn *netlink.Conn, family, protocol uint8, batch func([]kernelFlow) error) error {
	req, err := dumpRequest(family, protocol)
	if err != nil {
		return err
	}
	sent, err := conn.Send(req)
	if err != nil {
		return fmt.Errorf("send dump request: %w", err)
	}
	// A kernel that stops answering must not hang the sync; the deadline
	// is per receive, so a long dump is fine.
	defer conn.SetReadDeadline(time.Time{})
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	buf := make([]byte, receiveBufferSize)
	flows := make([]kernelFlow, 0, 256)
	for {
		n, err := receive(conn, raw, buf)
		if err != nil {
			return fmt.Errorf("receive dump: %w", err)
		}
		flows = flows[:0]
		done := false
		err = messages(buf[:n], func(typ uint16, seq uint32, payload []byte) error {
			if seq != sent.Header.Sequence {
				return nil // left over from an abandoned dump
			}
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
				if len(payload) < 4 {
					return nil
				}
				f, err := parseFlow(payload[4:]) // after struct nfgenmsg
				if err != nil {
					return fmt.Errorf("parse dumped flow: %w", err)
				}
				flows = append(flows, f)
			}
			return nil
		})
		if err == nil && len(flows) > 0 {
			err = batch(flows)
		}
		if err != nil {
			if !done {
				drain(conn, raw, buf)
			}
			return err
		}
		if done {
			return nil
		}
	}
}

// receiveTimeout bounds one receive of a dump.
const receiveTimeout = 30 * time.Second

// receive reads one datagram of the dump into buf.
func receive(conn *netlink.Conn, raw syscall.RawConn, buf []byte) (int, error) {
	if err := conn.SetReadDeadline(time.Now().Add(receiveTimeout)); err != nil {
		return 0, err
	}
	var n int
	var recvErr error
	if err := raw.Read(func(fd uintptr) bool {
		n, _, recvErr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
		return recvErr != unix.EAGAIN
	}); err != nil {
		return 0, err
	}
	return n, recvErr
}

// drain reads the rest of an abandoned dump (up to its end, or a receive
// timing out), so the next dump starts on a quiet socket; messages of it
// that still arrive later carry its sequence number and are skipped.
func drain(conn *netlink.Conn, raw syscall.RawConn, buf []byte) {
	for {
		n, err := receive(conn, raw, buf)
		if err != nil {
			return
		}
		end := false
		messages(buf[:n], func(typ uint16, _ uint32, _ []byte) error {
			end = end || typ == unix.NLMSG_DONE || typ == unix.NLMSG_ERROR
			return nil
		})
		if end {
			return
		}
	}
}

// attributes calls fn for each netlink attribute in b (type without the
// nested and byte-order flags, and its payload). Parsing by hand, without
// an AttributeDecoder per level, keeps a clean-up at no allocation per flow.
func attributes(b []byte, fn func(typ uint16, payload []byte) error) error {
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

func parseFlow(b []byte) (kernelFlow, error) {
	f := kernelFlow{tcpState: -1}
	err := attributes(b, func(typ uint16, payload []byte) error {
		switch typ {
		case ctaTupleOrig:
			return parseTuple(payload, &f.orig)
		case ctaTupleReply:
			return parseTuple(payload, &f.reply)
		case ctaZone:
			if len(payload) >= 2 {
				f.zone = binary.BigEndian.Uint16(payload)
			}
		case ctaStatus:
			if len(payload) >= 4 {
				f.status = binary.BigEndian.Uint32(payload)
			}
		case ctaTimeout:
			if len(payload) >= 4 {
				f.timeout = binary.BigEndian.Uint32(payload)
			}
		case ctaProtoInfo:
			return attributes(payload, func(typ uint16, payload []byte) error {
				if typ != ctaProtoInfoTCP {
					return nil
				}
				return attributes(payload, func(typ uint16, payload []byte) error {
					if typ == ctaProtoInfoTCPState && len(payload) >= 1 {
						f.tcpState = int16(payload[0])
					}
					return nil
				})
			})
		}
		return nil
	})
	return f, err
}

func parseTuple(b []byte, t *ct.Tuple) error {
	return attributes(b, func(typ uint16, payload []byte) error {
		switch typ {
		case ctaTupleIP:
			return attributes(payload, func(typ uint16, payload []byte) error {
				switch typ {
				case ctaIPv4Src, ctaIPv6Src:
					t.IP.SourceAddress = addrOf(payload)
				case ctaIPv4Dst, ctaIPv6Dst:
					t.IP.DestinationAddress = addrOf(payload)
				}
				return nil
			})
		case ctaTupleProto:
			return attributes(payload, func(typ uint16, payload []byte) error {
				switch {
				case typ == ctaProtoNum && len(payload) >= 1:
					t.Proto.Protocol = payload[0]
				case typ == ctaProtoSrcPort && len(payload) >= 2:
					t.Proto.SourcePort = binary.BigEndian.Uint16(payload)
				case typ == ctaProtoDstPort && len(payload) >= 2:
					t.Proto.DestinationPort = binary.BigEndian.Uint16(payload)
				}
				return nil
			})
		}
		return nil
	})
}

// messages calls fn for each netlink message in b (its type, sequence
// number and payload).
func messages(b []byte, fn func(typ uint16, seq uint32, payload []byte) error) error {
	for len(b) >= unix.SizeofNlMsghdr {
		length := int(binary.NativeEndian.Uint32(b[0:4]))
		typ := binary.NativeEndian.Uint16(b[4:6])
		seq := binary.NativeEndian.Uint32(b[8:12])
		if length < unix.SizeofNlMsghdr || length > len(b) {
			return fmt.Errorf("netlink message of length %d in %d bytes", length, len(b))
		}
		if err := fn(typ, seq, b[unix.SizeofNlMsghdr:length]); err != nil {
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

func addrOf(b []byte) netip.Addr {
	a, _ := netip.AddrFromSlice(b)
	return a
}

// toFlow is the package's view of a dumped flow; ok is false without
// addresses (a flow of another family cannot be, but stay safe).
func (f kernelFlow) toFlow() (Flow, bool) {
	kf := ct.Flow{TupleOrig: f.orig, TupleReply: f.reply, Timeout: f.timeout, Status: ct.Status(f.status)}
	if f.tcpState >= 0 {
		kf.ProtoInfo.TCP = &ct.ProtoInfoTCP{State: uint8(f.tcpState)}
	}
	return fromKernel(kf)
}
