package ipvs

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// What only Fake offers: knobs for tests elsewhere and its Dump.

func TestFakeRemoveScheduler(t *testing.T) {
	f := NewFake()
	f.RemoveScheduler("twos")
	wantErr(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "twos"}), ErrNoScheduler)
	ok(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))

	f.SetSchedulers("twos")
	wantErr(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: udp80, Scheduler: "rr"}), ErrNoScheduler)
	ok(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: udp80, Scheduler: "twos"}))
}

func TestFakeWritesCountsMutatingCallsOnly(t *testing.T) {
	f := NewFake()
	ok(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
	wantErr(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}), ErrExists)
	ok(t, f.AddRealServer(tcp80, rs(rip4a, 8080, 1)))
	if got := f.Writes(); got != 3 {
		t.Fatalf("Writes() after 3 writes (one failed) = %d", got)
	}
	if _, err := f.VirtualServers(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.RealServers(tcp80); err != nil {
		t.Fatal(err)
	}
	_ = f.Dump()
	if got := f.Writes(); got != 3 {
		t.Fatalf("Writes() after reads = %d, want 3", got)
	}
}

func TestFakeConnectionsSurviveReweight(t *testing.T) {
	f := NewFake()
	ok(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
	ok(t, f.AddRealServer(tcp80, rs(rip4a, 8080, 1)))
	ok(t, f.SetConnections(tcp80, RealServerKey{Address: rip4a, Port: 8080}, 2, 5))
	ok(t, f.UpdateRealServer(tcp80, rs(rip4a, 8080, 0)))
	want := rs(rip4a, 8080, 0)
	want.ActiveConnections, want.InactiveConnections = 2, 5
	wantRealServers(t, f, tcp80, want)
	wantErr(t, f.SetConnections(tcp80, RealServerKey{Address: rip4b, Port: 8080}, 1, 1), ErrNotFound)
	wantErr(t, f.SetConnections(udp80, RealServerKey{Address: rip4a, Port: 8080}, 1, 1), ErrNotFound)
}

func TestFakeDump(t *testing.T) {
	f := NewFake()
	if got := f.Dump(); got != "" {
		t.Fatalf("Dump() of an empty table = %q", got)
	}
	ok(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: tcp6, Scheduler: "rr", PersistenceTimeout: 10800 * time.Second}))
	ok(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: udp80, Scheduler: "rr"}))
	ok(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "twos"}))
	ok(t, f.AddRealServer(tcp80, rs(rip4b, 8080, 1)))
	ok(t, f.AddRealServer(tcp80, rs(rip4a, 8080, 0)))
	ok(t, f.SetConnections(tcp80, RealServerKey{Address: rip4a, Port: 8080}, 2, 5))
	ok(t, f.AddRealServer(tcp6, rs(rip6, 8443, 1)))
	ok(t, f.SetTimeouts(Timeouts{UDP: 30 * time.Second}))
	want := `timeouts tcp 900 tcpfin 120 udp 30
TCP 192.0.2.10:80 twos
  -> 198.51.100.5:8080 weight 0 active 2 inactive 5
  -> 203.0.113.7:8080 weight 1
UDP 192.0.2.10:80 rr
TCP [2001:db8::10]:443 rr persistent 10800
  -> [2001:db8:1::5]:8443 weight 1
`
	if got := f.Dump(); got != want {
		t.Fatalf("Dump() =\n%s\nwant\n%s", got, want)
	}
}

func TestFakeConcurrentUse(t *testing.T) {
	f := NewFake()
	ok(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rs(rip4a, uint16(8000+i), 1)
			if err := f.AddRealServer(tcp80, r); err != nil {
				t.Error(err)
			}
			if _, err := f.RealServers(tcp80); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := f.RealServers(tcp80)
	ok(t, err)
	if len(got) != 8 {
		t.Fatalf("after 8 concurrent adds: %d real servers", len(got))
	}
}

func TestFakeTrafficCountsOnBothServersAndOutlivesTheRealServer(t *testing.T) {
	f := NewFake()
	ok(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
	a, b := RealServerKey{Address: rip4a, Port: 8080}, RealServerKey{Address: rip4b, Port: 8080}
	ok(t, f.AddRealServer(tcp80, RealServer{RealServerKey: a, Weight: 1}))
	ok(t, f.AddRealServer(tcp80, RealServer{RealServerKey: b, Weight: 1}))
	ok(t, f.AddTraffic(tcp80, a, Stats{Connections: 2, PacketsIn: 10, BytesIn: 600}))
	ok(t, f.AddTraffic(tcp80, b, Stats{Connections: 1, PacketsIn: 4, BytesIn: 240}))
	ok(t, f.DeleteRealServer(tcp80, a))
	vss, err := f.VirtualServerStats()
	ok(t, err)
	if want := (Stats{Connections: 3, PacketsIn: 14, BytesIn: 840}); vss[tcp80] != want {
		t.Fatalf("virtual server stats = %+v, want %+v", vss[tcp80], want)
	}
	ok(t, f.AddRealServer(tcp80, RealServer{RealServerKey: a, Weight: 1}))
	rss, err := f.RealServerStats(tcp80)
	ok(t, err)
	if rss[a] != (Stats{}) || rss[b].Connections != 1 {
		t.Fatalf("real server stats = %+v, want %s back at zero and %s with 1 connection", rss, a, b)
	}
	if err := f.AddTraffic(tcp80, RealServerKey{Address: rip4b, Port: 1}, Stats{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("AddTraffic to a missing real server = %v, want ErrNotFound", err)
	}
}

func TestParseSchedulerFlags(t *testing.T) {
	for _, c := range []struct {
		sched, list string
		want        SchedulerFlags
		err         string
	}{
		{"mh", "mh-port,mh-fallback", SchedulerFlag1 | SchedulerFlag2, ""},
		{"sh", " sh-port ", SchedulerFlag2, ""},
		{"rr", "", 0, ""},
		{"mh", "sh-port", 0, "scheduler mh takes mh-fallback, mh-port"},
		{"rr", "mh-port", 0, "scheduler rr takes no flags"},
	} {
		got, err := ParseSchedulerFlags(c.sched, c.list)
		if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s %q: got %v %v, want %v %q", c.sched, c.list, got, err, c.want, c.err)
		}
	}
	if s := (SchedulerFlag1 | SchedulerFlag2).For("mh"); s != "mh-fallback,mh-port" {
		t.Errorf("For: %s", s)
	}
}

// The real servers are kept sorted as they are written (so that a listing
// is a copy): every kind of write must show in the next listing, and what a
// caller does with a listing must not.
func TestFakeListingsFollowEveryWriteAndAreCopies(t *testing.T) {
	f := NewFake()
	ok(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: udp80, Scheduler: "rr"}))
	wantListed(t, f, "UDP 192.0.2.10:80 rr")
	ok(t, f.AddVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "rr"}))
	wantListed(t, f, "TCP 192.0.2.10:80 rr", "UDP 192.0.2.10:80 rr")
	ok(t, f.UpdateVirtualServer(VirtualServer{VirtualServerKey: tcp80, Scheduler: "wrr"}))
	vss := wantListed(t, f, "TCP 192.0.2.10:80 wrr", "UDP 192.0.2.10:80 rr")
	vss[0].Scheduler = "sh"
	wantListed(t, f, "TCP 192.0.2.10:80 wrr", "UDP 192.0.2.10:80 rr")
	ok(t, f.DeleteVirtualServer(udp80))
	wantListed(t, f, "TCP 192.0.2.10:80 wrr")

	ok(t, f.AddRealServer(tcp80, rs(rip4b, 8080, 1)))
	wantRealServers(t, f, tcp80, rs(rip4b, 8080, 1))
	ok(t, f.AddRealServer(tcp80, rs(rip4a, 8080, 1)))
	wantRealServers(t, f, tcp80, rs(rip4a, 8080, 1), rs(rip4b, 8080, 1))
	got, err := f.RealServers(tcp80)
	ok(t, err)
	got[0].Weight = 9
	wantRealServers(t, f, tcp80, rs(rip4a, 8080, 1), rs(rip4b, 8080, 1))
	ok(t, f.UpdateRealServer(tcp80, rs(rip4b, 8080, 0)))
	ok(t, f.SetConnections(tcp80, RealServerKey{Address: rip4a, Port: 8080}, 3, 4))
	busy := rs(rip4a, 8080, 1)
	busy.ActiveConnections, busy.InactiveConnections = 3, 4
	wantRealServers(t, f, tcp80, busy, rs(rip4b, 8080, 0))
	ok(t, f.DeleteRealServer(tcp80, RealServerKey{Address: rip4a, Port: 8080}))
	wantRealServers(t, f, tcp80, rs(rip4b, 8080, 0))
	wantErr(t, f.DeleteRealServer(tcp80, RealServerKey{Address: rip4a, Port: 8080}), ErrNotFound)
}

func wantListed(t *testing.T, f *Fake, want ...string) []VirtualServer {
	t.Helper()
	vss, err := f.VirtualServers()
	ok(t, err)
	sortVirtualServers(vss)
	var got []string
	for _, vs := range vss {
		got = append(got, vs.VirtualServerKey.String()+" "+vs.Scheduler)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("VirtualServers() =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	return vss
}
