package proxier

import (
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"
)

// syncStatus is what the proxier remembers between syncs for the SyncStatus;
// it is guarded by Proxier.mu.
type syncStatus struct {
	lastFull, lastPartial time.Time
	lastDuration          time.Duration
	lastFullRead          *snapshot.FullRead
}

// recordSync notes a finished sync.
func (s *syncStatus) recordSync(res SyncResult) {
	if res.Full {
		s.lastFull = res.Start
		read := res.RealServerReads
		s.lastFullRead = &read
	} else {
		s.lastPartial = res.Start
	}
	s.lastDuration = res.Duration
}

// Status returns the sync status now. It waits for a sync in progress.
func (p *Proxier) Status() snapshot.SyncStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statusLocked()
}

func (p *Proxier) statusLocked() snapshot.SyncStatus {
	st := snapshot.SyncStatus{
		LastFullSync: p.status.lastFull, LastPartialSync: p.status.lastPartial, LastFullRead: p.status.lastFullRead,
		LastSyncDuration: p.status.lastDuration, NextSyncFull: p.needFull,
		Objects: []snapshot.ObjectStatus{}, DeletionsHeldSince: p.hold.since,
	}
	st.ServiceChangesQueued, st.EndpointChangesQueued, st.OldestQueued = p.tracker.Pending()
	// The reconciler's per-object status (objstatus.go): every object not
	// done, with its error and next retry; the failed writes are its
	// objects in error.
	st.Objects = append(st.Objects, p.ReconcileStatus().Objects...)
	st.FailedWrites = snapshot.FailedWritesOf(st.Objects)
	return st
}
