package healthcheck

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// dummyInterface holds Service addresses, which are not node addresses even
// when they fall inside --nodeport-addresses.
const dummyInterface = "kube-ipvs0"

// matchingHostAddresses lists, sorted and without duplicates, the node's
// addresses that lie inside one of prefixes.
func matchingHostAddresses(prefixes []netip.Prefix, hostAddresses func() ([]netip.Addr, error)) ([]netip.Addr, error) {
	addrs, err := hostAddresses()
	if err != nil {
		return nil, fmt.Errorf("list node addresses: %w", err)
	}
	var matching []netip.Addr
	for _, addr := range addrs {
		addr = addr.Unmap()
		for _, prefix := range prefixes {
			if prefix.Contains(addr) {
				matching = append(matching, addr)
				break
			}
		}
	}
	slices.SortFunc(matching, netip.Addr.Compare)
	return slices.Compact(matching), nil
}

// interfaceAddresses lists the addresses of every interface but the dummy one.
func interfaceAddresses() ([]netip.Addr, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	for _, iface := range ifaces {
		if iface.Name == dummyInterface {
			continue
		}
		ifAddrs, err := iface.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", iface.Name, err)
		}
		for _, a := range ifAddrs {
			ipNet, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if addr, ok := netip.AddrFromSlice(ipNet.IP); ok {
				addrs = append(addrs, addr.Unmap())
			}
		}
	}
	return addrs, nil
}
