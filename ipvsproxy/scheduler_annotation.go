package ipvsproxy

import (
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/ipvs"
)

// A Service chooses its own IPVS scheduler and the scheduler's flags, the
// most-requested IPVS feature kube-proxy never had (kubernetes#75502,
// #118784): e.g. mh with mh-port for consistent hashing per connection.
const (
	AnnotationScheduler      = "ipvsproxy.io/scheduler"
	AnnotationSchedulerFlags = "ipvsproxy.io/scheduler-flags"
)

// scheduler is the Service's scheduler and flags: its annotations when they
// are valid, else the configured ones with a Warning event saying why. A
// scheduler the kernel lacks is found only when the virtual server is
// written (the kernel loads modules on demand); that write fails for this
// Service alone.
func (b *builder) scheduler() (string, ipvs.SchedulerFlags) {
	name, hasName := b.svc.Annotations[AnnotationScheduler]
	flags, hasFlags := b.svc.Annotations[AnnotationSchedulerFlags]
	if !hasName && !hasFlags {
		return b.cfg.Scheduler, b.cfg.SchedulerFlags
	}
	name = strings.TrimSpace(name)
	if !hasName || name == "" {
		name = b.cfg.Scheduler
	}
	if !slices.Contains(ipvs.StockSchedulers, name) {
		b.problem(ReasonInvalidService, "annotation %s=%s is not an IPVS scheduler (%s); using %s", AnnotationScheduler, quoted(name), strings.Join(ipvs.StockSchedulers, ", "), b.cfg.Scheduler)
		return b.cfg.Scheduler, b.cfg.SchedulerFlags
	}
	f, err := ipvs.ParseSchedulerFlags(name, flags)
	if err != nil {
		b.problem(ReasonInvalidService, "annotation %s: %s; using scheduler %s", AnnotationSchedulerFlags, truncate(err.Error(), 4*maxQuoted), b.cfg.Scheduler)
		return b.cfg.Scheduler, b.cfg.SchedulerFlags
	}
	return name, f
}
