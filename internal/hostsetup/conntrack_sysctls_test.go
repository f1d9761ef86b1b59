package hostsetup

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

// kube-proxy's getConntrackMax: max(maxPerCore × CPUs, min), capped.
func TestConntrackMax(t *testing.T) {
	for _, c := range []struct {
		perCore, min, cpus, want int
	}{
		{32768, 131072, 2, 131072},   // the defaults on a small node: the floor
		{32768, 131072, 8, 262144},   // scaled
		{32768, 131072, 64, 1048576}, // capped (2097152 scaled)
		{0, 131072, 8, 0},            // maxPerCore 0 leaves nf_conntrack_max
		{65536, 0, 4, 262144},
	} {
		s := ipvsproxy.ConntrackSettings{MaxPerCore: c.perCore, Min: c.min, CPUs: c.cpus}
		if got := conntrackMax(s); got != c.want {
			t.Errorf("perCore %d min %d cpus %d: max %d, want %d", c.perCore, c.min, c.cpus, got, c.want)
		}
	}
}

func TestCountCPUList(t *testing.T) {
	for list, want := range map[string]int{"0": 1, "0-3": 4, "0-3,6,8-9": 7, "": 0, "x": 0, "3-1": 0} {
		if got := countCPUList(list); got != want {
			t.Errorf("countCPUList(%q) = %d, want %d", list, got, want)
		}
	}
}

func conntrackFake() *sysctl.Fake {
	return sysctl.NewFake(map[string]string{
		"net.netfilter.nf_conntrack_max": "65536", "net.netfilter.nf_conntrack_buckets": "16384",
		"net.netfilter.nf_conntrack_tcp_timeout_established": "432000",
		"net.netfilter.nf_conntrack_tcp_timeout_close_wait":  "60",
		"net.netfilter.nf_conntrack_tcp_be_liberal":          "0",
		"net.netfilter.nf_conntrack_udp_timeout":             "30", "net.netfilter.nf_conntrack_udp_timeout_stream": "120",
	})
}

// The defaults write what kube-proxy writes on every start; a zero value
// (UDP timeouts by default) leaves the kernel's.
func TestConntrackDefaultsAsKubeProxy(t *testing.T) {
	f := conntrackFake()
	s := ipvsproxy.DefaultConntrack()
	s.CPUs = 8
	if err := applyConntrackSysctls(f, s); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"net.netfilter.nf_conntrack_max":                     "262144",
		"net.netfilter.nf_conntrack_buckets":                 "65536", // max/4, grown
		"net.netfilter.nf_conntrack_tcp_timeout_established": "86400",
		"net.netfilter.nf_conntrack_tcp_timeout_close_wait":  "3600",
		"net.netfilter.nf_conntrack_tcp_be_liberal":          "0",
		"net.netfilter.nf_conntrack_udp_timeout":             "30",
		"net.netfilter.nf_conntrack_udp_timeout_stream":      "120",
	} {
		if got, _ := f.Get(name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	// Everything set, and buckets already large enough are not shrunk.
	f = conntrackFake()
	f.Values["net.netfilter.nf_conntrack_buckets"] = "1000000"
	s = ipvsproxy.ConntrackSettings{MaxPerCore: 1, Min: 100, CPUs: 1, TCPEstablishedTimeout: time.Hour, TCPCloseWaitTimeout: time.Minute,
		TCPBeLiberal: true, UDPTimeout: 10 * time.Second, UDPStreamTimeout: time.Minute}
	if err := applyConntrackSysctls(f, s); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"net.netfilter.nf_conntrack_max": "100", "net.netfilter.nf_conntrack_buckets": "1000000",
		"net.netfilter.nf_conntrack_tcp_timeout_established": "3600", "net.netfilter.nf_conntrack_tcp_timeout_close_wait": "60",
		"net.netfilter.nf_conntrack_tcp_be_liberal": "1", "net.netfilter.nf_conntrack_udp_timeout": "10",
		"net.netfilter.nf_conntrack_udp_timeout_stream": "60",
	} {
		if got, _ := f.Get(name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	// Without nf_conntrack loaded the parameters do not exist: not fatal.
	if err := applyConntrackSysctls(sysctl.NewFake(nil), ipvsproxy.DefaultConntrack()); err != nil {
		t.Errorf("no nf_conntrack: %v", err)
	}
}

func TestPrepareAppliesConntrack(t *testing.T) {
	sys := conntrackFake()
	for name, value := range ipvsSysctlsFake().Values {
		sys.Values[name] = value
	}
	k := adapters.Kernel{Netif: netif.NewFake(owned.DummyInterface), IPVS: ipvs.NewFake(), Sysctl: sys}
	if _, err := Prepare(ipvsproxy.DefaultConfig(), k, "6.12.38+deb12-amd64"); err != nil {
		t.Fatal(err)
	}
	if got, _ := sys.Get("net.netfilter.nf_conntrack_tcp_timeout_established"); got != "86400" {
		t.Errorf("established timeout %s, want 86400", got)
	}
}

// ipvsSysctlsFake holds the sysctls Prepare sets for IPVS, at a kernel's
// defaults.
func ipvsSysctlsFake() *sysctl.Fake {
	return sysctl.NewFake(map[string]string{
		"net.ipv4.vs.conntrack": "0", "net.ipv4.vs.expire_nodest_conn": "0",
		"net.ipv4.vs.expire_quiescent_template": "0", "net.ipv4.ip_forward": "0",
		"net.ipv4.vs.conn_reuse_mode": "1", "net.ipv4.conf.all.arp_ignore": "0",
		"net.ipv4.conf.all.arp_announce": "0", "net.ipv6.conf.all.forwarding": "0",
	})
}

// On the kernel, in a fresh network namespace: the timeouts are per
// namespace and written; nf_conntrack_max is read-only outside the initial
// namespace, which must be a warning and not stop the start.
func TestConntrackSysctlsInNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root")
	}
	// The module may not be loaded yet on a fresh host: nothing else in this
	// package needs it before this test.
	exec.Command("modprobe", "nf_conntrack").Run()
	if _, err := os.Stat("/proc/sys/net/netfilter/nf_conntrack_max"); err != nil {
		kerneltest.Skip(t, kerneltest.NoKernelFeature, "nf_conntrack not loaded: %v", err)
	}
	// /proc/sys/net shows the namespace of the thread that opens the file.
	netnstest.In(t, netnstest.New(t), func() {
		sys := sysctl.New()
		before, _ := sys.Get("net.netfilter.nf_conntrack_max")
		s := ipvsproxy.ConntrackSettings{MaxPerCore: 1 << 20, Min: 1, CPUs: 1, TCPEstablishedTimeout: 2 * time.Hour, TCPCloseWaitTimeout: 30 * time.Minute,
			TCPBeLiberal: true, UDPTimeout: 45 * time.Second, UDPStreamTimeout: 3 * time.Minute}
		if err := applyConntrackSysctls(sys, s); err != nil {
			t.Fatalf("apply in a namespace: %v", err)
		}
		for name, want := range map[string]string{
			"net.netfilter.nf_conntrack_max":                     before, // read-only here
			"net.netfilter.nf_conntrack_tcp_timeout_established": "7200",
			"net.netfilter.nf_conntrack_tcp_timeout_close_wait":  "1800",
			"net.netfilter.nf_conntrack_tcp_be_liberal":          "1",
			"net.netfilter.nf_conntrack_udp_timeout":             "45",
			"net.netfilter.nf_conntrack_udp_timeout_stream":      "180",
		} {
			if got, err := sys.Get(name); got != want {
				t.Errorf("%s = %s (%v), want %s", name, got, err, want)
			}
		}
	})
}
