// Package conntrack lists and deletes entries of the kernel's connection
// tracking table through github.com/ti-mo/conntrack (netlink, no binary).
//
// It deletes only flows that match a filter it is given; deciding which flows
// are stale is package ipvsproxy's job. Fake holds a flow table in memory.
package conntrack
