package main

import (
	"net/netip"
	"testing"
)

func TestBigServiceSlicesHoldEveryEndpointOnce(t *testing.T) {
	slices, err := bigServiceSlices("bench", "big", 1050, 100, netip.MustParseAddr("10.248.255.250"))
	if err != nil {
		t.Fatal(err)
	}
	if len(slices) != 11 {
		t.Fatalf("%d slices, want 11 (ten of 100 and one of 50)", len(slices))
	}
	seen := map[string]bool{}
	for i, s := range slices {
		want := 100
		if i == 10 {
			want = 50
		}
		if len(s.Endpoints) != want {
			t.Errorf("slice %d (%s): %d endpoints, want %d", i, s.Name, len(s.Endpoints), want)
		}
		if s.Labels["kubernetes.io/service-name"] != "big" {
			t.Errorf("slice %s is not labelled for the Service", s.Name)
		}
		for _, ep := range s.Endpoints {
			if seen[ep.Addresses[0]] {
				t.Fatalf("%s given twice", ep.Addresses[0])
			}
			seen[ep.Addresses[0]] = true
		}
	}
	// Addresses run on across octets: 10.248.255.250 + 1049.
	if !seen["10.248.255.250"] || !seen["10.249.0.0"] || !seen["10.249.4.19"] || seen["10.249.4.20"] {
		t.Errorf("addresses not 10.248.255.250 to 10.249.4.19 in order")
	}
	if slices[0].Name == slices[1].Name {
		t.Error("two slices share a name")
	}
}

func TestBigServiceSlicesRefuseWhatTheAPIWould(t *testing.T) {
	for _, c := range []struct {
		n, per int
		base   string
	}{{0, 100, "10.248.0.0"}, {100, 0, "10.248.0.0"}, {100, 1001, "10.248.0.0"}, {10, 10, "255.255.255.250"}} {
		if _, err := bigServiceSlices("bench", "big", c.n, c.per, netip.MustParseAddr(c.base)); err == nil {
			t.Errorf("%d endpoints, %d per slice from %s: accepted", c.n, c.per, c.base)
		}
	}
}
