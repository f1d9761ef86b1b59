package healthcheck

import (
	"net"
	"sync/atomic"
)

// A connection cut for its client's sake (shed, or a write that failed: the
// reader did not take the answer before the write timeout) is closed with a
// reset, not a FIN. A FIN leaves the unsent answer queued in the kernel, on
// loopback up to 2 MB a connection, kept until the kernel gives the orphan
// up minutes later; slow readers cut one after another would pile it up. A
// reset frees it at once.

// resettingListener hands out resettingConns.
type resettingListener struct{ net.Listener }

func (l resettingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &resettingConn{Conn: c}, nil
}

// resettingConn resets on Close once a write has failed, and on abort.
type resettingConn struct {
	net.Conn
	writeFailed atomic.Bool
}

func (c *resettingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		c.writeFailed.Store(true)
	}
	return n, err
}

func (c *resettingConn) Close() error {
	if c.writeFailed.Load() {
		discardUnsent(c.Conn)
	}
	return c.Conn.Close()
}

// abort closes with a reset whatever happened before.
func (c *resettingConn) abort() error {
	discardUnsent(c.Conn)
	return c.Conn.Close()
}

// discardUnsent makes the next Close of c a reset (SO_LINGER 0), when c is
// a TCP connection or passes SetLinger on to one.
func discardUnsent(c net.Conn) {
	if l, ok := c.(interface{ SetLinger(int) error }); ok {
		_ = l.SetLinger(0)
	}
}

// abortConn closes c with a reset when it can.
func abortConn(c net.Conn) {
	if a, ok := c.(interface{ abort() error }); ok {
		a.abort()
		return
	}
	discardUnsent(c)
	c.Close()
}
