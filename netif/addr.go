package netif

import (
	"errors"
	"net/netip"
)

// canonicalAddr is the address as the kernel stores it, shared by the kernel
// implementation and Fake so both treat the same input alike: an
// IPv4-mapped IPv6 address is bound as IPv4 (vishvananda/netlink picks the
// family with net.IP.To4), and a zone means nothing for a /32 or /128.
func canonicalAddr(a netip.Addr) (netip.Addr, error) {
	if !a.IsValid() {
		return netip.Addr{}, errors.New("invalid address")
	}
	return a.Unmap().WithZone(""), nil
}
