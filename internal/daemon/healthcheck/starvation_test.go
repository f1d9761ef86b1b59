package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// hostileClients is how many idle or slow connections the starvation tests
// hold against one server (64 were enough to starve it before shedding).
const hostileClients = 2000

// A hostile client is one way of holding a server's connections.
type hostileClient struct {
	name string
	// hold starts the load against addr; the load stops when the test
	// ends.
	hold func(t *testing.T, addr string)
}

var hostileClientKinds = []hostileClient{
	{"idle and slow-header connections", func(t *testing.T, addr string) { holdHostileConnections(t, addr, hostileClients) }},
	{"slow readers of a large answer", func(t *testing.T, addr string) { holdSlowReaders(t, addr, 300) }},
	{"a flood of new connections", func(t *testing.T, addr string) { floodConnections(t, addr, 2000) }},
}

// holdHostileConnections opens n connections to addr that never finish
// anything: even ones send a whole request and never read the answer (an
// idle keep-alive connection once it is served), odd ones send half a header
// and stop (a slow client). They are closed when the test ends.
func holdHostileConnections(t *testing.T, addr string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("hostile connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		msg := "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
		if i%2 == 1 {
			msg = "GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: "
		}
		// A connection the server already shed fails here: that is the
		// point, not an error of the test.
		c.SetWriteDeadline(time.Now().Add(time.Second))
		c.Write([]byte(msg))
	}
}

// largeAnswerPath is an 8 MB answer beside the probes, as the metrics
// address serves /metrics and /inspect/ beside /healthz. A server without it
// (a health check node port) answers it like any path: small.
const largeAnswerPath = "/large"

var largeAnswer = make([]byte, 8<<20)

// holdSlowReaders opens n connections that each ask for the large answer
// and never read it, with a receive buffer of 2 KiB: the server's write
// blocks once the socket buffers are full, and the request stays in progress
// (a busy connection, not an idle one) until the write timeout.
func holdSlowReaders(t *testing.T, addr string, n int) {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}
	for i := 0; i < n; i++ {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("slow reader %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetWriteDeadline(time.Now().Add(time.Second))
		c.Write([]byte("GET " + largeAnswerPath + " HTTP/1.1\r\nHost: x\r\n\r\n"))
	}
}

// floodConnections opens perSecond new connections a second from four
// goroutines until the test ends, from 127.0.0.2 (the probes come from
// 127.0.0.1): each sends half a header, and a goroutine keeps its last 64
// open and closes older ones, so the server sees a stream of new
// connections far beyond its limit. The rate is one the server's accept
// loop keeps up with on a busy 2-core machine: a faster flood fills the
// kernel's accept queue, which holds a probe behind it whatever the server
// does (kube-proxy's servers alike).
func floodConnections(t *testing.T, addr string, perSecond int) {
	t.Helper()
	const workers = 4
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	for range workers {
		wg.Go(func() {
			var kept []net.Conn
			defer func() {
				for _, c := range kept {
					c.Close()
				}
			}()
			tick := time.NewTicker(time.Second * workers / time.Duration(perSecond))
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				c, err := d.Dial("tcp", addr)
				if err != nil {
					continue
				}
				c.SetWriteDeadline(time.Now().Add(time.Second))
				c.Write([]byte("GET /livez HTTP/1.1\r\nHost: x\r\n"))
				if kept = append(kept, c); len(kept) > 64 {
					kept[0].Close()
					kept = kept[1:]
				}
			}
		})
	}
}

// probe is a load balancer's or kubelet's probe: one GET on a fresh
// connection that gives up after a second, as a probe with timeoutSeconds 1.
func probe(url string) (int, error) {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// probeRepeatedly probes url ten times, a tenth of a second apart, while
// the hostile clients hold on: each must be answered 200 within a second.
func probeRepeatedly(t *testing.T, what, url string) {
	t.Helper()
	for i := range 10 {
		if code, err := probe(url); err != nil || code != http.StatusOK {
			t.Errorf("%s, probe %d of 10: %d, %v; want 200 within 1s", what, i+1, code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// countingListener counts the connections the server holds open (accepted,
// not yet closed) and the most it held at once.
type countingListener struct {
	net.Listener
	open, peak atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := l.open.Add(1)
	for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
	}
	return &countedConn{Conn: c, l: l}, nil
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

// SetLinger passes on to the TCP connection, so a reset stays a reset.
func (c *countedConn) SetLinger(sec int) error {
	return c.Conn.(*net.TCPConn).SetLinger(sec)
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// The probe endpoints answer every probe while hostile clients hold on, and
// the server never holds more than MaxConnections (and the one just
// accepted): neither idle, slow, unread nor endless new connections starve
// the kubelet's and the load balancers' probes or grow the daemon.
func TestProbesAnsweredAndConnectionsBoundedUnderHostileClients(t *testing.T) {
	if testing.Short() {
		t.Skip("opens thousands of connections")
	}
	health := NewProxyHealth(syncPeriod, clock.RealClock{})
	health.Updated()
	// A smaller cap than the default's 256 keeps the slow readers' socket
	// buffers (2 MB each on loopback) small; the bound is the same rule.
	limits := DefaultServerLimits
	limits.MaxConnections = 64

	for _, kind := range hostileClientKinds {
		t.Run("livez/"+kind.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			counted := &countingListener{Listener: ln}
			mux := http.NewServeMux()
			mux.Handle("/", health.Handler())
			mux.HandleFunc(largeAnswerPath, func(w http.ResponseWriter, _ *http.Request) { w.Write(largeAnswer) })
			serveInBackground(t, func(ctx context.Context) error { return Serve(ctx, counted, mux, WithServerLimits(limits)) })
			base := "http://" + ln.Addr().String()
			waitServing(t, base+"/livez")
			kind.hold(t, ln.Addr().String())
			// The server has accepted the burst of connections (on 2
			// loaded cores, the slow readers' first answers take a second
			// to copy into the kernel).
			waitServing(t, base+"/livez")
			probeRepeatedly(t, "/livez behind "+kind.name, base+"/livez")
			probeRepeatedly(t, "/healthz behind "+kind.name, base+"/healthz")
			if peak, max := counted.peak.Load(), int64(limits.MaxConnections); peak > max+1 {
				t.Errorf("the server held %d connections at once behind %s, want at most %d", peak, kind.name, max+1)
			}
		})
		t.Run("health check node port/"+kind.name, func(t *testing.T) {
			s := NewServiceHealthServer(loopback, nil, health, onlyAddresses("127.0.0.1"), WithServerLimits(limits))
			t.Cleanup(s.Close)
			name := types.NamespacedName{Namespace: "default", Name: "loadbalancer"}
			port := freePort(t)
			s.SyncServices(map[types.NamespacedName]uint16{name: port})
			s.SyncEndpoints(map[types.NamespacedName]int{name: 1})
			addr := hostPort("127.0.0.1", port)
			waitServing(t, "http://"+addr+"/")
			kind.hold(t, addr)
			waitServing(t, "http://"+addr+"/")
			probeRepeatedly(t, "health check node port behind "+kind.name, "http://"+addr+"/")
		})
	}
}

func TestServeShedsTheLongestWaitingConnection(t *testing.T) {
	// Room for two connections, timeouts far beyond the test: only shedding
	// can make room.
	limits := DefaultServerLimits
	limits.ReadHeaderTimeout = time.Hour
	limits.ReadTimeout = time.Hour
	limits.IdleTimeout = time.Hour
	limits.MaxConnections = 2
	addr := serveOK(t, limits)

	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	// Served once, then idle on keep-alive.
	fmt.Fprint(first, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 512)
	first.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := first.Read(buf); err != nil {
		t.Fatalf("first request: %v", err)
	}
	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	fmt.Fprint(second, "GET / HTTP/1.1\r\nHost: x\r\n") // never finished

	// A third connection exceeds the limit: it is served and one of the two
	// waiting ones is closed. Which one depends on when the server records
	// the first as idle: net/http does so after the response is flushed, so
	// a client that reads it at once can open the second before that, and
	// the second has then waited longer (seen once on an idle machine). The
	// choice itself is TestShedderClosesTheLongestWaiting's.
	if got := get(t, "http://"+addr+"/"); got.code != http.StatusOK || got.body != "served" {
		t.Fatalf("third connection = %d %q", got.code, got.body)
	}
	closed := make(chan string, 2)
	for name, c := range map[string]net.Conn{"first": first, "second": second} {
		go func() {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			// Closed by the server: an end of file, or a reset when it
			// closed the connection before reading what the client sent
			// (the second's partial header, on a loaded machine). Only the
			// deadline means it stayed open.
			_, err := io.ReadAll(c)
			var ne net.Error
			if err == nil || !(errors.As(err, &ne) && ne.Timeout()) {
				closed <- name
			} else {
				closed <- ""
			}
		}()
	}
	shed := 0
	for range 2 {
		if <-closed != "" {
			shed++
		}
	}
	if shed != 1 {
		t.Errorf("%d of the two waiting connections closed, want 1", shed)
	}
}

// fakeConn is a net.Conn the shedder can close, from client (127.0.0.1
// when empty).
type fakeConn struct {
	net.Conn
	client string
	closed bool
}

func (c *fakeConn) Close() error { c.closed = true; return nil }

func (c *fakeConn) RemoteAddr() net.Addr {
	client := c.client
	if client == "" {
		client = "127.0.0.1"
	}
	return &net.TCPAddr{IP: net.ParseIP(client), Port: 40000}
}

// The shedder's choice: the connection that has made no progress for the
// longest, waiting (since its accept, or since its last response) or busy
// (since its request began: a reader that never takes its answer), never
// the newcomer; so a probe not read yet outlives a busy connection that
// stalled before it came.
func TestShedderClosesTheConnectionLongestWithoutProgress(t *testing.T) {
	step := func() { time.Sleep(2 * time.Millisecond) }
	s := newConnectionShedder(2)
	idle, dribbling, third, busy, probe, fourth := &fakeConn{}, &fakeConn{}, &fakeConn{}, &fakeConn{}, &fakeConn{}, &fakeConn{}
	closed := func() string {
		var out []string
		for name, c := range map[string]*fakeConn{"idle": idle, "dribbling": dribbling, "third": third, "busy": busy, "probe": probe, "fourth": fourth} {
			if c.closed {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	s.track(idle, http.StateNew)
	s.track(idle, http.StateActive)
	s.track(dribbling, http.StateNew)
	step()
	s.track(idle, http.StateIdle) // served after dribbling came: dribbling waited longer
	s.track(third, http.StateNew)
	if got := closed(); got != "dribbling" {
		t.Fatalf("closed: %q; want dribbling", got)
	}
	s.track(dribbling, http.StateClosed)
	step()
	s.track(third, http.StateActive) // busy from now on
	step()
	s.track(busy, http.StateNew)
	if got := closed(); got != "dribbling idle" {
		t.Fatalf("closed: %q; want idle too (idle before third began its request)", got)
	}
	s.track(idle, http.StateClosed)
	s.track(busy, http.StateActive)
	step()
	s.track(probe, http.StateNew) // sent its request; not read yet
	if got := closed(); got != "dribbling idle third" {
		t.Fatalf("closed: %q; want third too (busy longest)", got)
	}
	s.track(third, http.StateClosed)
	step()
	s.track(fourth, http.StateNew)
	if got := closed(); got != "busy dribbling idle third" {
		t.Fatalf("closed: %q; want busy too: it stalled before the probe came", got)
	}
	if n := s.open(); n != 2 {
		t.Errorf("%d tracked, want 2 (the probe and the newcomer)", n)
	}
}

// A client address that holds most of the connections loses one of its
// own, even a newer one than another client's waiting connection: a flood
// from one address does not push out a probe from another that the server
// has not read yet.
func TestShedderClosesAConnectionOfTheClientHoldingMost(t *testing.T) {
	s := newConnectionShedder(3)
	probe := &fakeConn{client: "192.0.2.1"}
	s.track(probe, http.StateNew) // not read yet: waiting, the oldest
	var flood []*fakeConn
	for range 5 {
		c := &fakeConn{client: "198.51.100.7"}
		flood = append(flood, c)
		s.track(c, http.StateNew)
	}
	if probe.closed {
		t.Fatal("the probe was shed for a flood from another address")
	}
	for i, c := range flood {
		if want := i < 3; c.closed != want {
			t.Errorf("flood connection %d closed %v, want %v (its own oldest first)", i, c.closed, want)
		}
	}
	if n := s.open(); n != 3 {
		t.Errorf("%d tracked, want 3", n)
	}
}
