package hostsetup

import (
	"errors"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/sysctl"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
)

// hostKernel is what Prepare touches: the dummy link, IPVS (the scheduler
// probe, the timeouts) and the sysctls, all Fakes.
type hostKernel struct {
	links  *netif.Fake
	ipvs   *ipvs.Fake
	sysctl *sysctl.Fake
}

func newHostKernel() *hostKernel {
	return &hostKernel{links: netif.NewFake(owned.DummyInterface), ipvs: ipvs.NewFake(), sysctl: ipvsSysctlsFake()}
}

func (h *hostKernel) kernel() adapters.Kernel {
	return adapters.Kernel{Netif: h.links, IPVS: h.ipvs, Sysctl: h.sysctl}
}

// A kernel without the dummy driver stops the start-up with a message
// that names it, before anything else is written; with it, the link is
// made (and up) before the first sync.
func TestKernelWithoutDummyDriverIsAStartUpError(t *testing.T) {
	fk := newHostKernel()
	fk.links.SetDummyUnsupported()
	_, err := Prepare(ipvsproxy.DefaultConfig(), fk.kernel(), "6.12.38+deb12-amd64")
	if !errors.Is(err, netif.ErrUnsupported) || !strings.Contains(err.Error(), "the kernel has no dummy network driver (module dummy, CONFIG_DUMMY)") {
		t.Fatalf("want a start-up error naming the dummy driver, got %v", err)
	}
	if v, _ := fk.sysctl.Get("net.ipv4.vs.conntrack"); fk.ipvs.Dump() != "" || v != "0" {
		t.Errorf("written before the refusal: IPVS %q, net.ipv4.vs.conntrack=%s", fk.ipvs.Dump(), v)
	}
	ok := newHostKernel()
	if _, err := Prepare(ipvsproxy.DefaultConfig(), ok.kernel(), "6.12.38+deb12-amd64"); err != nil {
		t.Fatal(err)
	}
	if _, err := ok.links.DummyAddresses(); err != nil {
		t.Errorf("no %s after Prepare: %v", owned.DummyInterface, err)
	}
}

func TestSchedulerFallbackAndSysctls(t *testing.T) {
	fk := newHostKernel()
	fk.ipvs.RemoveScheduler("twos")
	cfg := ipvsproxy.DefaultConfig()
	cfg.StrictARP = true
	prep, err := Prepare(cfg, fk.kernel(), "5.4.0-generic")
	if err != nil {
		t.Fatal(err)
	}
	if !prep.SchedulerFellBack || prep.Config.Scheduler != FallbackScheduler || prep.Requested != "twos" {
		t.Fatalf("prepared %+v", prep)
	}
	if fk.ipvs.Dump() != "" {
		t.Fatalf("probe left:\n%s", fk.ipvs.Dump())
	}
	for name, want := range map[string]string{
		"net.ipv4.vs.conntrack": "1", "net.ipv4.vs.expire_nodest_conn": "1", "net.ipv4.vs.expire_quiescent_template": "1",
		"net.ipv4.ip_forward": "1", "net.ipv4.vs.conn_reuse_mode": "0", "net.ipv4.conf.all.arp_ignore": "1", "net.ipv4.conf.all.arp_announce": "2",
		"net.ipv6.conf.all.forwarding": "0",
	} {
		if got, _ := fk.sysctl.Get(name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	// 5.9 and later keep conn_reuse_mode as it is (kubernetes#93297).
	fk2 := newHostKernel()
	if prep, err := Prepare(ipvsproxy.DefaultConfig(), fk2.kernel(), "6.12.38+deb12-amd64"); err != nil || prep.SchedulerFellBack {
		t.Fatalf("%+v %v", prep, err)
	}
	if got, _ := fk2.sysctl.Get("net.ipv4.vs.conn_reuse_mode"); got != "1" {
		t.Fatalf("conn_reuse_mode changed on 6.12: %s", got)
	}
}

// Only the default scheduler falls back; one the operator named and the
// kernel lacks stops the start-up with a message naming the flag, even
// when the name is twos: an operator's choice is never silently replaced.
func TestExplicitSchedulerTheKernelLacksIsAStartUpError(t *testing.T) {
	for _, name := range []string{"rr", "twos", "no-such-scheduler"} {
		fk := newHostKernel()
		fk.ipvs.RemoveScheduler(name)
		cfg := ipvsproxy.DefaultConfig()
		cfg.Scheduler, cfg.SchedulerExplicit = name, true
		prep, err := Prepare(cfg, fk.kernel(), "6.12.38+deb12-amd64")
		if !errors.Is(err, ipvs.ErrNoScheduler) || !strings.Contains(err.Error(), "--ipvs-scheduler="+name+": the kernel has no such IPVS scheduler") {
			t.Fatalf("%s: want a start-up error naming the flag, got %v (prepared %+v)", name, err, prep)
		}
		if prep.SchedulerFellBack || fk.ipvs.Dump() != "" {
			t.Fatalf("%s: fell back %v, left:\n%s", name, prep.SchedulerFellBack, fk.ipvs.Dump())
		}
	}
	// An explicit scheduler the kernel has is used as it is.
	fk := newHostKernel()
	cfg := ipvsproxy.DefaultConfig()
	cfg.Scheduler, cfg.SchedulerExplicit = "rr", true
	if prep, err := Prepare(cfg, fk.kernel(), "6.12.38+deb12-amd64"); err != nil || prep.SchedulerFellBack || prep.Config.Scheduler != "rr" {
		t.Fatalf("explicit rr: %+v %v", prep, err)
	}
	// Neither the default nor the fallback: an error that says both.
	fk = newHostKernel()
	fk.ipvs.RemoveScheduler(ipvsproxy.DefaultScheduler)
	fk.ipvs.RemoveScheduler(FallbackScheduler)
	if _, err := Prepare(ipvsproxy.DefaultConfig(), fk.kernel(), "6.12.38+deb12-amd64"); !errors.Is(err, ipvs.ErrNoScheduler) || !strings.Contains(err.Error(), "nor the fallback") {
		t.Fatalf("without both: %v", err)
	}
}

// A node proxying IPv6 is not made to forward IPv6: that would make every
// interface with accept_ra=1 ignore router advertisements (see
// TestRouterAdvertisementsStillConfigureTheNodeAfterPrepare). Prepare
// leaves net.ipv6.conf.all.forwarding as it finds it, and says when it is
// off; IPv4 forwarding is set, as kube-proxy sets it.
func TestPrepareLeavesIPv6ForwardingAndSaysWhenItIsOff(t *testing.T) {
	for _, was := range []string{"0", "1"} {
		fk := newHostKernel()
		fk.sysctl.Values["net.ipv6.conf.all.forwarding"] = was
		cfg := ipvsproxy.DefaultConfig()
		cfg.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		prep, err := Prepare(cfg, fk.kernel(), "6.12.38+deb12-amd64")
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := fk.sysctl.Get("net.ipv6.conf.all.forwarding"); got != was {
			t.Errorf("net.ipv6.conf.all.forwarding %s -> %s, want it left", was, got)
		}
		if got, _ := fk.sysctl.Get("net.ipv4.ip_forward"); got != "1" {
			t.Errorf("net.ipv4.ip_forward = %s, want 1", got)
		}
		if prep.IPv6NotForwarded != (was == "0") {
			t.Errorf("forwarding %s: IPv6NotForwarded=%v", was, prep.IPv6NotForwarded)
		}
	}
	// IPv4 alone does not ask.
	fk := newHostKernel()
	if prep, err := Prepare(ipvsproxy.DefaultConfig(), fk.kernel(), "6.12.38+deb12-amd64"); err != nil || prep.IPv6NotForwarded {
		t.Fatalf("IPv4 only: %+v %v", prep, err)
	}
}
