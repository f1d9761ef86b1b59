package iptables

// Family selects iptables (IPv4) or ip6tables (IPv6).
type Family int

const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// Table is an iptables table name.
type Table string

const (
	TableNAT    Table = "nat"
	TableFilter Table = "filter"
	TableMangle Table = "mangle"
)

// Position says where EnsureRule puts a rule that is not there yet.
type Position string

const (
	// Append adds the rule at the end of the chain (iptables -A).
	Append Position = "-A"
	// Prepend inserts it first (iptables -I CHAIN 1), before whatever a host
	// firewall put there earlier: kube-proxy prepends its jumps the same way.
	Prepend Position = "-I"
)

// Interface is one family's iptables.
type Interface interface {
	// Restore applies data (iptables-restore format, may hold several
	// tables) with --noflush: chains declared with ":NAME - [0:0]" are
	// created or flushed, all other chains are left as they are. Each table
	// block is atomic: iptables-restore (legacy and nft alike) commits a
	// block at its COMMIT line, so on error the failing block and all later
	// ones changed nothing, but blocks committed before it stay applied.
	// Callers that need all-or-nothing pass one table per call.
	Restore(data []byte) error
	// Save returns the table as iptables-save prints it (without counters
	// or comments starting with '#').
	Save(table Table) ([]byte, error)
	// SaveTables returns each of tables as Save does, read with one
	// iptables-save of every table: one process instead of one per table
	// (on a node each process costs more than the read). A table
	// the kernel has not set up yet is returned as Save prints it: its
	// built-in chains, empty, policy ACCEPT.
	SaveTables(tables ...Table) (map[Table][]byte, error)
	// EnsureRule adds rule (the arguments after "-A CHAIN") to chain at
	// position unless an identical rule exists anywhere in it (an existing
	// one is not moved); it reports whether it existed.
	EnsureRule(position Position, table Table, chain string, rule ...string) (existed bool, err error)
	// DeleteRule deletes one rule identical to rule from chain; deleting a
	// rule that is not there is not an error.
	DeleteRule(table Table, chain string, rule ...string) error
	// Family is the family this instance manages.
	Family() Family
}
