package ipvsproxy

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
)

// A field added to ipvs.VirtualServer must be compared, or the reconciler
// and --check would both miss a change of it.
func TestVirtualServerChangesCoverEveryField(t *testing.T) {
	base := ipvs.VirtualServer{
		VirtualServerKey: ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80},
		Scheduler:        "mh",
	}
	if c := VirtualServerChanges(base, base); len(c) != 0 {
		t.Fatalf("equal virtual servers: %+v", c)
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Anonymous { // the key: the same for both by contract
			continue
		}
		changed := base
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString("rr")
		case reflect.Uint32:
			v.SetUint(uint64(ipvs.SchedulerFlag2))
		case reflect.Int64:
			v.SetInt(int64(3 * time.Hour))
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", f.Name, v.Kind())
		}
		if c := VirtualServerChanges(base, changed); len(c) != 1 {
			t.Errorf("%s changed: %+v, want one change", f.Name, c)
		}
	}
}
