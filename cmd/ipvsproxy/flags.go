package main

import (
	"flag"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeproxyconfig"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
)

// Flag names follow kube-proxy's where the meaning is the same. Every flag
// also reads IPVSPROXY_<NAME> (the DaemonSet's ConfigMap sets those).
func envOf(name string) []string {
	return []string{"IPVSPROXY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
}

func proxierFlags() []cli.Flag {
	d := ipvsproxy.DefaultConfig()
	return []cli.Flag{
		&cli.StringFlag{Name: "cluster-cidr", EnvVars: envOf("cluster-cidr"), Usage: "pod CIDRs, comma-separated (one per family); cluster IP traffic from outside them is masqueraded"},
		&cli.StringFlag{Name: "nodeport-addresses", EnvVars: envOf("nodeport-addresses"), Usage: "CIDRs of the node addresses that serve NodePorts and health checks, comma-separated (a family without one serves on all its addresses), or primary (the Node's primary address of each family); empty or all means all"},
		&cli.BoolFlag{Name: "masquerade-all", EnvVars: envOf("masquerade-all"), Usage: "masquerade all traffic to cluster IPs"},
		&cli.StringFlag{Name: "ipvs-scheduler", EnvVars: envOf("ipvs-scheduler"), Value: d.Scheduler, Usage: "IPVS scheduler; a kernel without it is a start-up error, except that the default twos falls back to wrr (docs/scheduler.md)"},
		&cli.StringFlag{Name: "ipvs-exclude-cidrs", EnvVars: envOf("ipvs-exclude-cidrs"), Usage: "CIDRs whose virtual servers and addresses are never touched, comma-separated"},
		&cli.BoolFlag{Name: "accept-service-traffic", EnvVars: envOf("accept-service-traffic"), Usage: "accept traffic to Services (node ports, service addresses) in KUBE-IPVS-FILTER ahead of the host's own INPUT rules, so that a host firewall cannot drop it; by default it returns to INPUT and the host's rules decide, as under kube-proxy"},
		&cli.BoolFlag{Name: "ipvs-strict-arp", EnvVars: envOf("ipvs-strict-arp"), Usage: "set arp_ignore=1 and arp_announce=2 so service addresses are not announced"},
		&cli.StringFlag{Name: "service-node-port-range", EnvVars: envOf("service-node-port-range"), Value: fmt.Sprintf("%d-%d", d.NodePortMin, d.NodePortMax), Usage: "the API server's NodePort range: virtual servers on node addresses in it belong to ipvsproxy"},
		&cli.StringFlag{Name: "sysctl-root", EnvVars: envOf("sysctl-root"), Value: "/proc/sys", Usage: "where the kernel parameters are written; a mount of the host's /proc/sys/net below it lets the container run unprivileged"},
		&cli.IntFlag{Name: "v", EnvVars: envOf("v"), Usage: "log verbosity (klog): 2 logs every sync"},
		&cli.StringFlag{Name: "external-ip-cidrs", EnvVars: envOf("external-ip-cidrs"), Usage: "CIDRs that external IPs may lie in, comma-separated; empty allows all. Others are refused with an Event (CVE-2020-8554)"},
		&cli.StringFlag{Name: "protect-addresses", EnvVars: envOf("protect-addresses"), Usage: "addresses or CIDRs, comma-separated, that no Service may take on any node, whichever field names them: the API server's VIP or load balancer as the kubelets dial it, anything the nodes must keep reaching. The API server's endpoints, the host this daemon dials and the address the API server advertises are protected without it"},
		&cli.StringFlag{Name: "refuse-endpoint-cidrs", EnvVars: envOf("refuse-endpoint-cidrs"), Usage: "addresses or CIDRs, comma-separated, that no endpoint may lie in (cloud metadata services, the control plane's network): such an endpoint is no real server, with an Event on its EndpointSlice. Unspecified, loopback, link-local and multicast endpoints are refused without it"},
		&cli.BoolFlag{Name: "refuse-node-endpoints", EnvVars: envOf("refuse-node-endpoints"), Usage: "refuse endpoints that are a Node's address, the API server's or in --protect-addresses, except in kube-system's Services and default/kubernetes (hostNetwork pods elsewhere lose their Services), so that a tenant's EndpointSlice cannot make a Service a door to the nodes"},
		&cli.StringFlag{Name: "service-cidrs", EnvVars: envOf("service-cidrs"), Usage: "the cluster's Service IP ranges (the API server's --service-cluster-ip-range), comma-separated, added to those of networking.k8s.io/v1 ServiceCIDR objects; each becomes one local route on kube-ipvs0, and no external IP may lie in them"},
		&cli.StringFlag{Name: "ip-families", EnvVars: envOf("ip-families"), Value: "auto", Usage: "IPv4, IPv6, IPv4,IPv6, or auto: the families the cluster serves on this node (its Node's addresses and pod CIDRs, the Service ranges), or of the host's global addresses when none of those can be read; a family the node cannot proxy is left out with a warning"},
		&cli.StringFlag{Name: "config", EnvVars: envOf("config"), Usage: "a KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1, kubeadm's config.conf); flags given explicitly override it, and a change restarts the daemon"},
		&cli.StringFlag{Name: "detect-local-mode", EnvVars: envOf("detect-local-mode"), Usage: "how pod traffic is recognised: ClusterCIDR (empty: the default), NodeCIDR (the Node's spec.podCIDRs), BridgeInterface or InterfaceNamePrefix; without a way to tell, the node's traffic from service addresses is masqueraded"},
		&cli.StringFlag{Name: "pod-bridge-interface", EnvVars: envOf("pod-bridge-interface"), Usage: "the pods' bridge, for --detect-local-mode BridgeInterface"},
		&cli.StringFlag{Name: "pod-interface-name-prefix", EnvVars: envOf("pod-interface-name-prefix"), Usage: "the prefix of the pods' interfaces, for --detect-local-mode InterfaceNamePrefix"},
	}
}

func runFlags() []cli.Flag {
	d := ipvsproxy.DefaultConfig()
	return []cli.Flag{
		&cli.StringFlag{Name: "kubeconfig", EnvVars: envOf("kubeconfig"), Usage: "kubeconfig file; empty means in-cluster configuration"},
		&cli.StringFlag{Name: "hostname-override", EnvVars: envOf("hostname-override"), Usage: "this node's name, if not the host name"},
		&cli.DurationFlag{Name: "ipvs-sync-period", EnvVars: envOf("ipvs-sync-period"), Value: d.SyncPeriod, Usage: "how long after the last re-check ended everything is re-checked against the kernel (counted from its end, as kube-proxy counts its sync period)"},
		&cli.IntFlag{Name: "ipvs-resync-shares", EnvVars: envOf("ipvs-resync-shares"), Value: d.ResyncShares, Usage: fmt.Sprintf("spread the re-check over this many sync periods (1-%d): every one lists the virtual servers and re-reads a share of them, every N-th is a full re-check; 1 re-checks everything every period, as kube-proxy", ipvsproxy.MaxResyncShares)},
		&cli.DurationFlag{Name: "ipvs-min-sync-period", EnvVars: envOf("ipvs-min-sync-period"), Value: d.MinSyncPeriod, Usage: "the shortest time between two kernel syncs"},
		&cli.DurationFlag{Name: "ipvs-tcp-timeout", EnvVars: envOf("ipvs-tcp-timeout"), Usage: "IPVS timeout for idle TCP connections (0 leaves the kernel's)"},
		&cli.DurationFlag{Name: "ipvs-tcpfin-timeout", EnvVars: envOf("ipvs-tcpfin-timeout"), Usage: "IPVS timeout for TCP connections after FIN (0 leaves the kernel's)"},
		&cli.DurationFlag{Name: "ipvs-drain-timeout", EnvVars: envOf("ipvs-drain-timeout"), Value: d.DrainTimeout, Usage: fmt.Sprintf("how long open TCP connections of a removed endpoint or a deleted Service keep their real server at weight 0 before it is deleted (0-%v; 0 cuts them at once)", ipvsproxy.MaxDrainTimeout)},
		&cli.DurationFlag{Name: "ipvs-udp-timeout", EnvVars: envOf("ipvs-udp-timeout"), Usage: "IPVS timeout for UDP flows (0 leaves the kernel's)"},
		&cli.UintFlag{Name: "ipset-max-elements", EnvVars: envOf("ipset-max-elements"), Value: uint(d.IPSetMaxElements), Usage: "maxelem of the ipsets created; a Service that would overflow one is refused with an Event"},
		&cli.IntFlag{Name: "ipset-max-elements-per-service", EnvVars: envOf("ipset-max-elements-per-service"), Value: d.Limits.MaxSetEntriesPerService, Usage: "members one Service may have in any one ipset (one per virtual server in the ownership record); a Service needing more is refused with a ServiceTooLarge Event"},
		&cli.IntFlag{Name: "ipset-max-elements-per-namespace", EnvVars: envOf("ipset-max-elements-per-namespace"), Value: d.Limits.SetEntriesPerNamespace, Usage: "a namespace's share of each ipset: while a set is full, the Services of a namespace beyond it yield to other namespaces' (kube-system has no share)"},
		&cli.IntFlag{Name: "ipvs-max-real-servers", EnvVars: envOf("ipvs-max-real-servers"), Value: d.Limits.MaxRealServers, Usage: "real servers this node programs at most; a Service that would take it beyond is refused with a ServiceTooLarge Event"},
		&cli.IntFlag{Name: "ipvs-max-real-servers-per-service", EnvVars: envOf("ipvs-max-real-servers-per-service"), Value: d.Limits.MaxRealServersPerService, Usage: "real servers one Service may have, and endpoint ports (endpoints times ports) its EndpointSlices may list; beyond it the Service is refused with a ServiceTooLarge Event"},
		&cli.IntFlag{Name: "ipvs-max-real-servers-per-namespace", EnvVars: envOf("ipvs-max-real-servers-per-namespace"), Value: d.Limits.RealServersPerNamespace, Usage: "a namespace's share of --ipvs-max-real-servers: while they are all taken, the Services of a namespace beyond it yield to other namespaces' (kube-system has no share)"},
		&cli.StringFlag{Name: "node-addresses-from", EnvVars: envOf("node-addresses-from"), Value: nodeAddressesFromNodes, Usage: "where the address guard learns the other Nodes' addresses: nodes (watch every Node: each kubelet's status reports reach every node) or endpointslices (the slices `ipvsproxy publish-node-addresses` keeps in --node-addresses-namespace, which change only when an address does)"},
		&cli.StringFlag{Name: "node-addresses-namespace", EnvVars: envOf("node-addresses-namespace"), Value: defaultNodeAddressesNamespace, Usage: "the namespace of the published Node addresses, with --node-addresses-from endpointslices"},
		&cli.StringFlag{Name: "metrics-bind-address", EnvVars: envOf("metrics-bind-address"), Value: "127.0.0.1:10249", Usage: "address of /metrics and /proxyMode"},
		&cli.StringFlag{Name: "healthz-bind-address", EnvVars: envOf("healthz-bind-address"), Value: "0.0.0.0:10256", Usage: "address of /healthz, /livez and /readyz"},
		&cli.BoolFlag{Name: "bind-address-hard-fail", EnvVars: envOf("bind-address-hard-fail"), Usage: "exit when --healthz-bind-address, --metrics-bind-address or --inspect-bind-address cannot be bound, instead of logging and retrying every 5s"},
		&cli.BoolFlag{Name: "metrics-per-service", EnvVars: envOf("metrics-per-service"), Usage: "export ipvsproxy_service_{connections,packets,bytes}_total per Service port from the IPVS counters (one series per Service port)"},
		&cli.BoolFlag{Name: "inspect-endpoint", EnvVars: envOf("inspect-endpoint"), Value: true, Usage: "serve the read-only desired state and sync status for `ipvsproxy inspect` under /inspect/ on --inspect-bind-address"},
		&cli.StringFlag{Name: "inspect-bind-address", EnvVars: envOf("inspect-bind-address"), Usage: "address of the read-only /inspect/ endpoint; empty: 127.0.0.1 on the port of --metrics-bind-address (10249 when that is empty), answered only to connections made to 127.0.0.1 even when the metrics address is 0.0.0.0"},
		&cli.StringFlag{Name: "ipvs-scheduler-flags", EnvVars: envOf("ipvs-scheduler-flags"), Usage: "flags of the sh or mh scheduler, comma-separated: sh-port, sh-fallback, mh-port, mh-fallback"},
		&cli.StringFlag{Name: "ipvs-allowed-schedulers", EnvVars: envOf("ipvs-allowed-schedulers"), Usage: "the IPVS schedulers a Service may choose with the ipvsproxy.io/scheduler annotation besides --ipvs-scheduler, comma-separated; others get a SchedulerNotAllowed Event. The kernel loads a scheduler's module when a virtual server first names it, so this list is what tenants may make it load. Empty: those the kernel has (loaded or built in) when ipvsproxy starts (docs/scheduler.md)"},
		&cli.StringFlag{Name: "proxy-mode", EnvVars: envOf("proxy-mode"), Value: "ipvs", Usage: "kube-proxy's mode: only ipvs is implemented, any other is refused"},
		&cli.IntFlag{Name: "iptables-masquerade-bit", EnvVars: envOf("iptables-masquerade-bit"), Value: 14, Usage: "the fwmark bit (0-31) that marks traffic to masquerade"},
		&cli.IntFlag{Name: "oom-score-adj", EnvVars: envOf("oom-score-adj"), Value: -999, Usage: "the daemon's oom_score_adj, -1000 to 1000, as kube-proxy's"},
		&cli.IntFlag{Name: "conntrack-max-per-core", EnvVars: envOf("conntrack-max-per-core"), Value: d.Conntrack.MaxPerCore, Usage: "nf_conntrack_max per CPU (0 leaves nf_conntrack_max as it is)"},
		&cli.IntFlag{Name: "conntrack-min", EnvVars: envOf("conntrack-min"), Value: d.Conntrack.Min, Usage: "nf_conntrack_max at least, whatever the CPUs"},
		&cli.DurationFlag{Name: "conntrack-tcp-timeout-established", EnvVars: envOf("conntrack-tcp-timeout-established"), Value: d.Conntrack.TCPEstablishedTimeout, Usage: "conntrack timeout of idle established TCP connections (0 leaves the kernel's)"},
		&cli.DurationFlag{Name: "conntrack-tcp-timeout-close-wait", EnvVars: envOf("conntrack-tcp-timeout-close-wait"), Value: d.Conntrack.TCPCloseWaitTimeout, Usage: "conntrack timeout of TCP connections in CLOSE_WAIT (0 leaves the kernel's)"},
		&cli.BoolFlag{Name: "conntrack-tcp-be-liberal", EnvVars: envOf("conntrack-tcp-be-liberal"), Usage: "set nf_conntrack_tcp_be_liberal=1: out-of-window TCP packets are not INVALID"},
		&cli.DurationFlag{Name: "conntrack-udp-timeout", EnvVars: envOf("conntrack-udp-timeout"), Usage: "conntrack timeout of unreplied UDP flows (0 leaves the kernel's)"},
		&cli.DurationFlag{Name: "conntrack-udp-timeout-stream", EnvVars: envOf("conntrack-udp-timeout-stream"), Usage: "conntrack timeout of UDP flows with replies (0 leaves the kernel's)"},
		&cli.Float64Flag{Name: "kube-api-qps", EnvVars: envOf("kube-api-qps"), Value: 5, Usage: "requests per second to the API server"},
		&cli.IntFlag{Name: "kube-api-burst", EnvVars: envOf("kube-api-burst"), Value: 10, Usage: "burst of requests to the API server"},
		&cli.StringFlag{Name: "kube-api-content-type", EnvVars: envOf("kube-api-content-type"), Value: "application/vnd.kubernetes.protobuf", Usage: "content type of requests to the API server"},
		&cli.StringFlag{Name: "kube-api-accept-content-types", EnvVars: envOf("kube-api-accept-content-types"), Usage: "Accept header of requests to the API server; empty means the content type, then JSON"},
		&cli.BoolFlag{Name: "profiling", EnvVars: envOf("profiling"), Usage: "serve Go's pprof at /debug/pprof/ on the metrics address"},
		&cli.StringFlag{Name: "logging-format", EnvVars: envOf("logging-format"), Value: "text", Usage: "text or json (k8s.io/component-base/logs)"},
		&cli.StringFlag{Name: "vmodule", EnvVars: envOf("vmodule"), Usage: "per-file verbosity, pattern=N,... (text format only)"},
		&cli.DurationFlag{Name: "log-flush-frequency", EnvVars: envOf("log-flush-frequency"), Value: 5 * time.Second, Usage: "how often buffered logs are flushed"},
	}
}

// configFromFlags turns flags into a validated Config; families are
// resolved later (they may depend on the node's addresses). It parses only:
// the ranges are Config.Validate's, so each rule stands once. The rules
// left here are about values Config does not carry (--oom-score-adj, the
// bind addresses, --v, --proxy-mode).
func configFromFlags(c *cli.Context) (ipvsproxy.Config, error) {
	cfg := ipvsproxy.DefaultConfig()
	var err error
	if err := setVerbosity(c.Int("v")); err != nil {
		return cfg, err
	}
	if cfg.ClusterCIDRs, err = parseCIDRs("cluster-cidr", c.String("cluster-cidr")); err != nil {
		return cfg, err
	}
	if cfg.NodePortAddresses, err = parseNodePortAddresses(c.String("nodeport-addresses")); err != nil {
		return cfg, err
	}
	if cfg.ExcludeCIDRs, err = parseCIDRs("ipvs-exclude-cidrs", c.String("ipvs-exclude-cidrs")); err != nil {
		return cfg, err
	}
	if cfg.ExternalIPCIDRs, err = parseCIDRs("external-ip-cidrs", c.String("external-ip-cidrs")); err != nil {
		return cfg, err
	}
	if cfg.ServiceCIDRs, err = parseCIDRs("service-cidrs", c.String("service-cidrs")); err != nil {
		return cfg, err
	}
	if cfg.ProtectAddresses, err = parseAddressesOrCIDRs("protect-addresses", c.String("protect-addresses")); err != nil {
		return cfg, err
	}
	if cfg.RefuseEndpointCIDRs, err = parseAddressesOrCIDRs("refuse-endpoint-cidrs", c.String("refuse-endpoint-cidrs")); err != nil {
		return cfg, err
	}
	cfg.RefuseNodeEndpoints = c.Bool("refuse-node-endpoints")
	cfg.MasqueradeAll = c.Bool("masquerade-all")
	cfg.DetectLocalMode = ipvsproxy.LocalDetectMode(c.String("detect-local-mode"))
	cfg.PodBridgeInterface = c.String("pod-bridge-interface")
	cfg.PodInterfaceNamePrefix = c.String("pod-interface-name-prefix")
	if c.IsSet("ipvs-scheduler") || c.String("ipvs-scheduler") != "" { // cleanup has no such flag
		cfg.Scheduler = c.String("ipvs-scheduler")
	}
	cfg.SchedulerExplicit = c.IsSet("ipvs-scheduler")
	cfg.StrictARP = c.Bool("ipvs-strict-arp")
	cfg.AcceptServiceTraffic = c.Bool("accept-service-traffic")
	if cfg.NodePortMin, cfg.NodePortMax, err = parsePortRange(c.String("service-node-port-range")); err != nil {
		return cfg, err
	}
	// Only run has the sync and timeout flags; cleanup keeps the defaults.
	if c.Command.Name == "run" {
		cfg.SyncPeriod = c.Duration("ipvs-sync-period")
		cfg.MinSyncPeriod = c.Duration("ipvs-min-sync-period")
		cfg.ResyncShares = c.Int("ipvs-resync-shares")
		cfg.TCPTimeout = c.Duration("ipvs-tcp-timeout")
		cfg.TCPFinTimeout = c.Duration("ipvs-tcpfin-timeout")
		cfg.UDPTimeout = c.Duration("ipvs-udp-timeout")
		cfg.DrainTimeout = c.Duration("ipvs-drain-timeout")
		// Beyond uint32 is as out of range as beyond 2^31: Validate says so.
		cfg.IPSetMaxElements = uint32(min(c.Uint("ipset-max-elements"), math.MaxUint32))
		cfg.Limits = ipvsproxy.Limits{
			MaxSetEntriesPerService:  c.Int("ipset-max-elements-per-service"),
			SetEntriesPerNamespace:   c.Int("ipset-max-elements-per-namespace"),
			MaxRealServers:           c.Int("ipvs-max-real-servers"),
			MaxRealServersPerService: c.Int("ipvs-max-real-servers-per-service"),
			RealServersPerNamespace:  c.Int("ipvs-max-real-servers-per-namespace"),
		}
		if err := kubeproxyconfig.CheckMode(c.String("proxy-mode")); err != nil {
			return cfg, fmt.Errorf("--proxy-mode: %w", err)
		}
		cfg.MasqueradeMark = masqueradeMark(c.Int("iptables-masquerade-bit"))
		if adj := c.Int("oom-score-adj"); adj < -1000 || adj > 1000 {
			return cfg, fmt.Errorf("--oom-score-adj=%d: want -1000 to 1000", adj)
		}
		if cfg.SchedulerFlags, err = ipvs.ParseSchedulerFlags(cfg.Scheduler, c.String("ipvs-scheduler-flags")); err != nil {
			return cfg, fmt.Errorf("--ipvs-scheduler-flags: %w", err)
		}
		for _, name := range strings.Split(c.String("ipvs-allowed-schedulers"), ",") {
			if name = strings.TrimSpace(name); name != "" {
				cfg.AllowedSchedulers = append(cfg.AllowedSchedulers, name)
			}
		}
		cfg.AllowedSchedulersExplicit = len(cfg.AllowedSchedulers) > 0
		cfg.Conntrack.MaxPerCore = c.Int("conntrack-max-per-core")
		cfg.Conntrack.Min = c.Int("conntrack-min")
		cfg.Conntrack.TCPEstablishedTimeout = c.Duration("conntrack-tcp-timeout-established")
		cfg.Conntrack.TCPCloseWaitTimeout = c.Duration("conntrack-tcp-timeout-close-wait")
		cfg.Conntrack.TCPBeLiberal = c.Bool("conntrack-tcp-be-liberal")
		cfg.Conntrack.UDPTimeout = c.Duration("conntrack-udp-timeout")
		cfg.Conntrack.UDPStreamTimeout = c.Duration("conntrack-udp-timeout-stream")
	}
	for _, name := range []string{"metrics-bind-address", "healthz-bind-address", "inspect-bind-address"} {
		if v := c.String(name); v != "" {
			if _, _, err := net.SplitHostPort(v); err != nil {
				return cfg, fmt.Errorf("--%s=%q: %w", name, v, err)
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func parseCIDRs(flag, value string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(value, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--%s: %q is not a CIDR: %w", flag, s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// parseAddressesOrCIDRs reads a list of CIDRs and single addresses (each a
// CIDR of its one address).
func parseAddressesOrCIDRs(flag, value string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(value, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--%s: %q is neither an IP address nor a CIDR: %w", flag, s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// parsePortRange reads MIN-MAX; whether it is a range is Validate's.
func parsePortRange(value string) (uint16, uint16, error) {
	lo, hi, ok := strings.Cut(value, "-")
	a, err1 := strconv.ParseUint(strings.TrimSpace(lo), 10, 16)
	b, err2 := strconv.ParseUint(strings.TrimSpace(hi), 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("--service-node-port-range=%q: want MIN-MAX within 1-65535", value)
	}
	return uint16(a), uint16(b), nil
}

// masqueradeMark is the fwmark of a bit number; 0, which Validate refuses,
// for a number that is no bit of 32.
func masqueradeMark(bit int) uint32 {
	if bit < 0 || bit > 31 {
		return 0
	}
	return 1 << bit
}

// setVerbosity sets klog's -v, which has no setter of its own.
func setVerbosity(v int) error {
	if v < 0 {
		return fmt.Errorf("--v=%d must not be negative", v)
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	return fs.Set("v", strconv.Itoa(v))
}
