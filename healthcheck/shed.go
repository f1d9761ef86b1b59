package healthcheck

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connectionShedder keeps a server's open connections at or below a limit
// without ever refusing a new one: when a connection beyond the limit
// arrives, the connection that has waited longest without a request in
// progress (silent since accept, dribbling a header, or idle between
// keep-alive requests) is closed to make room.
//
// A limit enforced by not accepting (netutil.LimitListener) lets whoever
// holds the slots starve everyone else: 64 idle keep-alive connections, which
// need no authentication, kept every load balancer probe and the kubelet's
// /livez waiting until the idle timeout, so the node was drained and the
// daemon restarted. A probe is always the newest connection, so it
// is never the one shed.
type connectionShedder struct {
	max int

	mu    sync.Mutex
	conns map[net.Conn]*connEntry
}

type connEntry struct {
	// busy is true while a request is being handled.
	busy bool
	// since is when the connection last started waiting for a request.
	since time.Time
}

func newConnectionShedder(max int) *connectionShedder {
	return &connectionShedder{max: max, conns: map[net.Conn]*connEntry{}}
}

// track is an http.Server ConnState hook.
func (s *connectionShedder) track(c net.Conn, state http.ConnState) {
	var victim net.Conn
	s.mu.Lock()
	switch state {
	case http.StateNew:
		s.conns[c] = &connEntry{since: time.Now()}
		if len(s.conns) > s.max {
			victim = s.oldestWaitingExcept(c)
			if victim != nil {
				// Forget it now: its StateClosed comes later, and the
				// next arrival must not pick it again.
				delete(s.conns, victim)
			}
		}
	case http.StateActive:
		if e := s.conns[c]; e != nil {
			e.busy = true
		}
	case http.StateIdle:
		if e := s.conns[c]; e != nil {
			e.busy, e.since = false, time.Now()
		}
	case http.StateHijacked, http.StateClosed:
		delete(s.conns, c)
	}
	s.mu.Unlock()
	if victim != nil {
		// The server's read on it fails and it reports StateClosed.
		victim.Close()
	}
}

// oldestWaitingExcept is the connection without a request in progress that
// has waited longest, other than keep; nil when every other one is busy
// (handlers here answer at once, so that passes quickly).
func (s *connectionShedder) oldestWaitingExcept(keep net.Conn) net.Conn {
	var oldest net.Conn
	var since time.Time
	for c, e := range s.conns {
		if c == keep || e.busy {
			continue
		}
		if oldest == nil || e.since.Before(since) {
			oldest, since = c, e.since
		}
	}
	return oldest
}

// open counts the tracked connections.
func (s *connectionShedder) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
