package hostsetup

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The schedulers a Service may choose by default are those the kernel has
// at start, loaded (in /proc/modules or /sys/module) or built in
// (modules.builtin), read from files: nothing is loaded to find out.
func TestAvailableSchedulersAreReadNotLoaded(t *testing.T) {
	dir := t.TempDir()
	procModules := filepath.Join(dir, "modules")
	if err := os.WriteFile(procModules, []byte(strings.Join([]string{
		"ip_vs_twos 12288 3 - Live 0x0000000000000000",
		"ip_vs_wrr 12288 0 - Live 0x0000000000000000",
		"ip_vs 212992 7 ip_vs_twos,ip_vs_wrr, Live 0x0000000000000000",
		"ip_vs_fake 12288 0 - Live 0x0000000000000000",
		"nf_conntrack 196608 3 ip_vs,nf_nat, Live 0x0000000000000000",
	}, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sysModule := filepath.Join(dir, "sys")
	for _, m := range []string{"ip_vs_rr", "ip_vs", "dummy"} {
		if err := os.MkdirAll(filepath.Join(sysModule, m), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	builtin := filepath.Join(dir, "modules.builtin")
	if err := os.WriteFile(builtin, []byte("kernel/net/netfilter/ipvs/ip_vs_mh.ko\nkernel/drivers/net/dummy.ko\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := AvailableSchedulers(SchedulerSources{ProcModules: procModules, SysModule: sysModule, ModulesBuiltin: builtin})
	if err != nil || !slices.Equal(got, []string{"mh", "rr", "twos", "wrr"}) {
		t.Fatalf("AvailableSchedulers = %v, %v; want mh (built in), rr (in /sys/module), twos and wrr (loaded)", got, err)
	}
	// Without modules.builtin (the base DaemonSet mounts no /lib/modules):
	// the rest, no error.
	got, err = AvailableSchedulers(SchedulerSources{ProcModules: procModules, SysModule: sysModule, ModulesBuiltin: filepath.Join(dir, "absent")})
	if err != nil || !slices.Equal(got, []string{"rr", "twos", "wrr"}) {
		t.Fatalf("without modules.builtin: %v, %v", got, err)
	}
	// Without /proc/modules: an error naming it, and what /sys gave.
	got, err = AvailableSchedulers(SchedulerSources{ProcModules: filepath.Join(dir, "absent"), SysModule: sysModule})
	if err == nil || !strings.Contains(err.Error(), "absent") || !slices.Equal(got, []string{"rr"}) {
		t.Fatalf("without /proc/modules: %v, %v", got, err)
	}
}
