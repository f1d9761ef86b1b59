package adapters

import (
	"reflect"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/netif"
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
