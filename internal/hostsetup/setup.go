package hostsetup

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/ipvsproxy/ipvsproxy/netif"
	"github.com/ipvsproxy/ipvsproxy/sysctl"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// FallbackScheduler replaces DefaultScheduler, and only it, when the kernel
// lacks it: of the schedulers every IPVS kernel has, the one whose spread of
// new connections comes closest to weighted random (measured in
// docs/scheduler.md by TestSchedulerSpreadOnRealKernel).
const FallbackScheduler = "wrr"

// Prepared is what Prepare found.
type Prepared struct {
	// Config is the input with the scheduler replaced when the kernel
	// refused it.
	Config ipvsproxy.Config
	// SchedulerFellBack is true when Config.Scheduler is the fallback.
	SchedulerFellBack bool
	// Requested is the scheduler asked for.
	Requested string
}

// Prepare readies the kernel before the first sync: it makes the dummy
// link (a kernel without the dummy driver is a start-up error saying so),
// probes the IPVS scheduler (which also loads ip_vs), sets the IPVS
// timeouts, the sysctls IPVS needs and kube-proxy's conntrack settings.
// kernelRelease is uname -r.
func Prepare(cfg ipvsproxy.Config, k adapters.Kernel, kernelRelease string) (Prepared, error) {
	out := Prepared{Config: cfg, Requested: cfg.Scheduler}
	// Without it no Service address can be bound and no Service CIDR routed,
	// and every sync would fail the same way: say it once, at start-up.
	// Creating the link early writes nothing a sync would not.
	if err := k.Netif.EnsureDummy(); err != nil {
		if errors.Is(err, netif.ErrUnsupported) {
			return out, fmt.Errorf("the kernel has no dummy network driver (module dummy, CONFIG_DUMMY), which ipvsproxy needs for %s, the link that holds Service addresses (docs/compatibility.md): %w", owned.DummyInterface, err)
		}
		return out, err
	}
	ok, err := ProbeScheduler(k.IPVS, cfg.Scheduler)
	switch {
	case err != nil:
		return out, err
	case ok:
		klog.InfoS("Using the IPVS scheduler", "scheduler", cfg.Scheduler, "explicit", cfg.SchedulerExplicit)
	case cfg.SchedulerExplicit || cfg.Scheduler != ipvsproxy.DefaultScheduler:
		// An operator who names a scheduler means it: running with another
		// would change how traffic is spread without anyone noticing.
		return out, fmt.Errorf("--ipvs-scheduler=%s: the kernel has no such IPVS scheduler (module ip_vs_%s missing or not built): %w",
			cfg.Scheduler, cfg.Scheduler, ipvs.ErrNoScheduler)
	default:
		if ok, err := ProbeScheduler(k.IPVS, FallbackScheduler); err != nil || !ok {
			return out, fmt.Errorf("the kernel has neither the default IPVS scheduler %s nor the fallback %s: %w",
				cfg.Scheduler, FallbackScheduler, errors.Join(err, ipvs.ErrNoScheduler))
		}
		// twos arrived in Linux 5.12 and some kernels are built without
		// CONFIG_IP_VS_TWOS.
		klog.InfoS("The kernel has no twos IPVS scheduler (Linux 5.12+, CONFIG_IP_VS_TWOS); falling back",
			"scheduler", cfg.Scheduler, "fallback", FallbackScheduler)
		out.Config.Scheduler, out.SchedulerFellBack = FallbackScheduler, true
		out.Config.SchedulerFlags = 0 // sh's and mh's flags mean nothing to wrr
	}
	if cfg.TCPTimeout > 0 || cfg.TCPFinTimeout > 0 || cfg.UDPTimeout > 0 {
		if err := k.IPVS.SetTimeouts(ipvs.Timeouts{TCP: cfg.TCPTimeout, TCPFin: cfg.TCPFinTimeout, UDP: cfg.UDPTimeout}); err != nil {
			return out, fmt.Errorf("set IPVS timeouts: %w", err)
		}
	}
	for _, s := range wantedSysctls(cfg, kernelRelease) {
		if err := ensureSysctl(k.Sysctl, s.name, s.value); err != nil {
			return out, err
		}
	}
	if err := applyConntrackSysctls(k.Sysctl, cfg.Conntrack); err != nil {
		return out, err
	}
	return out, nil
}

// ProbeScheduler reports whether the kernel has the IPVS scheduler: it
// creates and deletes a throw-away virtual server on a documentation
// address, the only reliable test, since schedulers are modules the kernel
// loads on first use.
func ProbeScheduler(h ipvs.Interface, scheduler string) (bool, error) {
	for port := uint16(1); port <= 3; port++ {
		vs := ipvs.VirtualServer{VirtualServerKey: ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("192.0.2.254"), Port: port}, Scheduler: scheduler}
		err := h.AddVirtualServer(vs)
		switch {
		case err == nil:
			if err := h.DeleteVirtualServer(vs.VirtualServerKey); err != nil {
				return true, fmt.Errorf("delete scheduler probe %s: %w", vs.VirtualServerKey, err)
			}
			return true, nil
		case errors.Is(err, ipvs.ErrNoScheduler):
			return false, nil
		case errors.Is(err, ipvs.ErrExists):
			continue // someone else's; never touch it
		default:
			return false, fmt.Errorf("probe IPVS scheduler %s: %w", scheduler, err)
		}
	}
	return false, fmt.Errorf("probe IPVS scheduler %s: probe addresses all in use", scheduler)
}

type sysctlSetting struct{ name, value string }

// wantedSysctls are kube-proxy's IPVS settings.
func wantedSysctls(cfg ipvsproxy.Config, kernelRelease string) []sysctlSetting {
	out := []sysctlSetting{
		// Let iptables see IPVS connections, so marked traffic is masqueraded.
		{"net.ipv4.vs.conntrack", "1"},
		// Drop connections to a deleted real server at their next packet
		// instead of black-holing them until they time out.
		{"net.ipv4.vs.expire_nodest_conn", "1"},
		// Expire persistence templates of a weight-0 real server, so
		// affinity does not pin clients to a draining endpoint.
		{"net.ipv4.vs.expire_quiescent_template", "1"},
		{"net.ipv4.ip_forward", "1"},
	}
	// Below 5.9, conn_reuse_mode=1 delays reused connections by a second
	// (kubernetes#81775); 5.9 fixed it, so leave the default there.
	if major, minor, ok := kernelVersion(kernelRelease); ok && (major < 5 || major == 5 && minor < 9) {
		out = append(out, sysctlSetting{"net.ipv4.vs.conn_reuse_mode", "0"})
	}
	if cfg.StrictARP {
		// Do not answer ARP for kube-ipvs0's addresses on other links.
		out = append(out, sysctlSetting{"net.ipv4.conf.all.arp_ignore", "1"}, sysctlSetting{"net.ipv4.conf.all.arp_announce", "2"})
	}
	if cfg.HasFamily(v1.IPv6Protocol) {
		out = append(out, sysctlSetting{"net.ipv6.conf.all.forwarding", "1"})
	}
	return out
}

func ensureSysctl(s sysctl.Interface, name, value string) error {
	if cur, err := s.Get(name); err == nil && cur == value {
		return nil
	}
	if err := s.Set(name, value); err != nil {
		return fmt.Errorf("set sysctl %s=%s: %w", name, value, err)
	}
	return nil
}

// kernelVersion parses "6.12.38+deb12-amd64" into 6 and 12.
func kernelVersion(release string) (major, minor int, ok bool) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minorText := parts[1]
	if i := strings.IndexFunc(minorText, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorText = minorText[:i]
	}
	minor, err2 := strconv.Atoi(minorText)
	return major, minor, err1 == nil && err2 == nil
}
