package conntrack

import (
	"net/netip"
	"reflect"
	"sort"
	"testing"
	"time"
)

// The flows every backend starts with, all UDP from the client 192.0.2.1 (and
// 2001:db8::1). a, b and c were DNATed from a service address to the endpoint
// 192.0.2.2; d went to 192.0.2.2 directly.
var labFlows = map[string]Flow{
	"a":  udpFlow("192.0.2.1:40001", "198.51.100.10:80", "192.0.2.2:8080"),
	"b":  udpFlow("192.0.2.1:40002", "198.51.100.10:80", "192.0.2.2:8080"),
	"c":  udpFlow("192.0.2.1:40003", "198.51.100.11:53", "192.0.2.2:5353"),
	"d":  udpFlow("192.0.2.1:40004", "192.0.2.2:9999", "192.0.2.2:9999"),
	"v6": udpFlow("[2001:db8::1]:40005", "[2001:db8::2]:7777", "[2001:db8::2]:7777"),
}

// udpFlow is a flow from src to dst answered by endpoint.
func udpFlow(src, dst, endpoint string) Flow {
	s := netip.MustParseAddrPort(src)
	// One packet, no answer: the kernel tracks it UNREPLIED for
	// nf_conntrack_udp_timeout (30 s).
	return Flow{Protocol: UDP, OrigSrc: s, OrigDst: netip.MustParseAddrPort(dst),
		ReplySrc: netip.MustParseAddrPort(endpoint), ReplyDst: s, State: "UNREPLIED", Timeout: udpUnrepliedTimeout}
}

const udpUnrepliedTimeout = 30 * time.Second

// sameFlow compares a listed flow with a lab flow: tuples and state exactly,
// the timeout as what is left of it.
func sameFlow(got, want Flow) bool {
	left := got.Timeout
	got.Timeout, want.Timeout = 0, 0
	return got == want && left > 0 && left <= udpUnrepliedTimeout
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// backends returns constructors of the Fake (always) and of the kernel's table
// in fresh namespaces holding labFlows (when root; see lab_test.go).
func backends() map[string]func(t *testing.T) Interface {
	return map[string]func(t *testing.T) Interface{
		"fake": func(t *testing.T) Interface {
			f := NewFake()
			for _, flow := range labFlows {
				if err := f.AddFlow(flow); err != nil {
					t.Fatal(err)
				}
			}
			return f
		},
		"kernel": func(t *testing.T) Interface { return newLab(t).table },
	}
}

// names lists which labFlows tbl holds in both families, sorted.
func names(t *testing.T, tbl Interface) []string {
	t.Helper()
	var got []string
	for _, family := range []int{4, 6} {
		flows, err := tbl.Flows(family)
		if err != nil {
			t.Fatal(err)
		}
	next:
		for _, flow := range flows {
			for name, want := range labFlows {
				if sameFlow(flow, want) {
					got = append(got, name)
					continue next
				}
			}
			t.Errorf("unexpected IPv%d flow %s", family, flow)
		}
	}
	sort.Strings(got)
	return got
}

func TestFlows(t *testing.T) {
	for implName, newTable := range backends() {
		t.Run(implName, func(t *testing.T) {
			tbl := newTable(t)
			if got, want := names(t, tbl), []string{"a", "b", "c", "d", "v6"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("flows = %q, want %q", got, want)
			}
			v6, err := tbl.Flows(6)
			if err != nil || len(v6) != 1 || !sameFlow(v6[0], labFlows["v6"]) {
				t.Fatalf("Flows(6) = %v, %v; want only %s", v6, err, labFlows["v6"])
			}
			if _, err := tbl.Flows(5); err == nil {
				t.Fatal("Flows(5) succeeded, want an error")
			}
		})
	}
}

func TestDeleteFlows(t *testing.T) {
	cases := []struct {
		name    string
		filters []Filter
		deleted []string
	}{
		{"service address and port", []Filter{{Protocol: UDP, OrigDst: addr("198.51.100.10"), OrigDstPort: 80}}, []string{"a", "b"}},
		{"service address, any port", []Filter{{Protocol: UDP, OrigDst: addr("198.51.100.11")}}, []string{"c"}},
		{"other service port", []Filter{{Protocol: UDP, OrigDst: addr("198.51.100.10"), OrigDstPort: 81}}, nil},
		{"endpoint after DNAT", []Filter{{Protocol: UDP, ReplySrc: addr("192.0.2.2"), ReplySrcPort: 8080}}, []string{"a", "b"}},
		{"endpoint address, any port", []Filter{{Protocol: UDP, ReplySrc: addr("192.0.2.2")}}, []string{"a", "b", "c", "d"}},
		{"other protocol", []Filter{{Protocol: TCP, OrigDst: addr("198.51.100.10")}}, nil},
		{"any of several filters", []Filter{
			{Protocol: UDP, ReplySrc: addr("192.0.2.2"), ReplySrcPort: 5353},
			{Protocol: UDP, OrigDst: addr("192.0.2.2"), OrigDstPort: 9999},
		}, []string{"c", "d"}},
		{"IPv6", []Filter{{Protocol: UDP, OrigDst: addr("2001:db8::2"), OrigDstPort: 7777}}, []string{"v6"}},
		{"no filter deletes nothing", nil, nil},
	}
	for implName, newTable := range backends() {
		t.Run(implName, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					tbl := newTable(t)
					n, err := tbl.DeleteFlows(c.filters...)
					if err != nil {
						t.Fatal(err)
					}
					if n != len(c.deleted) {
						t.Errorf("deleted %d flows, want %d", n, len(c.deleted))
					}
					var want []string
					for _, name := range []string{"a", "b", "c", "d", "v6"} {
						if !contains(c.deleted, name) {
							want = append(want, name)
						}
					}
					if got := names(t, tbl); !reflect.DeepEqual(got, want) {
						t.Fatalf("flows left = %q, want %q", got, want)
					}
				})
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestFakeDumpAndDeleted(t *testing.T) {
	f := NewFake()
	for _, name := range []string{"c", "a"} {
		if err := f.AddFlow(labFlows[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.AddFlow(labFlows["a"]); err == nil {
		t.Fatal("adding a flow twice succeeded")
	}
	want := "udp 192.0.2.1:40001 -> 198.51.100.10:80 reply 192.0.2.2:8080 -> 192.0.2.1:40001\n" +
		"udp 192.0.2.1:40003 -> 198.51.100.11:53 reply 192.0.2.2:5353 -> 192.0.2.1:40003\n"
	if got := f.Dump(); got != want {
		t.Fatalf("Dump() =\n%s\nwant\n%s", got, want)
	}
	if _, err := f.DeleteFlows(Filter{OrigDstPort: 53}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.DeleteFlows(Filter{OrigDstPort: 53}); err != nil {
		t.Fatal(err)
	}
	if got := f.Deleted(); got != 1 {
		t.Fatalf("Deleted() = %d, want 1", got)
	}
}
