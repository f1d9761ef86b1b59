package ipvsproxy

import "github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"

// VirtualServerChange is one attribute in which the kernel's virtual server
// differs from the desired one of the same key.
type VirtualServerChange struct {
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
func VirtualServerChanges(have, want ipvs.VirtualServer) []VirtualServerChange {
	var out []VirtualServerChange
	if have.Scheduler != want.Scheduler {
		out = append(out, VirtualServerChange{"scheduler", want.Scheduler, have.Scheduler})
	}
	if have.SchedulerFlags != want.SchedulerFlags {
		out = append(out, VirtualServerChange{"scheduler-flags", want.SchedulerFlags.For(want.Scheduler), have.SchedulerFlags.For(have.Scheduler)})
	}
	if have.PersistenceTimeout != want.PersistenceTimeout {
		out = append(out, VirtualServerChange{"persistence", want.PersistenceTimeout.String(), have.PersistenceTimeout.String()})
	}
	return out
}
