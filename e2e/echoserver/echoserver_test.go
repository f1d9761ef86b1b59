package main

import (
	"fmt"
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

// The migration scenarios trust the stream's report: a connection the server closes must be an
// error, and a pause in the lines must show as the longest gap.
func TestMeasureTCPReportsGapAndClose(t *testing.T) {
	srv := httptest.NewServer(echoHandler("pod-s"))
	defer srv.Close()
	m := newGapMeter()
	if err := measureTCP(srv.Listener.Addr().String(), m); err != nil {
		t.Fatal(err)
	}
	time.Sleep(450 * time.Millisecond)
	report, ok := m.report()
	if !ok || !strings.Contains(report, "senders=pod-s") || !strings.Contains(report, "error=none") {
		t.Fatalf("open stream: %s", report)
	}
	var got int
	fmt.Sscanf(report, "received=%d", &got)
	if got < 3 {
		t.Errorf("open stream: %d lines in 450 ms, want >= 3: %s", got, report)
	}
	srv.CloseClientConnections()
	time.Sleep(200 * time.Millisecond)
	if report, ok := m.report(); ok || !strings.Contains(report, "closed_by_the_peer") {
		t.Errorf("after the server closed the connection: %s, want error=closed_by_the_peer", report)
	}
}

func TestGapMeterCountsTheSilenceAtTheEnd(t *testing.T) {
	m := newGapMeter()
	m.arrived("a")
	m.arrived("a")
	time.Sleep(300 * time.Millisecond)
	report, _ := m.report()
	var got int
	var gap float64
	fmt.Sscanf(report, "received=%d max_gap=%f", &got, &gap)
	if got != 2 || gap < 0.3 {
		t.Errorf("report %q: want received=2 and max_gap >= 0.3", report)
	}
	var from, to float64
	if _, err := fmt.Sscanf(report[strings.Index(report, "pauses="):], "pauses=%f-%f", &from, &to); err != nil || to-from < 0.29 { // printed to the millisecond: 0.3 can read back as 0.2999
		t.Errorf("report %q: want the final silence as one pause of >= 0.3 s (%v)", report, err)
	}
}

// The silence before the first line counts too: a stream that connected
// and then waited 300 ms for its first line (a proxy that held the
// connection before it served) has a gap of that long. It once started
// counting at the first line.
func TestGapMeterCountsTheSilenceBeforeTheFirstLine(t *testing.T) {
	m := newGapMeter()
	time.Sleep(300 * time.Millisecond)
	m.arrived("a")
	m.arrived("a")
	report, _ := m.report()
	var got int
	var gap float64
	fmt.Sscanf(report, "received=%d max_gap=%f", &got, &gap)
	if got != 2 || gap < 0.29 {
		t.Errorf("report %q: want received=2 and max_gap >= 0.3", report)
	}
}
