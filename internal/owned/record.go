package owned

import (
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// The ownership record: the reconciler adds a virtual server's key to
// KUBE-IPVS-OWNED (KUBE-6-IPVS-OWNED for IPv6) before it creates the virtual
// server and removes it after the delete (ipvsproxy/ownership.go).

// Record is the member of KUBE-IPVS-OWNED (or its IPv6 twin) that
// records the virtual server k as the proxier's (inspect --check expects
// one per desired virtual server).
func Record(k ipvs.VirtualServerKey) (set string, entry ipset.Entry) {
	family := v1.IPv6Protocol
	if k.Address.Is4() {
		family = v1.IPv4Protocol
	}
	return SetName(SetOwned, family), ipset.Entry{IP: k.Address, Protocol: EntryProtocol(k.Protocol), Port: k.Port}
}

// RecordKey turns a KUBE-IPVS-OWNED member back into a virtual server key.
func RecordKey(e ipset.Entry) (ipvs.VirtualServerKey, bool) {
	var p ipvs.Protocol
	switch e.Protocol {
	case "tcp":
		p = ipvs.TCP
	case "udp":
		p = ipvs.UDP
	case "sctp":
		p = ipvs.SCTP
	default:
		return ipvs.VirtualServerKey{}, false
	}
	return ipvs.VirtualServerKey{Protocol: p, Address: e.IP.Unmap(), Port: e.Port}, true
}

// EntryProtocol is a protocol as the owned sets' members carry it
// ("tcp", "udp", "sctp"). The three are constants: a full sync asks once
// per virtual server, and lowering the name allocated each time.
func EntryProtocol(p ipvs.Protocol) string {
	switch p {
	case ipvs.TCP:
		return "tcp"
	case ipvs.UDP:
		return "udp"
	case ipvs.SCTP:
		return "sctp"
	}
	return strings.ToLower(p.String())
}
