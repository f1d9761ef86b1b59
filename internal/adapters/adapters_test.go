package adapters

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/kerneltest"
	v1 "k8s.io/api/core/v1"
)

// The Fakes fill every adapter a proxier writes through, and use the links
// given.
func TestFakeFillsEveryAdapter(t *testing.T) {
	links := netif.NewFake("kube-ipvs0")
	k, closeKernel, err := Open(Options{Fake: true, Families: BothFamilies, Links: links})
	if err != nil {
		t.Fatal(err)
	}
	defer closeKernel()
	if k.Netif != links {
		t.Error("the links given were not used")
	}
	v := reflect.ValueOf(k)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if name == "Listeners" { // optional: nil reads no sockets
			continue
		}
		if v.Field(i).IsZero() {
			t.Errorf("Kernel.%s is not filled", name)
		}
	}
	if len(k.IPTables) != 2 {
		t.Errorf("iptables of %d families, want 2", len(k.IPTables))
	}
}

// On a kernel without IPVS (this project's CI host is one) the daemon's
// kernel does not open, with a message that names the module; cleanup's
// options (IPVSIfPresent) go on without it.
func TestOpenOnAKernelWithoutIPVSNamesIt(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.NotRoot, "needs root")
	}
	h, err := ipvs.New()
	if err == nil {
		h.Close()
		t.Skip("this kernel has IPVS: the VM's kernel-limits check (e2e/vm/kernel-limits.sh) makes it unloadable instead")
	}
	if !errors.Is(err, ipvs.ErrUnsupported) {
		t.Fatal(err)
	}
	_, closeKernel, err := Open(Options{Families: []v1.IPFamily{v1.IPv4Protocol}})
	closeKernel()
	if !errors.Is(err, ipvs.ErrUnsupported) || !strings.Contains(err.Error(), "the kernel has no IPVS (module ip_vs, CONFIG_IP_VS)") {
		t.Fatalf("Open: %v, want the missing IPVS named", err)
	}
}
