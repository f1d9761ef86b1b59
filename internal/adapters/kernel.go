package adapters

import (
	v1 "k8s.io/api/core/v1"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	"github.com/ipvsproxy/ipvsproxy/iptables"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/listeners"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"github.com/ipvsproxy/ipvsproxy/sysctl"
)

// Kernel bundles the adapters the proxier writes through. Tests pass the
// packages' Fakes; the daemon passes the real ones.
type Kernel struct {
	IPVS      ipvs.Interface
	Netif     netif.Interface
	IPSet     ipset.Interface
	IPTables  map[v1.IPFamily]iptables.Interface
	Conntrack conntrack.Interface
	Sysctl    sysctl.Interface
	// Listeners reads the host's listening sockets (the node guard); nil
	// reads none.
	Listeners listeners.Interface
}
