package healthcheck

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// connectionShedder keeps a server's open connections at or below a limit
// without ever refusing a new one: when a connection beyond the limit
// arrives, one of the client address holding the most connections is closed
// to make room, the one of them that has made no progress for the longest:
// waiting for a request (silent since accept, dribbling a header, idle
// between keep-alive requests) or busy with one (a reader too slow to take
// its answer, which the write timeout would cut later) since the longest
// time. So idle, slow and unread connections alike are bounded, and one
// client's flood pushes out its own connections, not the probe of another
// address, nor a probe of its own address that arrived after most of them.
//
// A limit enforced by not accepting (netutil.LimitListener) lets whoever
// holds the slots starve everyone else: 64 idle keep-alive connections, which
// need no authentication, kept every load balancer probe and the kubelet's
// /livez waiting until the idle timeout, so the node was drained and the
// daemon restarted. A probe is always the newest connection, so it is never
// the one shed on arrival, and it is answered within milliseconds.
type connectionShedder struct {
	max int

	mu    sync.Mutex
	conns map[net.Conn]*connEntry
	// perClient counts the tracked connections of each client address.
	perClient map[netip.Addr]int
}

type connEntry struct {
	client netip.Addr
	// since is when the connection last changed state: accepted, started
	// handling a request, or finished one.
	since time.Time
}

func newConnectionShedder(max int) *connectionShedder {
	return &connectionShedder{max: max, conns: map[net.Conn]*connEntry{}, perClient: map[netip.Addr]int{}}
}

// clientOf is the connection's remote address without its port (the zero
// Addr when it has none: such connections count as one client).
func clientOf(c net.Conn) netip.Addr {
	if c == nil || c.RemoteAddr() == nil {
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// track is an http.Server ConnState hook.
func (s *connectionShedder) track(c net.Conn, state http.ConnState) {
	var victim net.Conn
	s.mu.Lock()
	switch state {
	case http.StateNew:
		e := &connEntry{client: clientOf(c), since: time.Now()}
		s.conns[c] = e
		s.perClient[e.client]++
		if len(s.conns) > s.max {
			victim = s.victimExcept(c)
			if victim != nil {
				// Forget it now: its StateClosed comes later, and the
				// next arrival must not pick it again.
				s.forget(victim)
			}
		}
	case http.StateActive:
		if e := s.conns[c]; e != nil {
			e.since = time.Now()
		}
	case http.StateIdle:
		if e := s.conns[c]; e != nil {
			e.since = time.Now()
		}
	case http.StateHijacked, http.StateClosed:
		s.forget(c)
	}
	s.mu.Unlock()
	if victim != nil {
		// The server's read or write on it fails and it reports
		// StateClosed.
		abortConn(victim)
	}
}

func (s *connectionShedder) forget(c net.Conn) {
	e := s.conns[c]
	if e == nil {
		return
	}
	delete(s.conns, c)
	if s.perClient[e.client]--; s.perClient[e.client] <= 0 {
		delete(s.perClient, e.client)
	}
}

// victimExcept chooses among the connections, other than keep, of the
// client holding the most (the newcomer's own counted) the one longest in
// its state. Nil only when keep is alone.
func (s *connectionShedder) victimExcept(keep net.Conn) net.Conn {
	var client netip.Addr
	most := 0
	for a, n := range s.perClient {
		if a == s.conns[keep].client {
			n-- // keep is not a candidate
		}
		if n > most || (n == most && a.Less(client)) {
			client, most = a, n
		}
	}
	var victim net.Conn
	var since time.Time
	for c, e := range s.conns {
		if c != keep && e.client == client && (victim == nil || e.since.Before(since)) {
			victim, since = c, e.since
		}
	}
	return victim
}

// open counts the tracked connections.
func (s *connectionShedder) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
