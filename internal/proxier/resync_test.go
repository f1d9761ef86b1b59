package proxier

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/internal/servicetest"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

// With --ipvs-resync-shares=4, a period between full syncs recreates any
// virtual server someone deleted, repairs the real servers of its own share
// only, and every fourth period is a full sync.
func TestResyncSharesRepairDriftWithinTheirPeriods(t *testing.T) {
	fk := newFakeKernel()
	cfg := testConfig()
	cfg.ResyncShares = 4
	p, _ := newTestProxier(t, fk, cfg)
	const services = 40
	key := func(i int) ipvs.VirtualServerKey {
		return ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.AddrFrom4([4]byte{10, 96, 1, byte(i)}), Port: 80}
	}
	perShare := make([]int, cfg.ResyncShares)
	for i := range services {
		svc := servicetest.Service(fmt.Sprintf("s%d", i), key(i).Address.String())
		p.Tracker().SetService(svc)
		p.Tracker().SetEndpointSlice(servicetest.Slice(svc, fmt.Sprintf("s%d-a", i), 8080, fmt.Sprintf("10.244.1.%d@node2", i), fmt.Sprintf("10.244.2.%d@node2", i)))
		perShare[shareOf(key(i), cfg.ResyncShares)]++
	}
	if res := mustSync(t, p); !res.Full {
		t.Fatal("first sync not full")
	}
	// One Service in share 2 loses a real server, one in share 3 its
	// whole virtual server, both behind the proxier's back.
	inShare := func(s int) ipvs.VirtualServerKey {
		for i := range services {
			if shareOf(key(i), cfg.ResyncShares) == s {
				return key(i)
			}
		}
		t.Fatalf("no Service in share %d", s)
		return ipvs.VirtualServerKey{}
	}
	lostRS, lostVS := inShare(2), inShare(3)
	rss, _ := fk.ipvs.RealServers(lostRS)
	if err := fk.ipvs.DeleteRealServer(lostRS, rss[0].RealServerKey); err != nil {
		t.Fatal(err)
	}
	if err := fk.ipvs.DeleteVirtualServer(lostVS); err != nil {
		t.Fatal(err)
	}
	realServers := func(k ipvs.VirtualServerKey) int {
		rss, _ := fk.ipvs.RealServers(k)
		return len(rss)
	}
	period := func(share int) SyncResult {
		t.Helper()
		p.PeriodElapsed()
		res := mustSync(t, p)
		if res.Full || res.ResyncedVirtualServers != perShare[share] {
			t.Fatalf("period of share %d: full=%v, re-read %d virtual servers, want %d of %v", share, res.Full, res.ResyncedVirtualServers, perShare[share], perShare)
		}
		return res
	}

	period(1)
	if realServers(lostVS) != 2 {
		t.Fatalf("a deleted virtual server is not back after one period: %d real servers\n%s", realServers(lostVS), fk.ipvs.Dump())
	}
	if realServers(lostRS) != 1 {
		t.Fatalf("share 1's period re-read share 2's %s: %d real servers", lostRS, realServers(lostRS))
	}
	period(2)
	if realServers(lostRS) != 2 {
		t.Fatalf("share 2's period did not repair %s: %d real servers", lostRS, realServers(lostRS))
	}
	if res := period(3); res.Writes != 0 {
		t.Fatalf("a period over an unchanged kernel wrote %d objects", res.Writes)
	}
	p.PeriodElapsed()
	if res := mustSync(t, p); !res.Full || res.Writes != 0 {
		t.Fatalf("fourth period: full=%v writes=%d, want a full sync with no writes", res.Full, res.Writes)
	}
}

// The default, 1 share, keeps kube-proxy's behaviour: every period is full.
func TestOneResyncShareIsAFullSyncEveryPeriod(t *testing.T) {
	fk := newFakeKernel()
	p, _ := newTestProxier(t, fk, testConfig())
	svc := servicetest.Service("web", "10.96.0.10")
	p.Tracker().SetService(svc)
	mustSync(t, p)
	for range 3 {
		p.PeriodElapsed()
		if res := mustSync(t, p); !res.Full {
			t.Fatal("a period with one share was not a full sync")
		}
	}
}

func TestResyncSharesOutOfRangeIsRefused(t *testing.T) {
	for _, n := range []int{-1, 0, ipvsproxy.MaxResyncShares + 1} {
		cfg := testConfig()
		cfg.ResyncShares = n
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--ipvs-resync-shares") {
			t.Errorf("ResyncShares=%d: %v", n, err)
		}
	}
}

// Keys spread evenly: no share holds much more than its part of the work.
func TestSharesSpreadVirtualServersEvenly(t *testing.T) {
	const shares, keys = 10, 20000
	count := make([]int, shares)
	for i := range keys {
		k := ipvs.VirtualServerKey{Protocol: ipvs.Protocol(6 + 11*(i%2)), Address: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: uint16(80 + i%3)}
		count[shareOf(k, shares)]++
	}
	for s, n := range count {
		if n < keys/shares*8/10 || n > keys/shares*12/10 {
			t.Fatalf("share %d holds %d of %d keys: %v", s, n, keys, count)
		}
	}
}
