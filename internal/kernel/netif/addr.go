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

// canonicalPrefix is p as the kernel stores a route's destination: masked,
// IPv4-mapped IPv6 as IPv4, no zone.
func canonicalPrefix(p netip.Prefix) (netip.Prefix, error) {
	if !p.IsValid() {
		return netip.Prefix{}, errors.New("invalid prefix")
	}
	a, bits := p.Addr(), p.Bits()
	if a.Is4In6() {
		if bits < 96 {
			return netip.Prefix{}, errors.New("IPv4-mapped prefix shorter than /96")
		}
		a, bits = a.Unmap(), bits-96
	}
	return netip.PrefixFrom(a.WithZone(""), bits).Masked(), nil
}
