package ipvs

import "slices"

// The order in which both implementations list real servers, and in which
// Fake.Dump and the tests put virtual servers.

func sortVirtualServers(vss []VirtualServer) {
	slices.SortFunc(vss, func(a, b VirtualServer) int { return compareKeys(a.VirtualServerKey, b.VirtualServerKey) })
}

func sortRealServers(rss []RealServer) {
	slices.SortFunc(rss, func(a, b RealServer) int { return compareRealKeys(a.RealServerKey, b.RealServerKey) })
}

// compareKeys orders by address, then port, then protocol, so that all
// protocols of one service port sit together.
func compareKeys(a, b VirtualServerKey) int {
	if c := a.Address.Compare(b.Address); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	return int(a.Protocol) - int(b.Protocol)
}

func compareRealKeys(a, b RealServerKey) int {
	if c := a.Address.Compare(b.Address); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}
