package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

type summary struct{ p50, p90, p99, max, mean float64 }

// summarize gives the nearest-rank percentiles of times, in milliseconds.
func summarize(times []time.Duration) summary {
	s := slices.Clone(times)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return round3(float64(d) / 1e6) }
	rank := func(q float64) time.Duration { return s[int(math.Ceil(q*float64(len(s))))-1] }
	var total time.Duration
	for _, t := range s {
		total += t
	}
	return summary{ms(rank(0.5)), ms(rank(0.9)), ms(rank(0.99)), ms(s[len(s)-1]), ms(total / time.Duration(len(s)))}
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func printJSON(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

// cpuTicks are the guest's CPU times from /proc/stat's first line, in clock ticks. A network
// namespace does not change /proc/stat: it is the whole guest's.
type cpuTicks struct{ user, nice, system, idle, iowait, irq, softirq, steal int64 }

// cpuUse is the guest's CPU over a run: busy is everything but idle and I/O wait; softirq and
// system are where the kernel's packet path runs.
type cpuUse struct {
	BusySeconds   float64 `json:"guest_cpu_busy_s"`
	SoftirqSecs   float64 `json:"guest_cpu_softirq_s"`
	SystemSecs    float64 `json:"guest_cpu_system_s"`
	BusyPerConnMs float64 `json:"guest_cpu_ms_per_conn"`
}

// clockTick is USER_HZ, 100 on every Linux architecture this runs on.
const clockTick = 100

func readCPU() (cpuTicks, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPU(line)
}

func parseCPU(line string) (cpuTicks, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var v [8]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return cpuTicks{}, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		v[i] = n
	}
	return cpuTicks{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}, nil
}

func (c cpuTicks) busy() int64 {
	return c.user + c.nice + c.system + c.irq + c.softirq + c.steal
}

func (c cpuTicks) since(before cpuTicks, conns int64) cpuUse {
	secs := func(t int64) float64 { return round3(float64(t) / clockTick) }
	u := cpuUse{BusySeconds: secs(c.busy() - before.busy()), SoftirqSecs: secs(c.softirq - before.softirq), SystemSecs: secs(c.system - before.system)}
	if conns > 0 {
		u.BusyPerConnMs = round3(u.BusySeconds * 1000 / float64(conns))
	}
	return u
}
