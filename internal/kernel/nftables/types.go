package nftables

import "errors"

// Family is an nftables address family, as nft spells it.
type Family string

const (
	IPv4 Family = "ip"
	IPv6 Family = "ip6"
)

// Interface is the nftables of one network namespace.
type Interface interface {
	// DeleteTable deletes the table with everything in it (chains, sets,
	// maps, rules) in one transaction; ErrNotFound when there is none.
	DeleteTable(family Family, name string) error
}

var (
	// ErrNotFound: no such table.
	ErrNotFound = errors.New("no such table")
	// ErrUnsupported: the kernel has no nf_tables, so no table either.
	ErrUnsupported = errors.New("nftables not supported by the kernel")
)
