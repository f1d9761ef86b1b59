package ipset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nldump"
)

// The reads of the sets stream through internal/kernel/nldump and parse each entry
// straight into an Entry. vishvananda/netlink (still used for the writes)
// lists every set with every entry to name the sets, and parses an entry
// into a struct of pointers and byte slices: at 10,000 Services a full read
// made about 10 MB of them, twice over.

// A flag of IPSET_ATTR_FLAGS at command level (enum ipset_cmd_flags).
const listHeadersOnly = 1 << 2 // IPSET_FLAG_LIST_HEADER

// dumper lists sets over its own netfilter netlink socket, one dump at a
// time.
type dumper struct {
	mu     sync.Mutex
	conn   *netlink.Conn
	reader *nldump.Reader
}

// dialDumper opens the socket in the namespace whose file descriptor is
// nsFD (0: the current one).
func dialDumper(nsFD int) (*dumper, error) {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: nsFD})
	if err != nil {
		return nil, err
	}
	reader, err := nldump.NewReader(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &dumper{conn: conn, reader: reader}, nil
}

func (d *dumper) close() { d.conn.Close() }

// list dumps one set (name not empty) or every set. With headersOnly the
// kernel sends each set's header without its entries. header is called
// once per set, entry once per entry; the type of a set's entries is its
// header's.
func (d *dumper) list(name string, headersOnly bool, header func(Set), entry func(Entry)) error {
	attrs := nldump.AppendAttribute(nil, nl.IPSET_ATTR_PROTOCOL, []byte{nl.IPSET_PROTOCOL})
	if name != "" {
		attrs = nldump.AppendAttribute(attrs, nl.IPSET_ATTR_SETNAME, append([]byte(name), 0))
	}
	if headersOnly {
		attrs = nldump.AppendAttribute(attrs, nl.IPSET_ATTR_FLAGS|unix.NLA_F_NET_BYTEORDER, binary.BigEndian.AppendUint32(nil, listHeadersOnly))
	}
	req := netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_IPSET<<8 | nl.IPSET_CMD_LIST)},
		Data:   append([]byte{unix.AF_INET, unix.NFNETLINK_V0, 0, 0}, attrs...), // struct nfgenmsg
	}
	// A set larger than one message continues in the next without its
	// header: only its name says whose entries they are.
	var current Set
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.reader.Dump(req, func(payload []byte) error {
		if len(payload) < 4 {
			return errors.New("short ipset answer")
		}
		return parseListAnswer(payload[4:], &current, header, entry)
	}, nil)
	return ipsetError(err)
}

// parseListAnswer reads one message of a list dump. current is the set the
// entries belong to, carried over from the message with its header.
func parseListAnswer(b []byte, current *Set, header func(Set), entry func(Entry)) error {
	var name []byte
	var typeName []byte
	var family uint8
	var data, adt []byte
	hasHeader := false
	err := nldump.Attributes(b, func(typ uint16, v []byte) error {
		switch typ {
		case nl.IPSET_ATTR_SETNAME:
			name = cString(v)
		case nl.IPSET_ATTR_TYPENAME:
			typeName, hasHeader = cString(v), true
		case nl.IPSET_ATTR_FAMILY:
			if len(v) >= 1 {
				family = v[0]
			}
		case nl.IPSET_ATTR_DATA:
			data = v
		case nl.IPSET_ATTR_ADT:
			adt = v
		}
		return nil
	})
	if err != nil {
		return err
	}
	if hasHeader {
		s := Set{Name: string(name), Type: Type(typeName)}
		switch family {
		case unix.AF_INET:
			s.Family = IPv4
		case unix.AF_INET6:
			s.Family = IPv6
		}
		err := nldump.Attributes(data, func(typ uint16, v []byte) error {
			if typ == nl.IPSET_ATTR_MAXELEM && len(v) >= 4 {
				s.MaxElem = binary.BigEndian.Uint32(v)
			}
			return nil
		})
		if err != nil {
			return err
		}
		*current = s
		if header != nil {
			header(s)
		}
	} else if string(name) != current.Name {
		return fmt.Errorf("entries of ip set %q before its header", name)
	}
	if adt == nil || entry == nil {
		return nil
	}
	return nldump.Attributes(adt, func(typ uint16, v []byte) error {
		if typ != nl.IPSET_ATTR_DATA {
			return nil
		}
		e, err := parseEntry(current.Type, v)
		if err != nil {
			return fmt.Errorf("entry of ip set %s: %w", current.Name, err)
		}
		entry(e)
		return nil
	})
}

// parseEntry reads one IPSET_ATTR_DATA of a list answer as entryFromNetlink
// reads the library's: the fields of t's entries only.
func parseEntry(t Type, b []byte) (Entry, error) {
	var e Entry
	var ip, ip2 netip.Addr
	var cidr, cidr2 uint8
	var proto uint8
	err := nldump.Attributes(b, func(typ uint16, v []byte) error {
		var err error
		switch typ {
		case nl.IPSET_ATTR_IP:
			ip, err = parseAddress(v)
		case nl.IPSET_ATTR_IP2:
			ip2, err = parseAddress(v)
		case nl.IPSET_ATTR_CIDR:
			if len(v) >= 1 {
				cidr = v[0]
			}
		case nl.IPSET_ATTR_CIDR2:
			if len(v) >= 1 {
				cidr2 = v[0]
			}
		case nl.IPSET_ATTR_PORT:
			if len(v) >= 2 {
				e.Port = binary.BigEndian.Uint16(v)
			}
		case nl.IPSET_ATTR_PROTO:
			if len(v) >= 1 {
				proto = v[0]
			}
		}
		return err
	})
	if err != nil {
		return Entry{}, err
	}
	switch t {
	case HashIP:
		e.IP = ip
	case HashIPPort, HashIPPortIP, HashIPPortNet:
		e.IP = ip
		e.Protocol = protocolName(proto)
		switch t {
		case HashIPPortIP:
			e.IP2 = ip2
		case HashIPPortNet:
			e.Net = netip.PrefixFrom(ip2, int(cidr2))
		}
	case HashNet:
		e.Net = netip.PrefixFrom(ip, int(cidr))
	}
	return e, nil
}

// parseAddress reads IPSET_ATTR_IP or IP2: a nested IPADDR_IPV4 or _IPV6.
func parseAddress(b []byte) (netip.Addr, error) {
	var a netip.Addr
	err := nldump.Attributes(b, func(typ uint16, v []byte) error {
		switch {
		case typ == nl.IPSET_ATTR_IPADDR_IPV4 && len(v) == 4:
			a = netip.AddrFrom4([4]byte(v))
		case typ == nl.IPSET_ATTR_IPADDR_IPV6 && len(v) == 16:
			a = netip.AddrFrom16([16]byte(v))
		default:
			return fmt.Errorf("address attribute %d of %d bytes", typ, len(v))
		}
		return nil
	})
	return a, err
}

// cString is v up to its terminating NUL.
func cString(v []byte) []byte {
	for i, c := range v {
		if c == 0 {
			return v[:i]
		}
	}
	return v
}
