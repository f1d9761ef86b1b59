package healthcheck

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func hostPort(host string, port uint16) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// response is what a test looks at in an HTTP answer.
type response struct {
	code   int
	header http.Header
	body   string
}

// get sends one GET on a fresh connection. The client timeout only keeps a
// broken test from hanging; no test asserts on durations.
func get(t *testing.T, url string) response {
	t.Helper()
	resp, err := tryGet(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp
}

func tryGet(url string) (response, error) {
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
	}
	resp, err := client.Get(url)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{code: resp.StatusCode, header: resp.Header, body: string(body)}, nil
}

// waitServing polls until addr accepts HTTP, for servers started in a
// goroutine.
func waitServing(t *testing.T, url string) {
	t.Helper()
	for i := 0; i < 300; i++ {
		if _, err := tryGet(url); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never answered", url)
}

// refused reports whether a TCP connection to addr is refused.
func refused(t *testing.T, addr string) bool {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err == nil {
		conn.Close()
		return false
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v (want success or connection refused)", addr, err)
	}
	return true
}

// keptConn is a raw keep-alive HTTP/1.1 connection, to prove a listener was
// not restarted between two requests.
type keptConn struct {
	conn   net.Conn
	reader *bufio.Reader
}

func dialKept(t *testing.T, addr string) *keptConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &keptConn{conn: conn, reader: bufio.NewReader(conn)}
}

func (k *keptConn) get(t *testing.T, path string) (int, error) {
	t.Helper()
	k.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(k.conn, "GET "+path+" HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(k.reader, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// serveInBackground runs serve until the test ends and checks it returned nil.
func serveInBackground(t *testing.T, serve func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server returned %v after cancel, want nil", err)
		}
	})
}
