package ipvsproxy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
)

// A Service chooses its own IPVS scheduler and the scheduler's flags, the
// most-requested IPVS feature kube-proxy never had (kubernetes#75502,
// #118784): e.g. mh with mh-port for consistent hashing per connection.
const (
	AnnotationScheduler      = "ipvsproxy.io/scheduler"
	AnnotationSchedulerFlags = "ipvsproxy.io/scheduler-flags"
)

// scheduler is the Service's scheduler and flags: its annotations when they
// are valid and the scheduler is allowed (Config.AllowedSchedulers), else
// the configured ones with a Warning event saying why. A scheduler that is
// not allowed never reaches the kernel, which would load its module for any
// tenant who names it. An allowed scheduler the kernel lacks is found only
// when the virtual server is written; that write fails for this Service
// alone.
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
	if name != b.cfg.Scheduler && !slices.Contains(b.cfg.AllowedSchedulers, name) {
		allowed := slices.Sorted(slices.Values(append([]string{b.cfg.Scheduler}, b.cfg.AllowedSchedulers...)))
		source := "those the kernel had when ipvsproxy started on this node, and the configured one"
		scope := ScopeNode // each node's kernel had its own
		if b.cfg.AllowedSchedulersExplicit {
			source, scope = "--ipvs-allowed-schedulers and the configured one", ScopeCluster
		}
		b.st.Problems = append(b.st.Problems, Problem{Object: b.ref, Reason: ReasonSchedulerNotAllowed, Scope: scope,
			Message: fmt.Sprintf("annotation %s=%q: scheduler not allowed here; a Service may choose %s (%s); using %s",
				AnnotationScheduler, name, strings.Join(slices.Compact(allowed), ", "), source, b.cfg.Scheduler)})
		return b.cfg.Scheduler, b.cfg.SchedulerFlags
	}
	f, err := ipvs.ParseSchedulerFlags(name, flags)
	if err != nil {
		b.problem(ReasonInvalidService, "annotation %s: %s; using scheduler %s", AnnotationSchedulerFlags, truncate(err.Error(), 4*maxQuoted), b.cfg.Scheduler)
		return b.cfg.Scheduler, b.cfg.SchedulerFlags
	}
	return name, f
}
