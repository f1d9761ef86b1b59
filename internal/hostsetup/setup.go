package hostsetup

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
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
	// IPv6NotForwarded is set when IPv6 is proxied and
	// net.ipv6.conf.all.forwarding is not 1 (checkIPv6Forwarding): logged
	// as a warning, left as it is.
	IPv6NotForwarded bool
}

// Prepare readies the kernel before the first sync: it makes the dummy
// link (a kernel without the dummy driver is a start-up error saying so),
// probes the IPVS scheduler (which also loads ip_vs), sets the IPVS
// timeouts, the sysctls kube-proxy's IPVS mode sets and its conntrack
// settings, each change logged with its reach, and says when IPv6 is
// proxied without IPv6 forwarding, which it leaves to the network plugin.
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
	var err error
	out.Config, out.SchedulerFellBack, err = ChooseScheduler(k.IPVS, cfg)
	if err != nil {
		return out, err
	}
	if cfg.TCPTimeout > 0 || cfg.TCPFinTimeout > 0 || cfg.UDPTimeout > 0 {
		if err := k.IPVS.SetTimeouts(ipvs.Timeouts{TCP: cfg.TCPTimeout, TCPFin: cfg.TCPFinTimeout, UDP: cfg.UDPTimeout}); err != nil {
			return out, fmt.Errorf("set IPVS timeouts: %w", err)
		}
	}
	for _, s := range wantedSysctls(cfg, kernelRelease) {
		if err := ensureSysctlReaching(k.Sysctl, s); err != nil {
			return out, err
		}
	}
	if cfg.HasFamily(v1.IPv6Protocol) {
		out.IPv6NotForwarded = !checkIPv6Forwarding(k.Sysctl)
	}
	if err := applyConntrackSysctls(k.Sysctl, cfg.Conntrack); err != nil {
		return out, err
	}
	return out, nil
}

// ChooseScheduler is cfg with the scheduler the kernel behind h runs: the
// configured one when the kernel has it; FallbackScheduler when the default
// was not named and the kernel lacks it (fellBack); an error when a named
// scheduler is missing.
func ChooseScheduler(h ipvs.Interface, cfg ipvsproxy.Config) (_ ipvsproxy.Config, fellBack bool, _ error) {
	ok, err := probeScheduler(h, cfg.Scheduler)
	switch {
	case err != nil:
		return cfg, false, err
	case ok:
		klog.InfoS("Using the IPVS scheduler", "scheduler", cfg.Scheduler, "explicit", cfg.SchedulerExplicit)
		return cfg, false, nil
	case cfg.SchedulerExplicit || cfg.Scheduler != ipvsproxy.DefaultScheduler:
		// An operator who names a scheduler means it: running with another
		// would change how traffic is spread without anyone noticing.
		return cfg, false, fmt.Errorf("--ipvs-scheduler=%s: the kernel has no such IPVS scheduler (module ip_vs_%s missing or not built): %w",
			cfg.Scheduler, cfg.Scheduler, ipvs.ErrNoScheduler)
	}
	if ok, err := probeScheduler(h, FallbackScheduler); err != nil || !ok {
		return cfg, false, fmt.Errorf("the kernel has neither the default IPVS scheduler %s nor the fallback %s: %w",
			cfg.Scheduler, FallbackScheduler, errors.Join(err, ipvs.ErrNoScheduler))
	}
	// twos arrived in Linux 5.12 and some kernels are built without
	// CONFIG_IP_VS_TWOS.
	klog.InfoS("The kernel has no twos IPVS scheduler (Linux 5.12+, CONFIG_IP_VS_TWOS); falling back",
		"scheduler", cfg.Scheduler, "fallback", FallbackScheduler)
	cfg.Scheduler = FallbackScheduler
	cfg.SchedulerFlags = 0 // sh's and mh's flags mean nothing to wrr
	return cfg, true, nil
}

// probeScheduler reports whether the kernel has the IPVS scheduler: it
// creates and deletes a throw-away virtual server on a documentation
// address, the only reliable test, since schedulers are modules the kernel
// loads on first use.
func probeScheduler(h ipvs.Interface, scheduler string) (bool, error) {
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

// sysctlSetting is one kernel parameter Prepare sets; reach says what
// else it changes, for the log line of a change.
type sysctlSetting struct{ name, value, reach string }

// wantedSysctls are what kube-proxy's IPVS mode sets (pkg/proxy/ipvs
// NewProxier), no more: net.ipv4.vs.* act on IPVS alone, the others reach
// the whole node and are logged when they change.
func wantedSysctls(cfg ipvsproxy.Config, kernelRelease string) []sysctlSetting {
	out := []sysctlSetting{
		// Let iptables see IPVS connections, so marked traffic is masqueraded.
		{"net.ipv4.vs.conntrack", "1", ""},
		// Drop connections to a deleted real server at their next packet
		// instead of black-holing them until they time out.
		{"net.ipv4.vs.expire_nodest_conn", "1", ""},
		// Expire persistence templates of a weight-0 real server, so
		// affinity does not pin clients to a draining endpoint.
		{"net.ipv4.vs.expire_quiescent_template", "1", ""},
		// IPVS sends to real servers on other nodes and takes their
		// replies back through the forwarding path.
		{"net.ipv4.ip_forward", "1", "the node forwards IPv4 between all its interfaces"},
	}
	// Below 5.9, conn_reuse_mode=1 delays reused connections by a second
	// (kubernetes#81775); 5.9 fixed it, so leave the default there.
	if major, minor, ok := kernelVersion(kernelRelease); ok && (major < 5 || major == 5 && minor < 9) {
		out = append(out, sysctlSetting{"net.ipv4.vs.conn_reuse_mode", "0", ""})
	}
	if cfg.StrictARP {
		// Do not answer ARP for kube-ipvs0's addresses on other links.
		out = append(out, sysctlSetting{"net.ipv4.conf.all.arp_ignore", "1", "no interface answers ARP for an address it does not hold"},
			sysctlSetting{"net.ipv4.conf.all.arp_announce", "2", "ARP requests of every interface use that interface's own address"})
	}
	// IPv6 forwarding is not here: net.ipv6.conf.all.forwarding=1 also
	// makes every interface with accept_ra=1 ignore router advertisements,
	// so a node configured by SLAAC loses its IPv6 default route when it
	// expires. kube-proxy leaves it to the network plugin too; see
	// checkIPv6Forwarding.
	return out
}

func ensureSysctl(s sysctl.Interface, name, value string) error {
	return ensureSysctlReaching(s, sysctlSetting{name: name, value: value})
}

// ensureSysctlReaching writes the setting when it differs, and logs a
// change whose effect reaches beyond IPVS.
func ensureSysctlReaching(s sysctl.Interface, w sysctlSetting) error {
	cur, err := s.Get(w.name)
	if err == nil && cur == w.value {
		return nil
	}
	if err := s.Set(w.name, w.value); err != nil {
		return fmt.Errorf("set sysctl %s=%s: %w", w.name, w.value, err)
	}
	if w.reach != "" {
		klog.InfoS("Changed a kernel setting whose effect reaches beyond the proxier", "sysctl", w.name, "from", cur, "to", w.value, "effect", w.reach)
	}
	return nil
}

// checkIPv6Forwarding says, at start, when this node proxies IPv6 but does
// not forward it: IPVS would send to real servers on other nodes and their
// replies would be dropped. The network plugin (or the node's own
// configuration) turns forwarding on where pods have IPv6, as kube-proxy
// expects; turning it on here would make every interface with accept_ra=1
// ignore router advertisements, and a node configured by SLAAC would lose
// its IPv6 uplink when its default route expires. It reports whether IPv6
// is forwarded.
func checkIPv6Forwarding(s sysctl.Interface) bool {
	const name = "net.ipv6.conf.all.forwarding"
	cur, err := s.Get(name)
	if err == nil && cur == "1" {
		return true
	}
	klog.InfoS("Warning: IPv6 is proxied but not forwarded: replies from IPv6 endpoints on other nodes will be dropped. "+
		"Turn forwarding on as the network plugin would (sysctl "+name+"=1), after setting accept_ra=2 on every interface that takes "+
		"its IPv6 address or route from router advertisements (accept_ra=1), which forwarding would otherwise make ignore them. "+
		"ipvsproxy leaves this setting alone, as kube-proxy does", "sysctl", name, "value", cur, "err", err)
	return false
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
