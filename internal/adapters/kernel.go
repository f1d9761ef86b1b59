package adapters

import (
	"errors"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/ipvsproxy/ipvsproxy/conntrack"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/iptables"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/listeners"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipset"
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

// ServiceRoutes lists the Service CIDR routes that are ipvsproxy's: netif
// lists only the routes it marked (netif.RouteProtocol, "proto 233", on
// kube-ipvs0 in table local), never anyone else's route to the same range.
// Without kube-ipvs0 there are none.
func (k Kernel) ServiceRoutes() ([]netip.Prefix, error) {
	routes, err := k.Netif.ServiceRoutes()
	if errors.Is(err, netif.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list service routes on %s: %w", owned.DummyInterface, err)
	}
	return routes, nil
}
