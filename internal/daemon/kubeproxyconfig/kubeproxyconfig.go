// Package kubeproxyconfig decodes kube-proxy's configuration file, a
// KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1, the config.conf
// of kubeadm's kube-system/kube-proxy ConfigMap), as kube-proxy does, naming
// the fields of a newer release it ignores (decode.go), and translates it
// into values of the flags of `ipvsproxy run`: each field it sets becomes the value of one flag, so
// everything after start-up sees flags only, and the fields ipvsproxy does
// not honour are returned with why, for one warning. Validation of the
// values is the flags' (Config.Validate), not this package's.
//
// A zero value in the file means "kube-proxy's default", which is also the
// flag's default: kubeadm writes every field, most of them zero
// (`syncPeriod: 0s`, `scheduler: ""`), and kube-proxy defaults them.
package kubeproxyconfig

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxy "k8s.io/kube-proxy/config/v1alpha1"
)

// Field is one field of KubeProxyConfiguration.
type Field struct {
	// Path is the field's YAML path, e.g. "ipvs.scheduler".
	Path string
	// Flag is the flag of `run` the field sets; "" when it is not honoured.
	Flag string
	// value is the field in the flag's syntax, "" when the file leaves it at
	// kube-proxy's default.
	value func(*kubeproxy.KubeProxyConfiguration) string
	// Why a field that is not honoured is not; named in the warning.
	Why string
}

type kpc = kubeproxy.KubeProxyConfiguration

// Fields has one line per field of KubeProxyConfiguration, in the order of
// its Go type; TestFieldsCoverKubeProxyConfiguration fails when a field is
// missing. A flag added to honour a field moves the field's Why into Flag.
var Fields = []Field{
	{"featureGates", "", func(k *kpc) string { return gates(k.FeatureGates) }, "ipvsproxy has no feature gates; what they switch in kube-proxy is either always on here or absent"},
	{"clientConnection.kubeconfig", "kubeconfig", func(k *kpc) string { return k.ClientConnection.Kubeconfig }, ""},
	{"clientConnection.acceptContentTypes", "kube-api-accept-content-types", func(k *kpc) string { return k.ClientConnection.AcceptContentTypes }, ""},
	{"clientConnection.contentType", "kube-api-content-type", func(k *kpc) string { return k.ClientConnection.ContentType }, ""},
	{"clientConnection.qps", "kube-api-qps", func(k *kpc) string { return nonZero(k.ClientConnection.QPS) }, ""},
	{"clientConnection.burst", "kube-api-burst", func(k *kpc) string { return nonZero(k.ClientConnection.Burst) }, ""},
	{"logging.format", "logging-format", func(k *kpc) string { return k.Logging.Format }, ""},
	{"logging.flushFrequency", "log-flush-frequency", func(k *kpc) string { return dur(k.Logging.FlushFrequency.Duration.Duration) }, ""},
	{"logging.verbosity", "v", func(k *kpc) string { return nonZero(k.Logging.Verbosity) }, ""},
	{"logging.vmodule", "vmodule", func(k *kpc) string { return vmodule(k) }, ""},
	{"logging.options.text.splitStream", "", func(k *kpc) string { return onOrUnset(k.Logging.Options.Text.SplitStream) }, "alpha in kube-proxy (LoggingAlphaOptions); logs go to stderr"},
	{"logging.options.text.infoBufferSize", "", func(k *kpc) string { return quantity(k.Logging.Options.Text.InfoBufferSize.String()) }, "alpha in kube-proxy (LoggingAlphaOptions); logs are not buffered"},
	{"logging.options.json.splitStream", "", func(k *kpc) string { return onOrUnset(k.Logging.Options.JSON.SplitStream) }, "alpha in kube-proxy (LoggingAlphaOptions); logs go to stderr"},
	{"logging.options.json.infoBufferSize", "", func(k *kpc) string { return quantity(k.Logging.Options.JSON.InfoBufferSize.String()) }, "alpha in kube-proxy (LoggingAlphaOptions); logs are not buffered"},
	{"hostnameOverride", "hostname-override", func(k *kpc) string { return k.HostnameOverride }, ""},
	{"bindAddress", "", func(k *kpc) string { return specificAddress(k.BindAddress) }, "ipvsproxy finds the node's addresses itself (--ip-families); only the family of 0.0.0.0 or :: chooses the default metrics and healthz addresses"},
	{"healthzBindAddress", "healthz-bind-address", func(k *kpc) string { return withPort(k.HealthzBindAddress, k.BindAddress, "0.0.0.0", "::", "10256") }, ""},
	{"metricsBindAddress", "metrics-bind-address", func(k *kpc) string { return withPort(k.MetricsBindAddress, k.BindAddress, "127.0.0.1", "::1", "10249") }, ""},
	{"bindAddressHardFail", "bind-address-hard-fail", func(k *kpc) string { return onOrUnset(k.BindAddressHardFail) }, ""},
	{"enableProfiling", "profiling", func(k *kpc) string { return onOrUnset(k.EnableProfiling) }, ""},
	{"showHiddenMetricsForVersion", "", func(k *kpc) string { return k.ShowHiddenMetricsForVersion }, "ipvsproxy hides no metrics"},
	{"mode", "proxy-mode", func(k *kpc) string { return string(k.Mode) }, ""},
	{"iptables.masqueradeBit", "iptables-masquerade-bit", func(k *kpc) string { return ptrInt(k.IPTables.MasqueradeBit) }, ""},
	{"iptables.masqueradeAll", "masquerade-all", func(k *kpc) string { return onOrUnset(k.IPTables.MasqueradeAll) }, ""},
	{"iptables.localhostNodePorts", "", func(k *kpc) string { return ptrBool(k.IPTables.LocalhostNodePorts) }, "the iptables mode's; kube-proxy's IPVS mode has no NodePorts on 127.0.0.1 either"},
	{"iptables.syncPeriod", "", func(k *kpc) string { return dur(k.IPTables.SyncPeriod.Duration) }, "the iptables mode's; ipvs.syncPeriod applies"},
	{"iptables.minSyncPeriod", "", func(k *kpc) string { return dur(k.IPTables.MinSyncPeriod.Duration) }, "the iptables mode's; ipvs.minSyncPeriod applies"},
	{"ipvs.syncPeriod", "ipvs-sync-period", func(k *kpc) string { return dur(k.IPVS.SyncPeriod.Duration) }, ""},
	{"ipvs.minSyncPeriod", "ipvs-min-sync-period", func(k *kpc) string { return dur(k.IPVS.MinSyncPeriod.Duration) }, ""},
	{"ipvs.scheduler", "ipvs-scheduler", func(k *kpc) string { return k.IPVS.Scheduler }, ""},
	{"ipvs.excludeCIDRs", "ipvs-exclude-cidrs", func(k *kpc) string { return strings.Join(k.IPVS.ExcludeCIDRs, ",") }, ""},
	{"ipvs.strictARP", "ipvs-strict-arp", func(k *kpc) string { return onOrUnset(k.IPVS.StrictARP) }, ""},
	{"ipvs.tcpTimeout", "ipvs-tcp-timeout", func(k *kpc) string { return dur(k.IPVS.TCPTimeout.Duration) }, ""},
	{"ipvs.tcpFinTimeout", "ipvs-tcpfin-timeout", func(k *kpc) string { return dur(k.IPVS.TCPFinTimeout.Duration) }, ""},
	{"ipvs.udpTimeout", "ipvs-udp-timeout", func(k *kpc) string { return dur(k.IPVS.UDPTimeout.Duration) }, ""},
	{"nftables.masqueradeBit", "", func(k *kpc) string { return ptrInt(k.NFTables.MasqueradeBit) }, "the nftables mode's; iptables.masqueradeBit applies"},
	{"nftables.masqueradeAll", "", func(k *kpc) string { return onOrUnset(k.NFTables.MasqueradeAll) }, "the nftables mode's; iptables.masqueradeAll applies"},
	{"nftables.syncPeriod", "", func(k *kpc) string { return dur(k.NFTables.SyncPeriod.Duration) }, "the nftables mode's; ipvs.syncPeriod applies"},
	{"nftables.minSyncPeriod", "", func(k *kpc) string { return dur(k.NFTables.MinSyncPeriod.Duration) }, "the nftables mode's; ipvs.minSyncPeriod applies"},
	{"winkernel.networkName", "", func(k *kpc) string { return k.Winkernel.NetworkName }, "Windows only"},
	{"winkernel.sourceVip", "", func(k *kpc) string { return k.Winkernel.SourceVip }, "Windows only"},
	{"winkernel.enableDSR", "", func(k *kpc) string { return onOrUnset(k.Winkernel.EnableDSR) }, "Windows only"},
	{"winkernel.rootHnsEndpointName", "", func(k *kpc) string { return k.Winkernel.RootHnsEndpointName }, "Windows only"},
	{"winkernel.forwardHealthCheckVip", "", func(k *kpc) string { return onOrUnset(k.Winkernel.ForwardHealthCheckVip) }, "Windows only"},
	{"detectLocalMode", "detect-local-mode", func(k *kpc) string { return string(k.DetectLocalMode) }, ""},
	{"detectLocal.bridgeInterface", "pod-bridge-interface", func(k *kpc) string { return k.DetectLocal.BridgeInterface }, ""},
	{"detectLocal.interfaceNamePrefix", "pod-interface-name-prefix", func(k *kpc) string { return k.DetectLocal.InterfaceNamePrefix }, ""},
	{"clusterCIDR", "cluster-cidr", func(k *kpc) string { return k.ClusterCIDR }, ""},
	{"nodePortAddresses", "nodeport-addresses", func(k *kpc) string { return strings.Join(k.NodePortAddresses, ",") }, ""},
	{"oomScoreAdj", "oom-score-adj", func(k *kpc) string { return ptrInt(k.OOMScoreAdj) }, ""},
	{"conntrack.maxPerCore", "conntrack-max-per-core", func(k *kpc) string { return ptrInt(k.Conntrack.MaxPerCore) }, ""},
	{"conntrack.min", "conntrack-min", func(k *kpc) string { return ptrInt(k.Conntrack.Min) }, ""},
	{"conntrack.tcpEstablishedTimeout", "conntrack-tcp-timeout-established", func(k *kpc) string { return ptrDur(k.Conntrack.TCPEstablishedTimeout) }, ""},
	{"conntrack.tcpCloseWaitTimeout", "conntrack-tcp-timeout-close-wait", func(k *kpc) string { return ptrDur(k.Conntrack.TCPCloseWaitTimeout) }, ""},
	{"conntrack.tcpBeLiberal", "conntrack-tcp-be-liberal", func(k *kpc) string { return onOrUnset(k.Conntrack.TCPBeLiberal) }, ""},
	{"conntrack.udpTimeout", "conntrack-udp-timeout", func(k *kpc) string { return dur(k.Conntrack.UDPTimeout.Duration) }, ""},
	{"conntrack.udpStreamTimeout", "conntrack-udp-timeout-stream", func(k *kpc) string { return dur(k.Conntrack.UDPStreamTimeout.Duration) }, ""},
	{"configSyncPeriod", "", func(k *kpc) string { return dur(k.ConfigSyncPeriod.Duration) }, "informers never resync: every change arrives by watch, and ipvs.syncPeriod re-checks the kernel"},
	{"portRange", "", func(k *kpc) string { return k.PortRange }, "unused by kube-proxy too since the userspace mode was removed"},
	{"windowsRunAsService", "", func(k *kpc) string { return onOrUnset(k.WindowsRunAsService) }, "Windows only"},
}

// FlagsWithoutField are the flags of `run` that no KubeProxyConfiguration
// field sets, with why: ipvsproxy's own settings, or kube-proxy settings it
// takes elsewhere. TestEveryRunFlagHasAFieldOrIsOursOnly (cmd/ipvsproxy)
// fails when a flag is in neither this list nor Fields, so a new flag is a
// decision.
var FlagsWithoutField = map[string]string{
	"config":                              "the file itself",
	"external-ip-cidrs":                   "ipvsproxy only; kube-proxy leaves external IPs to admission (DenyServiceExternalIPs, CVE-2020-8554)",
	"service-cidrs":                       "ipvsproxy only; kube-proxy takes no Service ranges (the API server's --service-cluster-ip-range)",
	"ip-families":                         "ipvsproxy only; kube-proxy takes the families of the node's addresses, as --ip-families=auto does",
	"ipset-max-elements":                  "ipvsproxy only; kube-proxy creates its sets with the kernel's default maxelem (65536)",
	"ipset-max-elements-per-service":      "ipvsproxy only; kube-proxy lets one Service fill a set",
	"ipset-max-elements-per-namespace":    "ipvsproxy only; kube-proxy lets one namespace fill a set",
	"ipvs-max-real-servers":               "ipvsproxy only; kube-proxy programs every real server",
	"ipvs-max-real-servers-per-service":   "ipvsproxy only; kube-proxy programs every real server of a Service",
	"ipvs-max-real-servers-per-namespace": "ipvsproxy only; kube-proxy programs every real server of a namespace",
	"ipvs-scheduler-flags":                "ipvsproxy only; kube-proxy cannot set the sh and mh flags",
	"ipvs-allowed-schedulers":             "ipvsproxy only; kube-proxy has no scheduler per Service",
	"ipvs-resync-shares":                  "ipvsproxy only; kube-proxy re-checks everything every ipvs.syncPeriod",
	"ipvs-drain-timeout":                  "ipvsproxy only; kube-proxy waits for a removed endpoint's connections without limit and cuts a deleted Service's at once",
	"service-node-port-range":             "the API server's flag; kube-proxy reads no NodePort range",
	"sysctl-root":                         "ipvsproxy only: where /proc/sys is mounted in the container",
	"metrics-per-service":                 "ipvsproxy only: per-Service IPVS counters",
	"inspect-endpoint":                    "ipvsproxy only: the read-only /inspect/ endpoint",
	"inspect-bind-address":                "ipvsproxy only: where the read-only /inspect/ endpoint listens (loopback by default, whatever metricsBindAddress)",
	"lock-file":                           "ipvsproxy only: the node lock that keeps a second instance from writing the kernel",
	"lock-timeout":                        "ipvsproxy only: how long a second instance waits for the node lock",
	"protect-addresses":                   "ipvsproxy only; kube-proxy binds any address a Service names",
	"accept-service-traffic":              "ipvsproxy only; kube-proxy always returns Service traffic to the host's INPUT rules",
	"refuse-endpoint-cidrs":               "ipvsproxy only; kube-proxy takes every endpoint address the API accepted",
	"refuse-node-endpoints":               "ipvsproxy only; kube-proxy takes every endpoint address the API accepted",
	"node-addresses-from":                 "ipvsproxy only; kube-proxy has no address guard and watches its own Node alone",
	"node-addresses-namespace":            "ipvsproxy only: where the published Node addresses are",
}

// Setting is one field a file sets, in the syntax of its flag.
type Setting struct {
	Path, Value string
	// Flag is the flag of `run` it sets; "" when it is not honoured, and
	// then Why says why.
	Flag, Why string
}

// Translate returns the fields file sets, in the order of Fields: each with
// the value of its flag, kube-proxy's defaulting applied (a field left at
// kube-proxy's default is not returned, so the flag's own default stays).
// It reads nothing but file.
func Translate(file *kubeproxy.KubeProxyConfiguration) []Setting {
	var out []Setting
	for _, f := range Fields {
		if v := f.value(file); v != "" {
			out = append(out, Setting{Path: f.Path, Value: v, Flag: f.Flag, Why: f.Why})
		}
	}
	return out
}

// Field values in flag syntax; "" means "left at kube-proxy's default".

func dur(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func ptrDur(d *metav1.Duration) string {
	if d == nil {
		return ""
	}
	// An explicit 0 leaves the kernel's value, as in kube-proxy.
	return d.Duration.String()
}

func ptrInt(p *int32) string {
	if p == nil {
		return ""
	}
	return fmt.Sprint(*p)
}

func ptrBool(p *bool) string {
	if p == nil {
		return ""
	}
	return fmt.Sprint(*p)
}

func nonZero[T ~int32 | ~uint32 | ~float32](v T) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprint(v)
}

func onOrUnset(b bool) string {
	if !b {
		return ""
	}
	return "true"
}

func quantity(q string) string {
	if q == "0" || q == "" {
		return ""
	}
	return q
}

func gates(m map[string]bool) string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%t", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func vmodule(k *kpc) string {
	var out []string
	for _, v := range k.Logging.VModule {
		out = append(out, fmt.Sprintf("%s=%d", v.FilePattern, v.Verbosity))
	}
	return strings.Join(out, ",")
}

// specificAddress is bindAddress unless it is one of the "any" addresses
// kubeadm and kube-proxy default to.
func specificAddress(a string) string {
	switch a {
	case "", "0.0.0.0", "::":
		return ""
	}
	return a
}

// withPort applies kube-proxy's defaulting of healthzBindAddress and
// metricsBindAddress: empty means the default address of bindAddress's
// family, and a bare IP gets the default port. "" is returned for the
// IPv4 default so the flag's own default stays.
func withPort(addr, bind, v4, v6, port string) string {
	if addr == "" {
		if ip := net.ParseIP(bind); ip != nil && ip.To4() == nil {
			return net.JoinHostPort(v6, port)
		}
		return ""
	}
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	return net.JoinHostPort(strings.Trim(addr, "[]"), port)
}
