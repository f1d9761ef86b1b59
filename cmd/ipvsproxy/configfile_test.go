package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/daemon/kubeproxyconfig"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"github.com/urfave/cli/v2"
)

// runWith runs `ipvsproxy run ARGS` up to the end of loadConfig and returns
// the Config, the values of every flag of run as the action saw them, and
// what the file did.
type parsed struct {
	cfg    ipvsproxy.Config
	flags  map[string]string
	result configFileResult
}

func runWith(t *testing.T, args ...string) (parsed, error) {
	t.Helper()
	var p parsed
	var actionErr error
	app := newApp()
	app.Writer, app.ErrWriter = &bytes.Buffer{}, &bytes.Buffer{}
	for _, c := range app.Commands {
		if c.Name == "run" {
			c.Action = func(c *cli.Context) error {
				var source configSource
				p.cfg, source, actionErr = loadConfig(c)
				p.result = source.applied
				p.flags = map[string]string{}
				for _, f := range c.Command.Flags {
					name := f.Names()[0]
					p.flags[name] = fmt.Sprint(c.Value(name))
				}
				return nil
			}
		}
	}
	if err := app.Run(append([]string{"ipvsproxy", "run"}, args...)); err != nil {
		return p, err
	}
	return p, actionErr
}

// kubeadm v1.36's config.conf (kube-system/kube-proxy ConfigMap, made with
// podSubnet 10.244.0.0/16) must give exactly the defaults plus clusterCIDR
// and the kubeconfig, and warn about nothing: every other field is zero,
// which means kube-proxy's default.
func TestKubeadmDefaultConfig(t *testing.T) {
	p, err := runWith(t, "--config=testdata/kubeadm-config.conf")
	if err != nil {
		t.Fatal(err)
	}
	want := ipvsproxy.DefaultConfig()
	want.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	if !reflect.DeepEqual(p.cfg, want) {
		t.Errorf("config:\n got %+v\nwant %+v", p.cfg, want)
	}
	defaults, err := runWith(t)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range p.flags {
		wantV := defaults.flags[name]
		switch name {
		case "config":
			wantV = "testdata/kubeadm-config.conf"
		case "kubeconfig":
			wantV = "/var/lib/kube-proxy/kubeconfig.conf"
		case "cluster-cidr":
			wantV = "10.244.0.0/16"
		}
		if v != wantV {
			t.Errorf("--%s = %q, want %q", name, v, wantV)
		}
	}
	if len(p.result.Ignored) != 0 || len(p.result.Overridden) != 0 {
		t.Errorf("kubeadm's default file: ignored %q, overridden %q; want neither", p.result.Ignored, p.result.Overridden)
	}
}

// A customised file: every field it sets, checked one by one.
func TestCustomisedConfigFieldByField(t *testing.T) {
	p, err := runWith(t, "--config=testdata/custom-config.conf")
	if err != nil {
		t.Fatal(err)
	}
	c := p.cfg
	checks := []struct {
		field string
		got   any
		want  any
	}{
		{"clusterCIDR", c.ClusterCIDRs, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")}},
		{"nodePortAddresses", c.NodePortAddresses, []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8::/64")}},
		{"ipvs.scheduler", c.Scheduler, "mh"},
		{"ipvs.strictARP", c.StrictARP, true},
		{"ipvs.syncPeriod", c.SyncPeriod, time.Minute},
		{"ipvs.minSyncPeriod", c.MinSyncPeriod, 5 * time.Second},
		{"ipvs.excludeCIDRs", c.ExcludeCIDRs, []netip.Prefix{netip.MustParsePrefix("203.0.113.0/28")}},
		{"ipvs.tcpTimeout", c.TCPTimeout, 15 * time.Minute},
		{"ipvs.tcpFinTimeout", c.TCPFinTimeout, time.Minute},
		{"ipvs.udpTimeout", c.UDPTimeout, 20 * time.Second},
		{"iptables.masqueradeAll", c.MasqueradeAll, true},
		{"iptables.masqueradeBit", c.MasqueradeMark, uint32(1 << 13)},
		{"conntrack.maxPerCore", c.Conntrack.MaxPerCore, 65536},
		{"conntrack.min", c.Conntrack.Min, 262144},
		{"conntrack.tcpEstablishedTimeout", c.Conntrack.TCPEstablishedTimeout, 2 * time.Hour},
		{"conntrack.tcpCloseWaitTimeout", c.Conntrack.TCPCloseWaitTimeout, 30 * time.Minute},
		{"conntrack.tcpBeLiberal", c.Conntrack.TCPBeLiberal, true},
		{"conntrack.udpTimeout", c.Conntrack.UDPTimeout, 45 * time.Second},
		{"conntrack.udpStreamTimeout", c.Conntrack.UDPStreamTimeout, 3 * time.Minute},
		{"clientConnection.kubeconfig", p.flags["kubeconfig"], "/var/lib/kube-proxy/kubeconfig.conf"},
		{"clientConnection.contentType", p.flags["kube-api-content-type"], "application/json"},
		{"clientConnection.qps", p.flags["kube-api-qps"], "20"},
		{"clientConnection.burst", p.flags["kube-api-burst"], "40"},
		{"enableProfiling", p.flags["profiling"], "true"},
		{"bindAddressHardFail", p.flags["bind-address-hard-fail"], "true"},
		{"detectLocalMode", c.DetectLocalMode, ipvsproxy.LocalDetectMode("InterfaceNamePrefix")},
		{"detectLocal.interfaceNamePrefix", c.PodInterfaceNamePrefix, "veth"},
		// kube-proxy appends the default port to a bare address.
		{"healthzBindAddress", p.flags["healthz-bind-address"], "0.0.0.0:10256"},
		{"metricsBindAddress", p.flags["metrics-bind-address"], "0.0.0.0:10249"},
		{"hostnameOverride", p.flags["hostname-override"], "Node-7"},
		{"logging.format", p.flags["logging-format"], "text"},
		{"logging.verbosity", p.flags["v"], "3"},
		{"logging.vmodule", p.flags["vmodule"], "reconcile*=5"},
		{"mode", p.flags["proxy-mode"], "ipvs"},
		{"oomScoreAdj", p.flags["oom-score-adj"], "-500"},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s: got %v, want %v", ch.field, ch.got, ch.want)
		}
	}
	wantIgnored := []string{
		"configSyncPeriod=10m0s",
		"winkernel.enableDSR=true",
	}
	var gotIgnored []string
	for _, s := range p.result.Ignored {
		gotIgnored = append(gotIgnored, strings.SplitN(s, " (", 2)[0])
	}
	sort.Strings(gotIgnored)
	if !reflect.DeepEqual(gotIgnored, wantIgnored) {
		t.Errorf("ignored fields: got %q, want %q", gotIgnored, wantIgnored)
	}
}

func TestExplicitFlagsOverrideTheFile(t *testing.T) {
	t.Setenv("IPVSPROXY_IPVS_STRICT_ARP", "false")
	p, err := runWith(t, "--config=testdata/custom-config.conf", "--ipvs-scheduler=rr", "--conntrack-min=1000")
	if err != nil {
		t.Fatal(err)
	}
	if p.cfg.Scheduler != "rr" || p.cfg.Conntrack.Min != 1000 || p.cfg.StrictARP {
		t.Errorf("flags did not win: scheduler %s, conntrack min %d, strictARP %t", p.cfg.Scheduler, p.cfg.Conntrack.Min, p.cfg.StrictARP)
	}
	// Fields without an explicit flag still come from the file.
	if p.cfg.SyncPeriod != time.Minute {
		t.Errorf("sync period %v, want the file's 1m", p.cfg.SyncPeriod)
	}
	sort.Strings(p.result.Overridden)
	want := []string{"conntrack.min by --conntrack-min", "ipvs.scheduler by --ipvs-scheduler", "ipvs.strictARP by --ipvs-strict-arp"}
	if !reflect.DeepEqual(p.result.Overridden, want) {
		t.Errorf("overridden: got %q, want %q", p.result.Overridden, want)
	}
}

func TestBadConfigFilesAreClearErrors(t *testing.T) {
	kubeadm, err := os.ReadFile("testdata/kubeadm-config.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, content, want string
	}{
		// A known field in another case would be lost silently by the case-sensitive decoder.
		{"known field in another case", strings.Replace(string(kubeadm), "  strictARP: false", "  strictArp: true", 1), `unknown field "ipvs.strictArp": field names are case-sensitive; did you mean "ipvs.strictARP"?`},
		{"known field with an underscore", string(kubeadm) + "cluster_cidr: 10.0.0.0/8\n", `did you mean "clusterCIDR"?`},
		{"duplicate field", string(kubeadm) + "clusterCIDR: 10.0.0.0/8\n", `key "clusterCIDR" already set`},
		{"iptables mode", strings.Replace(string(kubeadm), `mode: ""`, "mode: iptables", 1), `mode: "iptables": ipvsproxy implements only the ipvs mode; set it to ipvs, or run with --proxy-mode=ipvs`},
		{"nftables mode", strings.Replace(string(kubeadm), `mode: ""`, "mode: nftables", 1), `"nftables": ipvsproxy implements only the ipvs mode`},
		{"other kind", strings.Replace(string(kubeadm), "kind: KubeProxyConfiguration", "kind: KubeletConfiguration", 1), "KubeletConfiguration"},
		{"other version", strings.Replace(string(kubeadm), "v1alpha1", "v1beta1", 1), "v1beta1"},
		{"bad value", strings.Replace(string(kubeadm), "syncPeriod: 0s\n  tcpFinTimeout", "syncPeriod: 30\n  tcpFinTimeout", 1), "ipvs.syncPeriod"},
		{"bad CIDR", strings.Replace(string(kubeadm), "10.244.0.0/16", "10.244.0.0/33", 1), `--cluster-cidr: "10.244.0.0/33" is not a CIDR`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.conf")
			if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := runWith(t, "--config="+path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	if _, err := runWith(t, "--config=testdata/missing.conf"); err == nil || !strings.Contains(err.Error(), "read --config") {
		t.Errorf("missing file: got %v", err)
	}
}

// Fields this build does not know, as a newer kube-proxy or kubeadm writes
// them, are ignored with one warning naming each (and the known field a
// near miss may have meant); the file's known fields still apply.
func TestFieldsFromANewerReleaseWarnAndStart(t *testing.T) {
	kubeadm, err := os.ReadFile("testdata/kubeadm-config.conf")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(kubeadm), "ipvs:\n", "ipvs:\n  connectionReuse: keep\n  tcpTimout: 5m\n", 1)
	text = strings.Replace(text, `  scheduler: ""`, "  scheduler: rr", 1)
	text += "nodeProxyPolicy:\n  mode: Strict\n  ports: [80, 443]\n"
	path := filepath.Join(t.TempDir(), "config.conf")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := runWith(t, "--config="+path)
	if err != nil {
		t.Fatalf("a file with fields of a newer release did not start: %v", err)
	}
	want := []string{"ipvs.connectionReuse", "ipvs.tcpTimout (did you mean ipvs.tcpTimeout?)", "nodeProxyPolicy"}
	if !reflect.DeepEqual(p.result.Unknown, want) {
		t.Errorf("unknown fields: got %q, want %q", p.result.Unknown, want)
	}
	if p.cfg.Scheduler != "rr" {
		t.Errorf("the known field ipvs.scheduler beside them: %q, want rr", p.cfg.Scheduler)
	}
	if p.cfg.TCPTimeout != ipvsproxy.DefaultConfig().TCPTimeout {
		t.Errorf("the misspelt tcpTimout was applied: %v", p.cfg.TCPTimeout)
	}
	if len(p.result.Ignored) != 0 {
		t.Errorf("ignored (known, not honoured): %q, want none", p.result.Ignored)
	}
}

// kubeadm v1.37 writes `mode: iptables` where the cluster left the mode
// empty (cmd/kubeadm/app/componentconfigs/kubeproxy.go; the file is what
// v1.37.2's componentconfigs.Default and Marshal give for podSubnet
// 10.244.0.0/16, as kubeadm puts it in its ConfigMap), and the same
// ConfigMap runs kube-proxy on the nodes not yet migrated. Its default
// config.conf is refused unless --proxy-mode=ipvs overrides the mode, as
// deploy/overlays/kubeadm does; then it gives the defaults, as v1.36's did.
func TestKubeadm137DefaultConfig(t *testing.T) {
	_, err := runWith(t, "--config=testdata/kubeadm-1.37-config.conf")
	if err == nil || !strings.Contains(err.Error(), `mode: "iptables"`) || !strings.Contains(err.Error(), "--proxy-mode=ipvs") {
		t.Errorf("without --proxy-mode: got %v, want the mode refused with the way out", err)
	}
	p, err := runWith(t, "--config=testdata/kubeadm-1.37-config.conf", "--proxy-mode=ipvs")
	if err != nil {
		t.Fatal(err)
	}
	want := ipvsproxy.DefaultConfig()
	want.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	if !reflect.DeepEqual(p.cfg, want) {
		t.Errorf("config:\n got %+v\nwant %+v", p.cfg, want)
	}
	if !reflect.DeepEqual(p.result.Overridden, []string{"mode by --proxy-mode"}) || len(p.result.Ignored) != 0 || len(p.result.Unknown) != 0 {
		t.Errorf("overridden %q, ignored %q, unknown %q; want only the mode overridden", p.result.Overridden, p.result.Ignored, p.result.Unknown)
	}
}

func TestProxyModeFlag(t *testing.T) {
	if _, err := runWith(t, "--proxy-mode=ipvs"); err != nil {
		t.Errorf("--proxy-mode=ipvs: %v", err)
	}
	for _, mode := range []string{"iptables", "nftables", "kernelspace"} {
		_, err := runWith(t, "--proxy-mode="+mode)
		if err == nil || !strings.Contains(err.Error(), "implements only the ipvs mode") {
			t.Errorf("--proxy-mode=%s: got %v", mode, err)
		}
	}
}

// Every flag the table names is a flag of `run`.
func TestConfigFieldsNameFlagsOfRun(t *testing.T) {
	known := map[string]bool{}
	for _, c := range newApp().Commands {
		if c.Name == "run" {
			for _, f := range c.Flags {
				known[f.Names()[0]] = true
			}
		}
	}
	for _, f := range kubeproxyconfig.Fields {
		if f.Flag != "" && !known[f.Flag] {
			t.Errorf("%s sets --%s, which `run` does not have", f.Path, f.Flag)
		}
	}
}

// Every flag of `run` is set by a KubeProxyConfiguration field or listed as
// ipvsproxy's own in kubeproxyconfig.FlagsWithoutField, never both: a flag added without
// that decision fails here.
func TestEveryRunFlagHasAFieldOrIsOursOnly(t *testing.T) {
	mapped := map[string]bool{}
	for _, f := range kubeproxyconfig.Fields {
		if f.Flag != "" {
			mapped[f.Flag] = true
		}
	}
	run := map[string]bool{}
	for _, c := range newApp().Commands {
		if c.Name != "run" {
			continue
		}
		for _, f := range c.Flags {
			name := f.Names()[0]
			run[name] = true
			_, ours := kubeproxyconfig.FlagsWithoutField[name]
			switch {
			case mapped[name] && ours:
				t.Errorf("--%s is both set by a field and listed as ours only", name)
			case !mapped[name] && !ours:
				t.Errorf("--%s has no KubeProxyConfiguration field in kubeproxyconfig.Fields and is not in kubeproxyconfig.FlagsWithoutField", name)
			}
		}
	}
	for name := range kubeproxyconfig.FlagsWithoutField {
		if !run[name] {
			t.Errorf("kubeproxyconfig.FlagsWithoutField lists --%s, which `run` does not have", name)
		}
	}
}

// The watcher restarts on a valid change only; an invalid one is waited out.
func TestWatchConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.conf")
	kubeadm, _ := os.ReadFile("testdata/kubeadm-config.conf")
	write := func(b []byte) {
		// A ConfigMap volume swaps a symlink; a rename is the same kind of
		// atomic replacement.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(kubeadm)
	file, err := kubeproxyconfig.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var changed atomic.Int32
	watchConfigFile(ctx, configSource{path: path, sum: file.Sum}, 10*time.Millisecond, func() { changed.Add(1) })

	time.Sleep(100 * time.Millisecond)
	if changed.Load() != 0 {
		t.Fatal("restart without a change")
	}
	// A known field in another case, a duplicate, and a mode other than ipvs would not start.
	for _, bad := range []string{
		strings.Replace(string(kubeadm), "  strictARP: false", "  strictArp: true", 1),
		string(kubeadm) + "clusterCIDR: 10.0.0.0/8\n",
		strings.Replace(string(kubeadm), `mode: ""`, "mode: nftables", 1),
	} {
		write([]byte(bad))
		time.Sleep(100 * time.Millisecond)
		if changed.Load() != 0 {
			t.Fatalf("restart for a file that would not start:\n%s", bad)
		}
	}
	// A valid change, with a field of a newer release, restarts.
	valid := []byte(strings.Replace(string(kubeadm), `scheduler: ""`, "scheduler: rr\n  connectionReuse: keep", 1))
	write(valid)
	deadline := time.Now().Add(5 * time.Second)
	for changed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if changed.Load() != 1 {
		t.Fatalf("restarts after a valid change: %d, want 1", changed.Load())
	}

	// With --proxy-mode given, the file's mode is not read: a change to it restarts.
	var changedMode atomic.Int32
	watchConfigFile(ctx, configSource{path: path, sum: sha256.Sum256(valid), modeFromFlag: true}, 10*time.Millisecond, func() { changedMode.Add(1) })
	time.Sleep(100 * time.Millisecond)
	if changedMode.Load() != 0 {
		t.Fatal("restart without a change")
	}
	write([]byte(strings.Replace(string(kubeadm), `mode: ""`, "mode: iptables", 1)))
	deadline = time.Now().Add(5 * time.Second)
	for changedMode.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if changedMode.Load() != 1 {
		t.Fatalf("restarts after the mode changed under --proxy-mode: %d, want 1", changedMode.Load())
	}
}
