package snapshot

import (
	"fmt"
	"time"
)

// SyncStatus is a read-only account of how the proxier's syncs went, as
// `ipvsproxy inspect` shows it: when the last full and partial syncs ran,
// what is queued, which kernel writes fail and since when. Objects is the
// writer's per-object status (its status table): every object pending or
// in error, with its error and next retry; a done object is not listed.
// FailedWrites is the same table's objects in error, in the shape inspect's
// JSON had before the table (FailedWritesOf): one model, two views.
type SyncStatus struct {
	LastFullSync    time.Time `json:"lastFullSync,omitzero"`
	LastPartialSync time.Time `json:"lastPartialSync,omitzero"`
	// LastFullRead says how the last full sync read the real servers.
	LastFullRead *FullRead `json:"lastFullRead,omitempty"`
	// LastSyncDuration is how long the last sync took.
	LastSyncDuration time.Duration `json:"lastSyncDuration"`
	// NextSyncFull is true when the next sync re-reads the kernel (a write
	// failed, or the proxier has not synced yet).
	NextSyncFull bool `json:"nextSyncFull"`
	// Queued changes not yet synced, and when the oldest arrived.
	ServiceChangesQueued  int       `json:"serviceChangesQueued"`
	EndpointChangesQueued int       `json:"endpointChangesQueued"`
	OldestQueued          time.Time `json:"oldestQueued,omitzero"`
	// FailedWrites are the kernel writes failing now (Objects in error),
	// each since the first sync in a row it failed in.
	FailedWrites []FailedWrite  `json:"failedWrites"`
	Objects      []ObjectStatus `json:"objects"`
	// DeletionsHeldSince is set while the Service default/kubernetes is
	// absent and the writer deletes nothing; the objects waiting
	// are pending in Objects.
	DeletionsHeldSince time.Time `json:"deletionsHeldSince,omitzero"`
}

// FullRead is how a full sync read the real servers of the virtual servers
// it kept: FromTable from /proc/net/ip_vs in one pass, Dumped one netlink
// dump each. TableError is why the table gave none or stopped early.
type FullRead struct {
	FromTable  int    `json:"fromTable"`
	Dumped     int    `json:"dumped"`
	TableError string `json:"tableError,omitempty"`
}

// FailedWrite is one kernel write that keeps failing: an object in error,
// named by its error.
type FailedWrite struct {
	// Object is the kind of kernel object (ipvs, address, ipset, iptables,
	// conntrack, read).
	Object string `json:"object"`
	// Error names the operation and the object, as the adapters word it.
	Error string `json:"error"`
	// Since is the start of the first sync of the run of syncs in which
	// this write failed; LastAttempt the start of the latest.
	Since       time.Time `json:"since"`
	LastAttempt time.Time `json:"lastAttempt"`
}

// ObjectKind is the kind of a kernel object; the values are the "object"
// label of ipvsproxy_kernel_write_failures_total.
type ObjectKind string

const (
	ObjectVirtualServer ObjectKind = "ipvs"      // a virtual server, its real servers and its ownership record
	ObjectAddress       ObjectKind = "address"   // an address on kube-ipvs0 (and the link itself)
	ObjectRoute         ObjectKind = "route"     // a Service CIDR's local route on kube-ipvs0
	ObjectSetEntry      ObjectKind = "ipset"     // a member of an owned set, or the set itself
	ObjectRules         ObjectKind = "iptables"  // one table of one family's rules, or a jump rule
	ObjectConntrack     ObjectKind = "conntrack" // the stale UDP flows to delete
	ObjectRead          ObjectKind = "read"      // reading the kernel at a full sync
)

// SyncState is where an object stands.
type SyncState string

const (
	StatePending SyncState = "pending" // wanted, not written yet (waiting for what it needs)
	StateDone    SyncState = "done"
	StateError   SyncState = "error" // the last write failed; retried at NextRetry
)

// ObjectStatus is the writer's status of one kernel object that is not
// done, as inspect shows it (SyncStatus.Objects) and tests read it
// (ReconcileStatus): one model, copied from the status table.
type ObjectStatus struct {
	Kind ObjectKind `json:"kind"`
	// Object names it: "virtual server TCP 10.96.0.10:80", "ipset
	// KUBE-CLUSTER-IP member 10.96.0.10,tcp:80", "iptables IPv4 nat".
	Object string `json:"object"`
	// Services are the Services it is for ("namespace/name"), if any.
	Services  []string  `json:"services,omitempty"`
	State     SyncState `json:"state"`
	Since     time.Time `json:"since,omitzero"`
	LastError string    `json:"lastError,omitempty"`
	Attempts  int       `json:"attempts,omitempty"`
	// LastAttempt is the start of the sync of its last failed write (in
	// error only).
	LastAttempt time.Time `json:"lastAttempt,omitzero"`
	NextRetry   time.Time `json:"nextRetry,omitzero"`
}

// FailedWritesOf are the objects in error as failed writes, in their order.
func FailedWritesOf(objects []ObjectStatus) []FailedWrite {
	out := []FailedWrite{}
	for _, o := range objects {
		if o.State == StateError {
			out = append(out, FailedWrite{Object: string(o.Kind), Error: o.LastError, Since: o.Since, LastAttempt: o.LastAttempt})
		}
	}
	return out
}

// String is one line per object, for logs and tests.
func (o ObjectStatus) String() string {
	return fmt.Sprintf("%s %s %v: %s", o.State, o.Object, o.Services, o.LastError)
}
