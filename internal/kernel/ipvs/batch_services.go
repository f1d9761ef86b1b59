package ipvs

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/nldump"
)

// Virtual servers created in batches, as real servers are (batch.go): a
// cold sync of 10,000 Services creates 12,500 of them, each a message and
// a wait for its answer through moby/ipvs (0.34-0.54 ms each on the VM's
// emulated CPU, a fifth of the cold sync).

// IPVS_CMD_NEW_SERVICE and the service attributes only a full entry has
// (linux/ip_vs.h); dump.go has the others.
const (
	ipvsCmdNewService  = 1
	ipvsSvcAttrNetmask = 9
)

// VirtualServerAdder is an IPVS table that creates several virtual servers
// at once (the kernel's); AddVirtualServers uses it when there is one.
type VirtualServerAdder interface {
	// AddVirtualServers creates vss in order and returns each one's
	// outcome, the errors those of AddVirtualServer.
	AddVirtualServers(vss []VirtualServer) []error
}

// AddVirtualServers creates vss on a, in batches when a is a
// VirtualServerAdder, else one AddVirtualServer each (the fakes, and
// wrappers that count or fail calls). It returns each one's outcome in
// order.
func AddVirtualServers(a Interface, vss []VirtualServer) []error {
	if b, ok := a.(VirtualServerAdder); ok {
		return b.AddVirtualServers(vss)
	}
	out := make([]error, len(vss))
	for i, vs := range vss {
		out[i] = a.AddVirtualServer(vs)
	}
	return out
}

var _ VirtualServerAdder = (*kernel)(nil)

// AddVirtualServers checks each as AddVirtualServer does and sends the
// valid ones in batches (writeBatch), each answer mapped as
// AddVirtualServer maps it.
func (k *kernel) AddVirtualServers(vss []VirtualServer) []error {
	out := make([]error, len(vss))
	valid := make([]VirtualServer, 0, len(vss))
	at := make([]int, 0, len(vss))
	for i, vs := range vss {
		vs, err := checkVirtualServer(vs)
		if err != nil {
			out[i] = fmt.Errorf("add virtual server %s: %w", vs.VirtualServerKey, err)
			continue
		}
		valid, at = append(valid, vs), append(at, i)
	}
	return writeBatch(k, out, valid, at,
		func(vs VirtualServer) netlink.Message {
			return k.dump.request(ipvsCmdNewService, newServiceAttributes(vs))
		},
		func(vs VirtualServer) string { return "add virtual server " + vs.VirtualServerKey.String() },
		serviceError)
}

// newServiceAttributes is IPVS_CMD_ATTR_SERVICE as a full entry, the fields
// moby/ipvs sends for AddVirtualServer (toService, its fillService): the key, the scheduler
// (NUL-terminated), the flags with an all-ones mask, the persistence
// timeout and the netmask (a host mask; for IPv6 the prefix length, 128),
// which the kernel reads as the bytes of a native u32. vs is canonical.
func newServiceAttributes(vs VirtualServer) []byte {
	s := toService(vs)
	flags := binary.NativeEndian.AppendUint32(nil, s.Flags)
	flags = binary.NativeEndian.AppendUint32(flags, ^uint32(0))
	var inner []byte
	inner = nldump.AppendAttribute(inner, ipvsSvcAttrAF, binary.NativeEndian.AppendUint16(nil, s.AddressFamily))
	inner = nldump.AppendAttribute(inner, ipvsSvcAttrProtocol, binary.NativeEndian.AppendUint16(nil, s.Protocol))
	inner = nldump.AppendAttribute(inner, ipvsSvcAttrAddr, vs.Address.AsSlice())
	inner = nldump.AppendAttribute(inner, ipvsSvcAttrPort, binary.BigEndian.AppendUint16(nil, s.Port))
	inner = nldump.AppendAttribute(inner, ipvsSvcAttrSchedName, append([]byte(s.SchedName), 0))
	inner = nldump.AppendAttribute(inner, ipvsSvcAttrFlags, flags)
	inner = nldump.AppendAttribute(inner, ipvsSvcAttrTimeout, binary.NativeEndian.AppendUint32(nil, s.Timeout))
	inner = nldump.AppendAttribute(inner, ipvsSvcAttrNetmask, binary.NativeEndian.AppendUint32(nil, s.Netmask))
	return nldump.AppendAttribute(nil, ipvsCmdAttrService|unix.NLA_F_NESTED, inner)
}
