package ipvsproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipset"
	v1 "k8s.io/api/core/v1"
)

// Config is what the daemon's flags decide; BuildService reads it, never
// changes it.
type Config struct {
	// Families are the IP families this node proxies (IPv4, IPv6 or both).
	Families []v1.IPFamily
	// ClusterCIDRs: traffic to a cluster IP from outside them is masqueraded.
	ClusterCIDRs []netip.Prefix
	// DetectLocalMode says how pod traffic is recognised (localdetect.go;
	// empty means ClusterCIDR); PodBridgeInterface and
	// PodInterfaceNamePrefix serve its interface modes.
	DetectLocalMode        LocalDetectMode
	PodBridgeInterface     string
	PodInterfaceNamePrefix string
	// NodePortAddresses narrows which node addresses get NodePort virtual
	// servers (and health-check listeners); empty means every address.
	NodePortAddresses []netip.Prefix
	// NodePortRange is the API server's --service-node-port-range; a virtual
	// server on a node address with a port in it belongs to the proxier.
	NodePortMin, NodePortMax uint16
	// MasqueradeAll marks all cluster IP traffic for SNAT.
	MasqueradeAll bool
	// MasqueradeMark is the fwmark bit set on traffic to SNAT (0x4000).
	MasqueradeMark uint32
	// Scheduler is the IPVS scheduler for every virtual server, with
	// SchedulerFlags (sh and mh only); a Service may choose its own (see
	// AnnotationScheduler).
	Scheduler      string
	SchedulerFlags ipvs.SchedulerFlags
	// SchedulerExplicit is set when the operator chose Scheduler: a kernel
	// without it is then a start-up error. Only the default falls back.
	SchedulerExplicit bool
	// AllowedSchedulers are the schedulers a Service may choose with its
	// annotation, besides Scheduler (always allowed): IPVS loads the module
	// ip_vs_<name> the first time a virtual server names a scheduler, so a
	// free choice would let any tenant load kernel modules on every node.
	// --ipvs-allowed-schedulers, or by default those the kernel had when
	// the daemon started (hostsetup.AvailableSchedulers). Empty allows only
	// Scheduler. AllowedSchedulersExplicit is set when the operator listed
	// them (the same on every node); otherwise each node's list is its own.
	AllowedSchedulers         []string
	AllowedSchedulersExplicit bool
	// ExcludeCIDRs: what the kernel holds in them is never cleaned up
	// (deleted or changed) unless a Service wants it; see excluded.
	ExcludeCIDRs []netip.Prefix
	StrictARP    bool
	// AcceptServiceTraffic (--accept-service-traffic) makes KUBE-IPVS-FILTER
	// accept traffic to a virtual server ahead of the host's own INPUT
	// rules, so that a host firewall cannot drop it. Off, as in kube-proxy,
	// the chain returns it to INPUT and the host's rules decide: a firewall
	// may then restrict the node ports and service addresses tenants open.
	AcceptServiceTraffic bool
	// ServiceCIDRs are the cluster's Service IP ranges (--service-cidrs), for
	// clusters without networking.k8s.io/v1 ServiceCIDR objects; the ranges of
	// those objects are added to them (NodeInfo.ServiceCIDRs). Each becomes
	// local with one route on kube-ipvs0, so cluster IPs inside are not bound
	// one by one (routes.go), and no external IP may lie in them
	// (externalips.go).
	ServiceCIDRs []netip.Prefix
	// ExternalIPCIDRs (--external-ip-cidrs), when set, are the only ranges
	// external IPs may come from (CVE-2020-8554); empty allows all.
	ExternalIPCIDRs []netip.Prefix
	// ProtectAddresses (--protect-addresses) are never served or bound,
	// whichever field of a Service names them, on any node
	// (addressguard.go): what the nodes must keep reaching that the
	// proxier cannot find for itself (the API server's VIP or load
	// balancer as the kubelets dial it, a control-plane range).
	ProtectAddresses []netip.Prefix
	// APIServers are the addresses the daemon found the API server at when
	// it started (cmd/ipvsproxy: the host it dials, resolved, and the
	// address the API server advertises); the guard protects each on every
	// node but one holding it, unless it lies in a Service range or is
	// default/kubernetes's cluster IP: an in-cluster daemon dials that
	// cluster IP, which the proxier itself serves.
	APIServers []APIServerAddress
	// RefuseEndpointCIDRs (--refuse-endpoint-cidrs): no endpoint address may
	// lie in them; RefuseNodeEndpoints (--refuse-node-endpoints): no
	// endpoint of a Service outside kube-system may be a Node's, the API
	// server's or a protected address (endpointpolicy.go).
	RefuseEndpointCIDRs []netip.Prefix
	RefuseNodeEndpoints bool
	// SyncPeriod is the full re-check period; MinSyncPeriod bounds how often
	// the kernel is written (DefaultMinSyncPeriod).
	SyncPeriod, MinSyncPeriod time.Duration
	// ResyncShares (--ipvs-resync-shares) spreads the re-check over that
	// many periods: every K-th period is a full sync, and each other one
	// lists the virtual servers and re-reads one K-th of them with their
	// real servers (resync.go). 1 re-reads everything every period, as
	// kube-proxy does.
	ResyncShares int
	// IPVS connection timeouts; zero leaves the kernel's value.
	TCPTimeout, TCPFinTimeout, UDPTimeout time.Duration
	// DrainTimeout (--ipvs-drain-timeout) bounds how long a removed TCP
	// real server, or every real server of a deleted Service's TCP virtual
	// server, stays at weight 0 waiting for its connections to end; 0 cuts
	// them at once. At most MaxDrainTimeout.
	DrainTimeout time.Duration
	// IPSetMaxElements is the maxelem of every owned hash set created (the
	// kernel's default is 65536); a Service that would overflow a set is
	// refused (admission.go).
	IPSetMaxElements uint32
	// Limits bound what one Service and one namespace may take of the
	// node (limits.go).
	Limits Limits
	// Conntrack are the conntrack sysctls kube-proxy sets at start-up.
	Conntrack ConntrackSettings
}

// defaultDrainTimeout and MaxDrainTimeout bound Config.DrainTimeout.
const (
	defaultDrainTimeout = 15 * time.Minute
	MaxDrainTimeout     = 24 * time.Hour
)

// MaxIPSetMaxElements bounds Config.IPSetMaxElements: the kernel's hash
// sets take at most 2^31 elements.
const MaxIPSetMaxElements = 1 << 31

// DefaultConfig returns kube-proxy's defaults.
func DefaultConfig() Config {
	return Config{
		Families:       []v1.IPFamily{v1.IPv4Protocol},
		NodePortMin:    30000,
		NodePortMax:    32767,
		MasqueradeMark: 0x4000,
		Scheduler:      DefaultScheduler,
		SyncPeriod:     30 * time.Second,
		MinSyncPeriod:  DefaultMinSyncPeriod,
		ResyncShares:   1,
		DrainTimeout:   defaultDrainTimeout,
		Conntrack:      DefaultConntrack(),

		IPSetMaxElements: ipset.DefaultMaxElem,
		Limits:           defaultLimits(),
	}
}

// Validate reports every problem with the configuration at once. It is the
// one place a value's range is checked: the flags and the configuration
// file only parse (cmd/ipvsproxy), so each rule is written once. A message
// names the flag the value comes from.
func (c Config) Validate() error {
	var errs []error
	if len(c.Families) == 0 {
		errs = append(errs, errors.New("no IP family enabled"))
	}
	for _, f := range c.Families {
		if f != v1.IPv4Protocol && f != v1.IPv6Protocol {
			errs = append(errs, fmt.Errorf("unknown IP family %q", f))
		}
	}
	for _, p := range slices.Concat(c.ClusterCIDRs, c.NodePortAddresses, c.ExcludeCIDRs, c.ServiceCIDRs, c.ExternalIPCIDRs, c.ProtectAddresses, c.RefuseEndpointCIDRs) {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("invalid CIDR %v", p))
		}
	}
	if err := c.DetectLocalMode.validate(c); err != nil {
		errs = append(errs, err)
	}
	if c.NodePortMin == 0 || c.NodePortMin > c.NodePortMax {
		errs = append(errs, fmt.Errorf("--service-node-port-range=%d-%d: want MIN-MAX within 1-65535", c.NodePortMin, c.NodePortMax))
	}
	if c.MasqueradeMark == 0 || c.MasqueradeMark&(c.MasqueradeMark-1) != 0 {
		errs = append(errs, fmt.Errorf("the masquerade mark %#x must be a single bit: want --iptables-masquerade-bit 0-31", c.MasqueradeMark))
	}
	if c.IPSetMaxElements == 0 || c.IPSetMaxElements > MaxIPSetMaxElements {
		errs = append(errs, fmt.Errorf("--ipset-max-elements=%d must be between 1 and %d", c.IPSetMaxElements, MaxIPSetMaxElements))
	}
	if c.Scheduler == "" {
		errs = append(errs, errors.New("--ipvs-scheduler: empty IPVS scheduler"))
	}
	for _, name := range c.AllowedSchedulers {
		if !slices.Contains(ipvs.StockSchedulers, name) {
			errs = append(errs, fmt.Errorf("--ipvs-allowed-schedulers: %q is not an IPVS scheduler (%s)", name, strings.Join(ipvs.StockSchedulers, ", ")))
		}
	}
	if c.SyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--ipvs-sync-period=%v must be positive", c.SyncPeriod))
	}
	if c.MinSyncPeriod < 0 || c.MinSyncPeriod > c.SyncPeriod {
		errs = append(errs, fmt.Errorf("--ipvs-min-sync-period=%v must be between 0 and --ipvs-sync-period=%v", c.MinSyncPeriod, c.SyncPeriod))
	}
	if c.ResyncShares < 1 || c.ResyncShares > MaxResyncShares {
		errs = append(errs, fmt.Errorf("--ipvs-resync-shares=%d must be between 1 and %d", c.ResyncShares, MaxResyncShares))
	}
	for name, d := range map[string]time.Duration{"tcp": c.TCPTimeout, "tcpfin": c.TCPFinTimeout, "udp": c.UDPTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("--ipvs-%s-timeout=%v must not be negative", name, d))
		}
	}
	if c.DrainTimeout < 0 || c.DrainTimeout > MaxDrainTimeout {
		errs = append(errs, fmt.Errorf("--ipvs-drain-timeout=%v must be between 0 and %v", c.DrainTimeout, MaxDrainTimeout))
	}
	errs = append(errs, c.Conntrack.validate()...)
	errs = append(errs, c.Limits.validate()...)
	return errors.Join(errs...)
}

// Excluded reports whether addr lies in --ipvs-exclude-cidrs. As in
// kube-proxy (cleanLegacyService, isIPInExcludeCIDRs) that range limits
// clean-up only: a virtual server or kube-ipvs0 address there that no
// Service wants is never deleted or changed, whoever made it, while one a
// Service wants is programmed as anywhere else. The builder never asks.
func (c Config) Excluded(addr netip.Addr) bool {
	for _, p := range c.ExcludeCIDRs {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// FamilyOf returns the Kubernetes family of an address.
func FamilyOf(a netip.Addr) v1.IPFamily {
	if a.Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

func (c Config) HasFamily(f v1.IPFamily) bool {
	for _, x := range c.Families {
		if x == f {
			return true
		}
	}
	return false
}

// DefaultScheduler is the scheduler unless --ipvs-scheduler names one:
// weighted random twos choice (Linux 5.12, CONFIG_IP_VS_TWOS).
const DefaultScheduler = "twos"

// DefaultMinSyncPeriod is the shortest time between two syncs unless
// --ipvs-min-sync-period says otherwise. A partial sync writes only what
// changed, so it is short (tens of milliseconds at 20,000 Services under
// emulation); under continuous churn a change waits for the next sync, and at
// kube-proxy's nftables default of a second that wait alone put the p99 of
// network programming latency above a second. A tenth of a second still
// batches changes that arrive together and bounds the sync loop's share of a
// CPU under a flood of them, which kube-proxy's IPVS default (0) does not.
const DefaultMinSyncPeriod = 100 * time.Millisecond

// MaxResyncShares bounds --ipvs-resync-shares: beyond it a full re-check
// would come too rarely to repair anything (hours at the default period).
const MaxResyncShares = 100
