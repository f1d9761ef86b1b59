package ipset

import (
	"fmt"
	"net/netip"
)

// maxNameLen is IPSET_MAXNAMELEN (32) less the terminating NUL.
const maxNameLen = 31

// protocolNumbers are the protocols the proxier puts in ip,port sets. The
// kernel would take any protocol with ports (and icmp), but a Service port is
// only ever one of these.
var protocolNumbers = map[string]uint8{"tcp": 6, "udp": 17, "sctp": 132}

func protocolName(n uint8) string {
	for name, num := range protocolNumbers {
		if num == n {
			return name
		}
	}
	return fmt.Sprintf("proto%d", n)
}

// checkSet applies the rules the kernel applies at create time and returns the
// set as the kernel reports it back: without a family for bitmap:port and
// without a comment (see Set.Comment).
func checkSet(s Set) (Set, error) {
	if s.Name == "" || len(s.Name) > maxNameLen {
		return s, fmt.Errorf("set name %q must be 1-%d bytes", s.Name, maxNameLen)
	}
	switch s.Type {
	case BitmapPort:
		s.Family = ""
		s.MaxElem = 0
	case HashIP, HashIPPort, HashIPPortIP, HashIPPortNet, HashNet:
		if s.Family != IPv4 && s.Family != IPv6 {
			return s, fmt.Errorf("set %s: family %q is neither %s nor %s", s.Name, s.Family, IPv4, IPv6)
		}
		if s.MaxElem == 0 {
			s.MaxElem = DefaultMaxElem
		}
	default:
		return s, fmt.Errorf("set %s: type %q: %w", s.Name, s.Type, ErrUnsupported)
	}
	s.Comment = ""
	return s, nil
}

// checkEntry reports whether e fits set s, with the kernel's rules plus one of
// ours: fields the type does not use must be zero, so that a caller's mistake
// is not silently dropped. It returns e as the kernel stores it (a network
// masked to its prefix).
func checkEntry(s Set, e Entry) (Entry, error) {
	bad := func(why string) (Entry, error) {
		return e, fmt.Errorf("entry %s for %s set %s: %s: %w", e.String(s.Type), s.Type, s.Name, why, ErrInvalidEntry)
	}
	fitsFamily := func(a netip.Addr) bool {
		if s.Family == IPv4 {
			return a.Is4()
		}
		return a.Is6()
	}
	usesIP, usesPort, usesIP2, usesNet := false, false, false, false
	switch s.Type {
	case HashIP:
		usesIP = true
	case HashIPPort:
		usesIP, usesPort = true, true
	case HashIPPortIP:
		usesIP, usesPort, usesIP2 = true, true, true
	case HashIPPortNet:
		usesIP, usesPort, usesNet = true, true, true
	case HashNet:
		usesNet = true
	case BitmapPort:
		// Only the port: bitmap:port matches any protocol.
		if e.IP.IsValid() || e.IP2.IsValid() || e.Net.IsValid() || e.Protocol != "" {
			return bad("bitmap:port holds only a port")
		}
		return e, nil
	default:
		return bad("unknown set type")
	}
	if usesIP {
		if !e.IP.IsValid() || !fitsFamily(e.IP) {
			return bad("IP missing or not of family " + string(s.Family))
		}
	} else if e.IP.IsValid() {
		return bad("type has no IP")
	}
	if usesPort {
		if _, ok := protocolNumbers[e.Protocol]; !ok {
			return bad("protocol must be tcp, udp or sctp")
		}
	} else if e.Protocol != "" || e.Port != 0 {
		return bad("type has no port")
	}
	if usesIP2 {
		if !e.IP2.IsValid() || !fitsFamily(e.IP2) {
			return bad("second IP missing or not of family " + string(s.Family))
		}
	} else if e.IP2.IsValid() {
		return bad("type has no second IP")
	}
	if usesNet {
		// The kernel refuses a /0 (IPSET_ERR_INVALID_CIDR); the netlink
		// library would not even send it and the kernel would then take a
		// host prefix, so it is refused here.
		if !e.Net.IsValid() || !fitsFamily(e.Net.Addr()) || e.Net.Bits() == 0 {
			return bad("network missing, /0 or not of family " + string(s.Family))
		}
		e.Net = e.Net.Masked()
	} else if e.Net.IsValid() {
		return bad("type has no network")
	}
	return e, nil
}
