package ipset

import (
	"encoding/binary"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nldump"
)

// One entry of hash:ip,port,ip as the kernel lists it.
func listedEntry() []byte {
	addr := func(typ uint16, a []byte) []byte {
		return nldump.AppendAttribute(nil, typ|unix.NLA_F_NESTED,
			nldump.AppendAttribute(nil, nl.IPSET_ATTR_IPADDR_IPV6|unix.NLA_F_NET_BYTEORDER, a))
	}
	var b []byte
	b = append(b, addr(nl.IPSET_ATTR_IP, mustAddr("2001:db8::5").AsSlice())...)
	b = nldump.AppendAttribute(b, nl.IPSET_ATTR_PORT|unix.NLA_F_NET_BYTEORDER, binary.BigEndian.AppendUint16(nil, 8080))
	b = nldump.AppendAttribute(b, nl.IPSET_ATTR_PROTO, []byte{6})
	b = append(b, addr(nl.IPSET_ATTR_IP2, mustAddr("2001:db8::6").AsSlice())...)
	return b
}

func TestParseListedEntry(t *testing.T) {
	e, err := parseEntry(HashIPPortIP, listedEntry())
	if err != nil {
		t.Fatal(err)
	}
	want := Entry{IP: mustAddr("2001:db8::5"), Protocol: "tcp", Port: 8080, IP2: mustAddr("2001:db8::6")}
	if e != want {
		t.Errorf("parsed %+v, want %+v", e, want)
	}
	bad := listedEntry()
	binary.NativeEndian.PutUint16(bad[4:], 3) // the inner address attribute shorter than its header
	if _, err := parseEntry(HashIPPortIP, bad); err == nil {
		t.Errorf("an entry with a malformed address parsed without an error")
	}
}

// A full read lists every entry of every set the proxier owns (at 10,000
// Services, tens of thousands): parsing one allocates nothing.
func TestParsingAListedEntryAllocatesNothing(t *testing.T) {
	b := listedEntry()
	if n := testing.AllocsPerRun(100, func() { parseEntry(HashIPPortIP, b) }); n != 0 {
		t.Errorf("parsing an entry allocates %v times, want 0", n)
	}
}
