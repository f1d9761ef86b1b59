package hostsetup

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"k8s.io/klog/v2"
)

// conntrackMaxLimit is kube-proxy's cap of the scaled maximum.
const conntrackMaxLimit = 1048576

// conntrackMax is the nf_conntrack_max kube-proxy computes from s; 0 means
// "leave it".
func conntrackMax(s ipvsproxy.ConntrackSettings) int {
	if s.MaxPerCore <= 0 {
		return 0
	}
	cpus := s.CPUs
	if cpus <= 0 {
		cpus = logicalCPUs()
	}
	scaled := s.MaxPerCore * cpus
	switch {
	case scaled > conntrackMaxLimit:
		return conntrackMaxLimit
	case scaled > s.Min:
		return scaled
	default:
		return s.Min
	}
}

// conntrackSysctls are s's writes, in kube-proxy's order. A zero value is
// left to the kernel, as there.
func conntrackSysctls(s ipvsproxy.ConntrackSettings) []sysctlSetting {
	var out []sysctlSetting
	// Connection tracking is the node's, not the proxier's: every change
	// is logged with that reach.
	const reach = "every tracked connection of the node"
	seconds := func(name string, d time.Duration) {
		if d > 0 {
			out = append(out, sysctlSetting{name, strconv.Itoa(int(d / time.Second)), reach})
		}
	}
	if max := conntrackMax(s); max > 0 {
		out = append(out, sysctlSetting{"net.netfilter.nf_conntrack_max", strconv.Itoa(max), "the node's connection tracking table: how many connections it holds"})
	}
	seconds("net.netfilter.nf_conntrack_tcp_timeout_established", s.TCPEstablishedTimeout)
	seconds("net.netfilter.nf_conntrack_tcp_timeout_close_wait", s.TCPCloseWaitTimeout)
	if s.TCPBeLiberal {
		out = append(out, sysctlSetting{"net.netfilter.nf_conntrack_tcp_be_liberal", "1", reach})
	}
	seconds("net.netfilter.nf_conntrack_udp_timeout", s.UDPTimeout)
	seconds("net.netfilter.nf_conntrack_udp_timeout_stream", s.UDPStreamTimeout)
	return out
}

// applyConntrackSysctls writes the settings that differ from the kernel's.
//
// Two kernel rules shape the errors: nf_conntrack_max and
// nf_conntrack_buckets are read-only outside the initial network namespace
// (net/netfilter/nf_conntrack_standalone.c), where a node in a namespace or
// a test runs, so refusing them is a warning; and the parameters exist only
// once nf_conntrack is loaded (ip_vs depends on it), so a missing one is
// a warning too. Any other failure stops the start, as in kube-proxy.
//
// kube-proxy also grows the hash table to max/4 through
// /sys/module/nf_conntrack/parameters/hashsize; the same number is the
// sysctl nf_conntrack_buckets (writable since Linux 5.8), which is written
// here, so --sysctl-root covers it and /sys need not be writable.
func applyConntrackSysctls(sys sysctl.Interface, s ipvsproxy.ConntrackSettings) error {
	for _, w := range conntrackSysctls(s) {
		err := ensureSysctlReaching(sys, w)
		switch {
		case err == nil:
		case errors.Is(err, sysctl.ErrNotFound):
			klog.InfoS("Warning: no such conntrack parameter (nf_conntrack not loaded); left as is", "sysctl", w.name)
			continue
		case w.name == "net.netfilter.nf_conntrack_max" && readOnly(err):
			klog.InfoS("Warning: nf_conntrack_max is read-only here (not the host's network namespace); left as is", "want", w.value, "err", err)
			continue
		default:
			return fmt.Errorf("apply conntrack settings: %w", err)
		}
		if w.name == "net.netfilter.nf_conntrack_max" {
			growConntrackBuckets(sys, w.value)
		}
	}
	return nil
}

// growConntrackBuckets raises nf_conntrack_buckets to max/4, never lowers it.
func growConntrackBuckets(sys sysctl.Interface, max string) {
	const name = "net.netfilter.nf_conntrack_buckets"
	m, _ := strconv.Atoi(max)
	cur, err := sys.Get(name)
	if err != nil {
		return
	}
	if n, err := strconv.Atoi(cur); err == nil && n >= m/4 {
		return
	}
	if err := sys.Set(name, strconv.Itoa(m/4)); err != nil {
		klog.InfoS("Warning: could not grow the conntrack hash table", "sysctl", name, "want", m/4, "err", err)
	}
}

func readOnly(err error) bool {
	return errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// logicalCPUs counts the machine's online CPUs (as kube-proxy's cadvisor
// topology does), not the ones this process may use: a container limited to
// two CPUs still shares the host's conntrack table.
func logicalCPUs() int {
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		if n := countCPUList(strings.TrimSpace(string(b))); n > 0 {
			return n
		}
	}
	return runtime.NumCPU()
}

// countCPUList counts a kernel CPU list such as "0-3,6,8-9".
func countCPUList(list string) int {
	n := 0
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		n += b - a + 1
	}
	return n
}
