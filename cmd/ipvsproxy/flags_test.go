package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/hostsetup"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/urfave/cli/v2"
)

// parse runs the run command's flag parsing on args and returns the config.
func parse(t *testing.T, args ...string) (ipvsproxy.Config, error) {
	t.Helper()
	var cfg ipvsproxy.Config
	var parseErr error
	app := newApp()
	app.Writer, app.ErrWriter = &bytes.Buffer{}, &bytes.Buffer{}
	for _, c := range app.Commands {
		if c.Name == "run" {
			c.Action = func(c *cli.Context) error {
				cfg, _, parseErr = loadConfig(c)
				return nil
			}
		}
	}
	if err := app.Run(append([]string{"ipvsproxy", "run"}, args...)); err != nil {
		return cfg, err
	}
	return cfg, parseErr
}

func TestFlagsFollowKubeProxyDefaults(t *testing.T) {
	cfg, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Scheduler != "twos" || cfg.SyncPeriod != 30*time.Second || cfg.MinSyncPeriod != 100*time.Millisecond ||
		cfg.MasqueradeMark != 0x4000 || cfg.NodePortMin != 30000 || cfg.NodePortMax != 32767 {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestFlagsParse(t *testing.T) {
	cfg, err := parse(t, "--cluster-cidr=10.244.0.0/16,fd00:244::/56", "--nodeport-addresses=198.51.100.0/24",
		"--ipvs-exclude-cidrs=203.0.113.0/28", "--ipvs-scheduler=rr", "--masquerade-all", "--ipvs-strict-arp", "--accept-service-traffic",
		"--ipvs-sync-period=1m", "--ipvs-min-sync-period=2s", "--ipvs-resync-shares=10", "--ipvs-udp-timeout=10s", "--ipvs-drain-timeout=30s", "--service-node-port-range=31000-31999",
		"--external-ip-cidrs=203.0.113.0/25", "--service-cidrs=10.96.0.0/16", "--ipvs-allowed-schedulers=mh, sh",
		"--protect-addresses=192.0.2.253, 2001:db8::253,::ffff:192.0.2.9,198.51.100.0/28",
		"--refuse-endpoint-cidrs=100.100.100.200,fd00:ec2::254/128", "--refuse-node-endpoints")
	if err != nil {
		t.Fatal(err)
	}
	want := ipvsproxy.DefaultConfig()
	want.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/56")}
	// A family without a CIDR in the list keeps NodePorts on all its addresses.
	want.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("::/0")}
	want.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/28")}
	want.Scheduler, want.SchedulerExplicit, want.MasqueradeAll, want.StrictARP, want.AcceptServiceTraffic = "rr", true, true, true, true
	want.SyncPeriod, want.MinSyncPeriod, want.UDPTimeout = time.Minute, 2*time.Second, 10*time.Second
	want.NodePortMin, want.NodePortMax = 31000, 31999
	want.ResyncShares = 10
	want.DrainTimeout = 30 * time.Second
	want.ExternalIPCIDRs = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/25")}
	want.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}
	want.AllowedSchedulers, want.AllowedSchedulersExplicit = []string{"mh", "sh"}, true
	want.ProtectAddresses = []netip.Prefix{netip.MustParsePrefix("192.0.2.253/32"), netip.MustParsePrefix("2001:db8::253/128"),
		netip.MustParsePrefix("192.0.2.9/32"), netip.MustParsePrefix("198.51.100.0/28")}
	want.RefuseEndpointCIDRs = []netip.Prefix{netip.MustParsePrefix("100.100.100.200/32"), netip.MustParsePrefix("fd00:ec2::254/128")}
	want.RefuseNodeEndpoints = true
	if got, w := strings.ReplaceAll(sprint(cfg), " ", ""), strings.ReplaceAll(sprint(want), " ", ""); got != w {
		t.Fatalf("got  %s\nwant %s", got, w)
	}
}

func TestDetectLocalFlags(t *testing.T) {
	cfg, err := parse(t, "--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=cali")
	if err != nil || cfg.DetectLocalMode != ipvsproxy.DetectLocalInterfaceNamePrefix || cfg.PodInterfaceNamePrefix != "cali" {
		t.Fatalf("got %q %q, %v", cfg.DetectLocalMode, cfg.PodInterfaceNamePrefix, err)
	}
	cfg, err = parse(t, "--detect-local-mode=BridgeInterface", "--pod-bridge-interface=cbr0")
	if err != nil || cfg.DetectLocalMode != ipvsproxy.DetectLocalBridgeInterface || cfg.PodBridgeInterface != "cbr0" {
		t.Fatalf("got %q %q, %v", cfg.DetectLocalMode, cfg.PodBridgeInterface, err)
	}
	if _, err := parse(t, "--detect-local-mode=BridgeInterface"); err == nil || !strings.Contains(err.Error(), "pod bridge interface") {
		t.Fatalf("BridgeInterface without a bridge: %v", err)
	}
}

func TestBadFlagsAreClearErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster-cidr=10.244.0.0/33"}, `--cluster-cidr: "10.244.0.0/33" is not a CIDR`},
		{[]string{"--nodeport-addresses=nope"}, `--nodeport-addresses: "nope" is not a CIDR`},
		{[]string{"--service-node-port-range=32767-30000"}, "--service-node-port-range"},
		{[]string{"--service-node-port-range=0-70000"}, "--service-node-port-range"},
		{[]string{"--ipvs-min-sync-period=1m", "--ipvs-sync-period=30s"}, "--ipvs-min-sync-period=1m0s must be between 0 and --ipvs-sync-period=30s"},
		{[]string{"--ipvs-sync-period=0s"}, "--ipvs-sync-period=0s must be positive"},
		{[]string{"--ipvs-resync-shares=0"}, "--ipvs-resync-shares=0 must be between 1 and 100"},
		{[]string{"--ipvs-resync-shares=101"}, "--ipvs-resync-shares=101 must be between 1 and 100"},
		{[]string{"--ipvs-udp-timeout=-1s"}, "--ipvs-udp-timeout=-1s must not be negative"},
		{[]string{"--ipvs-drain-timeout=-1s"}, "--ipvs-drain-timeout=-1s must be between 0 and 24h0m0s"},
		{[]string{"--ipvs-drain-timeout=25h"}, "--ipvs-drain-timeout=25h0m0s must be between 0 and 24h0m0s"},
		{[]string{"--ipvs-scheduler="}, "--ipvs-scheduler: empty IPVS scheduler"},
		{[]string{"--ipvs-allowed-schedulers=rr,fastest"}, `--ipvs-allowed-schedulers: "fastest" is not an IPVS scheduler`},
		{[]string{"--ipset-max-elements=0"}, "--ipset-max-elements=0 must be between 1 and 2147483648"},
		{[]string{"--ipset-max-elements=2147483649"}, "--ipset-max-elements=2147483649 must be between 1 and 2147483648"},
		{[]string{"--iptables-masquerade-bit=32"}, "want --iptables-masquerade-bit 0-31"},
		{[]string{"--iptables-masquerade-bit=-1"}, "want --iptables-masquerade-bit 0-31"},
		{[]string{"--conntrack-udp-timeout=-1s"}, "--conntrack-udp-timeout=-1s must not be negative"},
		{[]string{"--metrics-bind-address=localhost"}, "--metrics-bind-address"},
		{[]string{"--protect-addresses=api.example.test"}, `--protect-addresses: "api.example.test" is neither an IP address nor a CIDR`},
	} {
		_, err := parse(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

func sprint(v any) string { return strings.TrimSpace(fmt.Sprint(v)) }

// A scheduler chosen by flag or environment is explicit (no fallback);
// the default is not: only the default may fall back to wrr.
func TestSchedulerExplicitByFlagOrEnvironment(t *testing.T) {
	if cfg, err := parse(t); err != nil || cfg.SchedulerExplicit {
		t.Fatalf("default: explicit=%v err=%v", cfg.SchedulerExplicit, err)
	}
	if cfg, err := parse(t, "--ipvs-scheduler=twos"); err != nil || !cfg.SchedulerExplicit {
		t.Fatalf("flag: explicit=%v err=%v", cfg.SchedulerExplicit, err)
	}
	t.Setenv("IPVSPROXY_IPVS_SCHEDULER", "rr")
	if cfg, err := parse(t); err != nil || !cfg.SchedulerExplicit || cfg.Scheduler != "rr" {
		t.Fatalf("environment: %q explicit=%v err=%v", cfg.Scheduler, cfg.SchedulerExplicit, err)
	}
}

// Without --ipvs-allowed-schedulers a Service may choose the schedulers
// the kernel has at start, read from its module lists; with it, the list.
func TestAllowedSchedulersDefaultToTheKernels(t *testing.T) {
	dir := t.TempDir()
	modules := filepath.Join(dir, "modules")
	if err := os.WriteFile(modules, []byte("ip_vs_twos 12288 3 - Live 0x0\nip_vs_rr 12288 0 - Live 0x0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := hostsetup.SchedulerSources{ProcModules: modules, SysModule: filepath.Join(dir, "none")}
	cfg, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	allowedSchedulers(&cfg, src)
	if !slices.Equal(cfg.AllowedSchedulers, []string{"rr", "twos"}) || cfg.AllowedSchedulersExplicit {
		t.Errorf("default: %v explicit=%v, want the kernel's rr and twos", cfg.AllowedSchedulers, cfg.AllowedSchedulersExplicit)
	}
	cfg, err = parse(t, "--ipvs-allowed-schedulers=mh")
	if err != nil {
		t.Fatal(err)
	}
	allowedSchedulers(&cfg, src)
	if !slices.Equal(cfg.AllowedSchedulers, []string{"mh"}) || !cfg.AllowedSchedulersExplicit {
		t.Errorf("flag: %v explicit=%v, want mh alone", cfg.AllowedSchedulers, cfg.AllowedSchedulersExplicit)
	}
}
