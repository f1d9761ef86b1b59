package ipvs

import (
	"errors"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	"github.com/ipvsproxy/ipvsproxy/internal/netnstest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"
)

var (
	modprobeOnce sync.Once
	modprobeOut  string
)

// skipUnlessKernel skips (under CI: fails, unless accepted) when the
// real-kernel half of the adapter table cannot run here. It loads ip_vs once
// if needed.
func skipUnlessKernel(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "real-kernel IPVS tests need root to create a network namespace")
	}
	err := checkAvailable()
	if errors.Is(err, ErrUnsupported) {
		modprobeOnce.Do(func() {
			out, err := exec.Command("modprobe", "ip_vs").CombinedOutput()
			if err != nil {
				modprobeOut = strings.TrimSpace(string(out)) + ": " + err.Error()
			}
		})
		err = checkAvailable()
	}
	if errors.Is(err, ErrUnsupported) {
		kerneltest.Skip(t, kerneltest.NoIPVS, "modprobe ip_vs: %s: %v", modprobeOut, err)
	}
	if err != nil {
		t.Fatalf("probing for IPVS: %v", err)
	}
}

// newKernelInFreshNamespace opens the real IPVS table of a new, empty network
// namespace that disappears when the test ends.
func newKernelInFreshNamespace(t *testing.T) Interface {
	t.Helper()
	ns := netnstest.New(t)
	netnstest.LoopbackUp(t, ns)
	a, err := NewInNamespace(ns)
	if err != nil {
		t.Fatalf("open IPVS in fresh namespace: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// A firewall-mark service has no address or port to report; listing leaves
// it out rather than inventing a key. Kernel only: Fake cannot hold one.
func TestKernelListsNoFirewallMarkServices(t *testing.T) {
	skipUnlessKernel(t)
	a := newKernelInFreshNamespace(t)
	k := a.(*kernel)
	fwmark := &mobyipvs.Service{FWMark: 7, AddressFamily: unix.AF_INET, SchedName: "rr", Netmask: 0xffffffff}
	if err := k.handle.NewService(fwmark); err != nil {
		t.Fatalf("add firewall-mark service: %v", err)
	}
	ok(t, a.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
	wantVirtualServers(t, a, VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"})
}
