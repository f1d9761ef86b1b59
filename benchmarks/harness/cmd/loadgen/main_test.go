package main

import (
	"net"
	"testing"
	"time"
)

// echoListener accepts and drops connections on loopback, as the HTTP echo server would.
func echoListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func TestConnectTimesEveryConnection(t *testing.T) {
	r, err := connectTimes(echoListener(t), 50, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.N != 50 || r.Failed != 0 {
		t.Fatalf("%d timed, %d failed; want 50 and 0", r.N, r.Failed)
	}
	if !(r.P50 > 0 && r.P50 <= r.P99 && r.P99 <= r.Max) {
		t.Errorf("percentiles out of order: %+v", r)
	}
}

func TestConnectToNothingIsAnError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := connectTimes(addr, 3, time.Second); err == nil {
		t.Error("no listener, yet connect reported times")
	}
}

func TestRateCountsConnectionsAndCPU(t *testing.T) {
	r, err := connectRate(echoListener(t), 300*time.Millisecond, 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Connections == 0 || r.PerSecond <= 0 {
		t.Fatalf("%+v: no connections counted", r)
	}
	if r.BusySeconds < 0 || r.SoftirqSecs < 0 {
		t.Errorf("negative CPU: %+v", r.cpuUse)
	}
}

func TestUDPRateGetsAnswers(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(buf[:n], from)
		}
	}()
	r, err := udpRate(pc.LocalAddr().String(), 200*time.Millisecond, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Answered == 0 || r.Lost != 0 {
		t.Errorf("%+v: want answers and none lost", r)
	}
}

// The sink never accepts, yet the kernel completes every handshake: held connections need no
// server process.
func TestSinkHoldsConnectionsItNeverAccepts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conns, failed := openConnections(ln.Addr().String(), 40, 4, []net.IP{net.ParseIP("127.0.0.2"), net.ParseIP("127.0.0.3")}, time.Second)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if len(conns) != 40 || failed != 0 {
		t.Fatalf("%d held, %d failed; want 40 and 0", len(conns), failed)
	}
	seen := map[string]bool{}
	for _, c := range conns {
		seen[c.LocalAddr().(*net.TCPAddr).IP.String()] = true
	}
	if !seen["127.0.0.2"] || !seen["127.0.0.3"] {
		t.Errorf("sources used %v, want both", seen)
	}
}

func TestParseCPU(t *testing.T) {
	c, err := parseCPU("cpu  100 5 50 1000 7 3 20 1 0 0")
	if err != nil {
		t.Fatal(err)
	}
	if c.busy() != 179 {
		t.Errorf("busy %d, want 179 (all but idle and iowait)", c.busy())
	}
	u := c.since(cpuTicks{}, 179)
	if u.BusySeconds != 1.79 || u.SoftirqSecs != 0.2 || u.BusyPerConnMs != 10 {
		t.Errorf("%+v", u)
	}
	if _, err := parseCPU("intr 1 2 3"); err == nil {
		t.Error("a line that is not cpu was parsed")
	}
}

func TestSummarizeNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	s := summarize(d)
	if s.p50 != 50 || s.p90 != 90 || s.p99 != 99 || s.max != 100 || s.mean != 50.5 {
		t.Errorf("%+v", s)
	}
}
