package ipvsproxy

import "github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"

// virtualServerChange is one attribute in which the kernel's virtual server
// differs from the desired one of the same key.
type virtualServerChange struct {
	// Attribute is "scheduler", "scheduler-flags" or "persistence".
	Attribute string
	// Want and Have in ipvsadm's words; "" is none.
	Want, Have string
}

// VirtualServerChanges lists how the kernel's virtual server have differs
// from want (same key): the reconciler rewrites a virtual server exactly
// when the list is not empty, and `inspect --check` reports each entry, so
// --check cannot call "agrees" what the next sync rewrites. Every field of
// ipvs.VirtualServer but the key is compared (TestVirtualServerChanges-
// CoverEveryField).
func VirtualServerChanges(have, want ipvs.VirtualServer) []virtualServerChange {
	var out []virtualServerChange
	if have.Scheduler != want.Scheduler {
		out = append(out, virtualServerChange{"scheduler", want.Scheduler, have.Scheduler})
	}
	if have.SchedulerFlags != want.SchedulerFlags {
		out = append(out, virtualServerChange{"scheduler-flags", want.SchedulerFlags.For(want.Scheduler), have.SchedulerFlags.For(have.Scheduler)})
	}
	if have.PersistenceTimeout != want.PersistenceTimeout {
		out = append(out, virtualServerChange{"persistence", want.PersistenceTimeout.String(), have.PersistenceTimeout.String()})
	}
	return out
}
