package proxier

import (
	"slices"
	"strings"
	"time"
)

// SyncStatus is a read-only account of how the proxier's syncs went, as
// `ipvsproxy inspect` shows it: when the last full and partial syncs ran,
// what is queued, which kernel writes fail and since when. Objects is the
// reconciler's per-object status (objstatus.go): every object pending or
// in error, with its error and next retry; a done object is not listed.
type SyncStatus struct {
	LastFullSync    time.Time `json:"lastFullSync,omitzero"`
	LastPartialSync time.Time `json:"lastPartialSync,omitzero"`
	// LastSyncDuration is how long the last sync took.
	LastSyncDuration time.Duration `json:"lastSyncDuration"`
	// NextSyncFull is true when the next sync re-reads the kernel (a write
	// failed, or the proxier has not synced yet).
	NextSyncFull bool `json:"nextSyncFull"`
	// Queued changes not yet synced, and when the oldest arrived.
	ServiceChangesQueued  int       `json:"serviceChangesQueued"`
	EndpointChangesQueued int       `json:"endpointChangesQueued"`
	OldestQueued          time.Time `json:"oldestQueued,omitzero"`
	// FailedWrites are the kernel writes that failed in the last sync,
	// each with the first sync in a row it failed in.
	FailedWrites []FailedWrite  `json:"failedWrites"`
	Objects      []ObjectStatus `json:"objects"`
	// DeletionsHeldSince is set while the Service default/kubernetes is
	// absent and nothing is deleted (emptyworld.go); the objects waiting
	// are pending in Objects.
	DeletionsHeldSince time.Time `json:"deletionsHeldSince,omitzero"`
}

// FailedWrite is one kernel write that keeps failing.
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

// syncStatus is what the proxier remembers between syncs for SyncStatus;
// it is guarded by Proxier.mu.
type syncStatus struct {
	lastFull, lastPartial time.Time
	lastDuration          time.Duration
	failed                map[string]FailedWrite // by object and error text
}

// recordSync notes a finished sync.
func (s *syncStatus) recordSync(res SyncResult) {
	if res.Full {
		s.lastFull = res.Start
	} else {
		s.lastPartial = res.Start
	}
	s.lastDuration = res.Duration
}

// recordWrites replaces the failed writes with those of the sync that
// started at start, keeping Since for a write that failed last time too.
func (s *syncStatus) recordWrites(errs []writeError, start time.Time) {
	next := make(map[string]FailedWrite, len(errs))
	for _, e := range errs {
		key := e.object + "\x00" + e.err.Error()
		fw, ok := s.failed[key]
		if !ok {
			fw = FailedWrite{Object: e.object, Error: e.err.Error(), Since: start}
		}
		fw.LastAttempt = start
		next[key] = fw
	}
	s.failed = next
}

// Status returns the sync status now. It waits for a sync in progress.
func (p *Proxier) Status() SyncStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statusLocked()
}

func (p *Proxier) statusLocked() SyncStatus {
	st := SyncStatus{
		LastFullSync: p.status.lastFull, LastPartialSync: p.status.lastPartial,
		LastSyncDuration: p.status.lastDuration, NextSyncFull: p.needFull,
		FailedWrites: []FailedWrite{}, Objects: []ObjectStatus{}, DeletionsHeldSince: p.hold.since,
	}
	st.ServiceChangesQueued, st.EndpointChangesQueued, st.OldestQueued = p.tracker.Pending()
	for _, fw := range p.status.failed {
		st.FailedWrites = append(st.FailedWrites, fw)
	}
	slices.SortFunc(st.FailedWrites, func(a, b FailedWrite) int {
		return strings.Compare(a.Object+a.Error, b.Object+b.Error)
	})
	// The reconciler's per-object status (objstatus.go): every object not
	// done, with its error and next retry.
	st.Objects = append(st.Objects, p.ReconcileStatus().Objects...)
	return st
}
