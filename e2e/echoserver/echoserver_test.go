package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHTTPReportsClientAddressFirst(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "http://10.96.0.10/path?x=1", nil)
	req.RemoteAddr = "198.51.100.79:40000"
	rec := httptest.NewRecorder()
	echoHandler("pod-a").ServeHTTP(rec, req)

	lines := strings.Split(rec.Body.String(), "\n")
	want := []string{"CLIENT VALUES:", "client_address=198.51.100.79", "command=GET", "real path=/path", "query=x=1"}
	if len(lines) < len(want) {
		t.Fatalf("body too short:\n%s", rec.Body.String())
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d = %q, want %q\nbody:\n%s", i, lines[i], w, rec.Body.String())
		}
	}
	if !strings.Contains(rec.Body.String(), "hostname=pod-a\n") {
		t.Errorf("body does not name the server:\n%s", rec.Body.String())
	}
	if !strings.Contains(rec.Body.String(), "-no body in request-\n") {
		t.Errorf("empty body not reported as the tutorial's echoserver does:\n%s", rec.Body.String())
	}
}

func TestHTTPOverLoopbackSeesRealPeer(t *testing.T) {
	srv := httptest.NewServer(echoHandler("pod-b"))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body := string(raw)
	if !strings.Contains(body, "client_address=127.0.0.1\n") {
		t.Errorf("client_address is not the loopback peer:\n%s", body)
	}
	if !strings.Contains(body, "server_address=127.0.0.1:") {
		t.Errorf("server_address missing:\n%s", body)
	}
}

func TestUDPRepliesWithOwnNameAndClient(t *testing.T) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serveUDP(conn, "pod-c") }()

	client, err := net.Dial("udp", conn.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	client.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, err := client.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	want := "hostname=pod-c\nserver_address=" + conn.LocalAddr().String() +
		"\nclient_address=" + client.LocalAddr().String() + "\npayload=ping\n"
	if got := string(buf[:n]); got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}

	conn.Close()
	if err := <-done; err == nil {
		t.Error("serveUDP returned nil after its socket closed")
	}
}

func TestStreamSendsLinesUntilClientHangsUp(t *testing.T) {
	srv := httptest.NewServer(streamHandler("pod-s"))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/stream?every=20ms")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 256)
	chunk := make([]byte, 64)
	start := time.Now()
	for strings.Count(string(buf), "\n") < 3 {
		n, err := resp.Body.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err != nil {
			t.Fatalf("after %q: %v", buf, err)
		}
	}
	resp.Body.Close()
	if !strings.HasPrefix(string(buf), "seq=0 hostname=pod-s\nseq=1 hostname=pod-s\nseq=2 hostname=pod-s\n") {
		t.Errorf("stream = %q", buf)
	}
	// Three lines 20 ms apart: the lines are paced, not sent at once.
	if d := time.Since(start); d < 35*time.Millisecond {
		t.Errorf("three lines after %v, want paced by 20ms", d)
	}
}

func TestStreamRejectsBadInterval(t *testing.T) {
	rec := httptest.NewRecorder()
	streamHandler("pod-s").ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/stream?every=-1s", nil))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "every") {
		t.Errorf("got %d %q, want 400 naming every", rec.Code, rec.Body.String())
	}
}
