package conntrack

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nldump"
)

// This file streams the conntrack table through internal/kernel/nldump: one dump
// request, then one receive buffer at a time, each flow handed to the
// caller and dropped. ti-mo/conntrack's Dump (like mdlayher/netlink's
// Receive under it) gathers the whole multi-part answer before returning,
// about 470 MiB per million flows; here memory is one buffer and one batch,
// whatever the size of the table.

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
	reader, err := nldump.NewReader(conn)
	if err != nil {
		return err
	}
	flows := make([]kernelFlow, 0, 256)
	return reader.Dump(req, func(payload []byte) error {
		if len(payload) < 4 {
			return nil
		}
		f, err := parseFlow(payload[4:]) // after struct nfgenmsg
		if err != nil {
			return fmt.Errorf("parse dumped flow: %w", err)
		}
		flows = append(flows, f)
		return nil
	}, func() error {
		if len(flows) == 0 {
			return nil
		}
		err := batch(flows)
		flows = flows[:0]
		return err
	})
}

func parseFlow(b []byte) (kernelFlow, error) {
	f := kernelFlow{tcpState: -1}
	err := nldump.Attributes(b, func(typ uint16, payload []byte) error {
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
			return nldump.Attributes(payload, func(typ uint16, payload []byte) error {
				if typ != ctaProtoInfoTCP {
					return nil
				}
				return nldump.Attributes(payload, func(typ uint16, payload []byte) error {
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
	return nldump.Attributes(b, func(typ uint16, payload []byte) error {
		switch typ {
		case ctaTupleIP:
			return nldump.Attributes(payload, func(typ uint16, payload []byte) error {
				switch typ {
				case ctaIPv4Src, ctaIPv6Src:
					t.IP.SourceAddress = addrOf(payload)
				case ctaIPv4Dst, ctaIPv6Dst:
					t.IP.DestinationAddress = addrOf(payload)
				}
				return nil
			})
		case ctaTupleProto:
			return nldump.Attributes(payload, func(typ uint16, payload []byte) error {
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
