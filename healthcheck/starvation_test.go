package healthcheck

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// hostileClients is how many idle or slow connections the starvation tests
// hold against one server (64 were enough to starve it before shedding).
const hostileClients = 2000

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

func TestProbesAnsweredWhileHostileClientsHoldConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("opens thousands of connections")
	}
	health := NewProxyHealth(syncPeriod, clock.RealClock{})
	health.Updated()

	t.Run("livez", func(t *testing.T) {
		base := startProxyHealth(t, health)
		holdHostileConnections(t, base[len("http://"):], hostileClients)
		for _, path := range []string{"/livez", "/healthz"} {
			if code, err := probe(base + path); err != nil || code != http.StatusOK {
				t.Errorf("%s behind %d hostile connections = %d, %v; want 200 within 1s", path, hostileClients, code, err)
			}
		}
	})
	t.Run("health check node port", func(t *testing.T) {
		s := NewServiceHealthServer(loopback, nil, health, onlyAddresses("127.0.0.1"))
		t.Cleanup(s.Close)
		name := types.NamespacedName{Namespace: "default", Name: "loadbalancer"}
		port := freePort(t)
		s.SyncServices(map[types.NamespacedName]uint16{name: port})
		s.SyncEndpoints(map[types.NamespacedName]int{name: 1})
		addr := hostPort("127.0.0.1", port)
		holdHostileConnections(t, addr, hostileClients)
		if code, err := probe("http://" + addr + "/"); err != nil || code != http.StatusOK {
			t.Errorf("health check node port behind %d hostile connections = %d, %v; want 200 within 1s", hostileClients, code, err)
		}
	})
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

// fakeConn is a net.Conn the shedder can close.
type fakeConn struct {
	net.Conn
	closed bool
}

func (c *fakeConn) Close() error { c.closed = true; return nil }

// The shedder's choice: the connection without a request in progress that
// has waited longest (since its accept, or since its last response), never
// a busy one, never the newcomer.
func TestShedderClosesTheLongestWaiting(t *testing.T) {
	s := newConnectionShedder(2)
	idle, dribbling, busy, third, fourth := &fakeConn{}, &fakeConn{}, &fakeConn{}, &fakeConn{}, &fakeConn{}
	s.track(idle, http.StateNew)
	s.track(idle, http.StateActive)
	s.track(dribbling, http.StateNew)
	time.Sleep(2 * time.Millisecond)
	s.track(idle, http.StateIdle) // served after dribbling came: dribbling waited longer
	s.track(third, http.StateNew)
	if !dribbling.closed || idle.closed || third.closed {
		t.Fatalf("closed: idle %v, dribbling %v, newcomer %v; want dribbling only", idle.closed, dribbling.closed, third.closed)
	}
	s.track(dribbling, http.StateClosed)
	s.track(third, http.StateActive) // busy from now on
	s.track(busy, http.StateNew)
	s.track(busy, http.StateActive)
	s.track(fourth, http.StateNew)
	if !idle.closed || third.closed || busy.closed || fourth.closed {
		t.Fatalf("closed: idle %v, busy %v %v, newcomer %v; want idle only", idle.closed, third.closed, busy.closed, fourth.closed)
	}
	if n := s.open(); n != 3 {
		t.Errorf("%d tracked, want 3 (two busy and the newcomer)", n)
	}
}
