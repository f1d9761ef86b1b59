package ipvs

import (
	"fmt"
	"slices"
	"strings"
)

// StockSchedulers are the schedulers a stock kernel ships as ip_vs_<name>
// modules (net/netfilter/ipvs/Kconfig); the kernel loads them on demand.
var StockSchedulers = []string{
	"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "twos", "mh", "fo", "ovf",
}

// SchedulerFlags are IP_VS_SVC_F_SCHED1..3 (include/uapi/linux/ip_vs.h),
// whose meaning depends on the scheduler: for sh and mh, SCHED1 is
// "fallback" (a real server of weight 0 or overloaded is skipped instead of
// dropping the connection) and SCHED2 is "port" (the source port is hashed
// too, spreading one client's connections). kube-proxy has no way to set
// them (kubernetes#75502, #118784).
type SchedulerFlags uint32

const (
	SchedulerFlag1 SchedulerFlags = 0x0008
	SchedulerFlag2 SchedulerFlags = 0x0010
	SchedulerFlag3 SchedulerFlags = 0x0020

	schedulerFlagMask = SchedulerFlag1 | SchedulerFlag2 | SchedulerFlag3
)

// schedulerFlagNames are ipvsadm's names, by scheduler.
var schedulerFlagNames = map[string]map[string]SchedulerFlags{
	"sh": {"sh-fallback": SchedulerFlag1, "sh-port": SchedulerFlag2},
	"mh": {"mh-fallback": SchedulerFlag1, "mh-port": SchedulerFlag2},
}

// ParseSchedulerFlags reads a comma-separated list of ipvsadm's flag names
// ("mh-port,mh-fallback") for scheduler. A name of another scheduler, or
// flags for a scheduler that has none, is an error that says which apply.
func ParseSchedulerFlags(scheduler, list string) (SchedulerFlags, error) {
	var out SchedulerFlags
	names := schedulerFlagNames[scheduler]
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		f, ok := names[item]
		if !ok {
			if len(names) == 0 {
				return 0, fmt.Errorf("scheduler flag %q: scheduler %s takes no flags (only sh and mh do)", item, scheduler)
			}
			valid := make([]string, 0, len(names))
			for n := range names {
				valid = append(valid, n)
			}
			slices.Sort(valid)
			return 0, fmt.Errorf("scheduler flag %q: scheduler %s takes %s", item, scheduler, strings.Join(valid, ", "))
		}
		out |= f
	}
	return out, nil
}

// For renders the flags with scheduler's names, as ipvsadm -Ln shows them
// ("mh-fallback,mh-port"); bits without a name show as flag-N.
func (f SchedulerFlags) For(scheduler string) string {
	var out []string
	for i, bit := range []SchedulerFlags{SchedulerFlag1, SchedulerFlag2, SchedulerFlag3} {
		if f&bit == 0 {
			continue
		}
		name := fmt.Sprintf("flag-%d", i+1)
		for n, b := range schedulerFlagNames[scheduler] {
			if b == bit {
				name = n
			}
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
