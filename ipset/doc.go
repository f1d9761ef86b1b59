// Package ipset creates, fills and destroys the kernel's IP sets through
// netlink (github.com/vishvananda/netlink); it never runs the ipset binary.
//
// It writes only what it is told: which sets belong to the proxier is decided
// by package ipvsproxy. Fake keeps sets in memory and enforces the kernel's
// rules (duplicate entries fail, entries must fit the set's type and family,
// a set referenced elsewhere cannot be destroyed when marked busy).
package ipset
