package proxier

import (
	"slices"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
)

// syncStatus is what the proxier remembers between syncs for the SyncStatus;
// it is guarded by Proxier.mu.
type syncStatus struct {
	lastFull, lastPartial time.Time
	lastDuration          time.Duration
	failed                map[string]snapshot.FailedWrite // by object and error text
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
	next := make(map[string]snapshot.FailedWrite, len(errs))
	for _, e := range errs {
		key := e.object + "\x00" + e.err.Error()
		fw, ok := s.failed[key]
		if !ok {
			fw = snapshot.FailedWrite{Object: e.object, Error: e.err.Error(), Since: start}
		}
		fw.LastAttempt = start
		next[key] = fw
	}
	s.failed = next
}

// Status returns the sync status now. It waits for a sync in progress.
func (p *Proxier) Status() snapshot.SyncStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statusLocked()
}

func (p *Proxier) statusLocked() snapshot.SyncStatus {
	st := snapshot.SyncStatus{
		LastFullSync: p.status.lastFull, LastPartialSync: p.status.lastPartial,
		LastSyncDuration: p.status.lastDuration, NextSyncFull: p.needFull,
		FailedWrites: []snapshot.FailedWrite{}, Objects: []snapshot.ObjectStatus{}, DeletionsHeldSince: p.hold.since,
	}
	st.ServiceChangesQueued, st.EndpointChangesQueued, st.OldestQueued = p.tracker.Pending()
	for _, fw := range p.status.failed {
		st.FailedWrites = append(st.FailedWrites, fw)
	}
	slices.SortFunc(st.FailedWrites, func(a, b snapshot.FailedWrite) int {
		return strings.Compare(a.Object+a.Error, b.Object+b.Error)
	})
	// The reconciler's per-object status (objstatus.go): every object not
	// done, with its error and next retry.
	st.Objects = append(st.Objects, p.ReconcileStatus().Objects...)
	return st
}
