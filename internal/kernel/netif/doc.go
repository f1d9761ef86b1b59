// Package netif owns the dummy interface (kube-ipvs0) whose addresses, and
// whose `local` routes of whole Service CIDRs, make the kernel accept packets
// for service IPs, and reads the node's own addresses (for NodePort virtual
// servers).
//
// It never changes any interface but the dummy one it is given the name of,
// and never lists or deletes a route it did not add (RouteProtocol marks
// its own).
// The real implementation uses github.com/vishvananda/netlink; Fake keeps the
// same state in memory.
package netif
