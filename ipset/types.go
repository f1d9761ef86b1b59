package ipset

import (
	"net/netip"
	"strconv"
)

// Type is an ipset type, as the kernel names it.
type Type string

// The set types the proxier uses.
const (
	HashIP        Type = "hash:ip"
	HashIPPort    Type = "hash:ip,port"
	HashIPPortIP  Type = "hash:ip,port,ip"
	HashIPPortNet Type = "hash:ip,port,net"
	HashNet       Type = "hash:net"
	// BitmapPort sets hold ports 0-65535 and have no address family.
	BitmapPort Type = "bitmap:port"
)

// Family is the address family of a hash set.
type Family string

const (
	IPv4 Family = "inet"
	IPv6 Family = "inet6"
)

// Set describes one IP set.
type Set struct {
	Name string
	Type Type
	// Family is ignored for BitmapPort sets.
	Family Family
	// Comment is descriptive only; the kernel stores it per entry, so it is
	// not read back.
	Comment string
	// MaxElem is how many entries a hash set holds at most (the kernel's
	// maxelem); 0 when creating means DefaultMaxElem. Sets and the Fake
	// report it as the kernel does: DefaultMaxElem when created with 0, and
	// 0 for bitmap:port, whose size is its port range.
	MaxElem uint32
}

// DefaultMaxElem is the kernel's maxelem of a hash set created without one.
const DefaultMaxElem = 65536

// Entry is one member. Which fields are used depends on the set type:
//
//	hash:ip          IP
//	hash:ip,port     IP, Protocol, Port
//	hash:ip,port,ip  IP, Protocol, Port, IP2
//	hash:ip,port,net IP, Protocol, Port, Net
//	hash:net         Net
//	bitmap:port      Port
type Entry struct {
	IP       netip.Addr
	Protocol string // "tcp", "udp" or "sctp"
	Port     uint16
	IP2      netip.Addr
	Net      netip.Prefix
}

// String renders the entry as the ipset tool prints it for type t, e.g.
// "10.96.0.10,tcp:80" for hash:ip,port.
func (e Entry) String(t Type) string {
	ipPort := func() string {
		return e.IP.String() + "," + e.Protocol + ":" + strconv.Itoa(int(e.Port))
	}
	switch t {
	case HashIP:
		return e.IP.String()
	case HashIPPort:
		return ipPort()
	case HashIPPortIP:
		return ipPort() + "," + e.IP2.String()
	case HashIPPortNet:
		return ipPort() + "," + e.Net.String()
	case HashNet:
		return e.Net.String()
	case BitmapPort:
		return strconv.Itoa(int(e.Port))
	}
	return "?"
}

// Interface is the IP sets of one network namespace.
type Interface interface {
	// Sets lists every set in the namespace, including ones the proxier did
	// not create (empty when none).
	Sets() ([]Set, error)
	// CreateSet creates a set; ErrExists when the name is taken.
	CreateSet(s Set) error
	// DestroySet destroys a set; ErrNotFound when missing, ErrBusy when an
	// iptables rule still references it.
	DestroySet(name string) error
	// Entries lists a set's members (empty when none), in no particular
	// order; ErrNotFound when the set is missing.
	Entries(name string) ([]Entry, error)
	// EachEntry calls fn with each of a set's members as it is read, in no
	// particular order, without a list: a full read puts 20,000 to 30,000
	// members straight into its view (listing them first allocated 3 to
	// 6 MB that the read dropped at once). After an error fn may have seen
	// some of them. fn must not call the Interface.
	EachEntry(name string, fn func(Entry)) error
	// AddEntry adds a member; ErrExists when present, ErrNotFound when the
	// set is missing, ErrInvalidEntry when it does not fit the set's type or
	// family.
	AddEntry(name string, e Entry) error
	// DeleteEntry removes a member; ErrNotFound when the set or the member is
	// missing.
	DeleteEntry(name string, e Entry) error
	// SwapSets exchanges the contents (and types) of two existing sets
	// atomically; ErrNotFound when either is missing.
	SwapSets(a, b string) error
}
