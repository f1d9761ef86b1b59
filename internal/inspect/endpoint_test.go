package inspect

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

func testSnapshot() snapshot.Snapshot {
	return snapshot.Snapshot{
		Node: snapshot.Node{Name: "node1"},
		VirtualServers: []snapshot.DesiredVirtualServer{{
			VirtualServer: ipvs.VirtualServer{VirtualServerKey: ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80}, Scheduler: "twos"},
			Service:       "default/web", PortName: "http", Kind: ipvsproxy.KindClusterIP.String(),
		}},
	}
}

// fixed is a Source whose generation the test moves; builds counts the
// Snapshots made.
type fixed struct {
	generation atomic.Uint64
	builds     atomic.Int64
	snapshot   func() snapshot.Snapshot
}

func (f *fixed) source() Source {
	return Source{Generation: f.generation.Load, Snapshot: func() snapshot.Snapshot {
		f.builds.Add(1)
		return f.snapshot()
	}}
}

func TestSnapshotIsServedReadOnly(t *testing.T) {
	src := &fixed{snapshot: testSnapshot}
	srv := httptest.NewServer(Handler(src.source(), DefaultLimits))
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, SnapshotPath, 200},
		{http.MethodHead, SnapshotPath, 200},
		{http.MethodPost, SnapshotPath, 405},
		{http.MethodPut, SnapshotPath, 405},
		{http.MethodDelete, SnapshotPath, 405},
		{http.MethodGet, "/inspect/v1/other", 404},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s = %d %s, want %d", c.method, c.path, resp.StatusCode, body, c.status)
		}
		if c.status == 405 && resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: Allow %q", c.method, resp.Header.Get("Allow"))
		}
		if c.method == http.MethodGet && c.status == 200 {
			var got snapshot.Snapshot
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("decode %s: %v", body, err)
			}
			if got.Node.Name != "node1" || len(got.VirtualServers) != 1 || got.VirtualServers[0].Address != netip.MustParseAddr("10.96.0.10") || got.VirtualServers[0].Service != "default/web" {
				t.Fatalf("round trip: %+v", got)
			}
		}
	}
}

// bigSnapshot is about n virtual servers' worth of JSON (some 200 bytes
// each).
func bigSnapshot(n int) func() snapshot.Snapshot {
	return func() snapshot.Snapshot {
		s := testSnapshot()
		vs := s.VirtualServers[0]
		s.VirtualServers = make([]snapshot.DesiredVirtualServer, n)
		for i := range s.VirtualServers {
			s.VirtualServers[i] = vs
			s.VirtualServers[i].Port = uint16(i)
		}
		return s
	}
}

// get sends method to url with the given Accept-Encoding ("" lets Go's
// client ask for gzip and inflate the answer itself) and returns the body
// as it came.
func get(t *testing.T, method, url, acceptEncoding string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every reader of one generation is written the same encoding, made once
// and kept compressed: as it is to a client that accepts gzip, inflated to
// one that does not; a new generation is encoded again; HEAD never encodes.
func TestOneEncodingPerGenerationSharedByAllReaders(t *testing.T) {
	src := &fixed{snapshot: bigSnapshot(1000)}
	srv := httptest.NewServer(Handler(src.source(), DefaultLimits))
	defer srv.Close()
	url := srv.URL + SnapshotPath

	for range 3 {
		if resp, body := get(t, http.MethodHead, url, "gzip"); resp.StatusCode != 200 || len(body) != 0 {
			t.Fatalf("HEAD = %d with %d bytes", resp.StatusCode, len(body))
		}
	}
	if n := src.builds.Load(); n != 0 {
		t.Fatalf("three HEADs made %d snapshots, want 0", n)
	}
	var first []byte
	for i := range 20 {
		encoding := []string{"gzip", "identity", ""}[i%3]
		resp, body := get(t, http.MethodGet, url, encoding)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %d = %d %s", i, resp.StatusCode, body)
		}
		if encoding == "gzip" {
			if resp.Header.Get("Content-Encoding") != "gzip" || resp.ContentLength != int64(len(body)) {
				t.Fatalf("gzip: Content-Encoding %q, Content-Length %d for %d bytes", resp.Header.Get("Content-Encoding"), resp.ContentLength, len(body))
			}
			body = gunzip(t, body)
		} else if resp.Header.Get("Content-Encoding") != "" && encoding == "identity" {
			t.Fatalf("identity: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
		}
		if first == nil {
			first = body
			var got snapshot.Snapshot
			if err := json.Unmarshal(body, &got); err != nil || len(got.VirtualServers) != 1000 {
				t.Fatalf("the answer: %d virtual servers, %v", len(got.VirtualServers), err)
			}
		} else if !bytes.Equal(body, first) {
			t.Fatalf("GET %d (%q) differs from the first of the same generation", i, encoding)
		}
	}
	if n := src.builds.Load(); n != 1 {
		t.Fatalf("20 GETs of one generation made %d snapshots, want 1", n)
	}
	// HEAD of a current encoding says its compressed length, without
	// making one.
	resp, gz := get(t, http.MethodGet, url, "gzip")
	if head, _ := get(t, http.MethodHead, url, "gzip"); head.ContentLength != int64(len(gz)) || resp.ContentLength != int64(len(gz)) {
		t.Errorf("HEAD Content-Length %d, want %d", head.ContentLength, len(gz))
	}
	src.generation.Add(1)
	get(t, http.MethodGet, url, "")
	get(t, http.MethodGet, url, "identity")
	if n := src.builds.Load(); n != 2 {
		t.Fatalf("after a new generation %d snapshots made, want 2", n)
	}
}

// stalledReader sends a GET for the snapshot and reads nothing: the
// answer stays in flight until the server's write deadline.
func stalledReader(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A small receive buffer: the answer cannot all be queued in the
	// kernel, so the server's write blocks.
	c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", SnapshotPath)
	return c
}

// Readers that stall hold at most MaxInFlight answers: another GET is
// refused at once with 503 and Retry-After, and a stalled reader is cut at
// the write deadline, which frees its slot.
func TestStalledReadersHoldAtMostMaxInFlightAnswersUntilTheWriteDeadline(t *testing.T) {
	src := &fixed{snapshot: bigSnapshot(100_000)} // about 20 MB
	limits := Limits{MaxInFlight: 2, WriteTimeout: time.Second}
	srv := httptest.NewServer(Handler(src.source(), limits))
	// Closed after the stalled readers (cleanups run last first): Close
	// waits for the answers in flight.
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	url := srv.URL + SnapshotPath

	stalled := []net.Conn{stalledReader(t, addr), stalledReader(t, addr)}
	// Both are in flight once each has its status line.
	for i, c := range stalled {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := bufio.NewReader(io.LimitReader(c, 64)).ReadString('\n')
		if err != nil || !strings.Contains(line, "200") {
			t.Fatalf("stalled reader %d: %q, %v", i, line, err)
		}
	}
	resp, body := get(t, http.MethodGet, url, "")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a third GET beside two stalled readers = %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if len(body) > 1024 {
		t.Errorf("the refusal is %d bytes", len(body))
	}
	// The write deadline cuts the stalled readers; their slots come back.
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, body := get(t, http.MethodGet, url, "")
		if resp.StatusCode == 200 {
			var got snapshot.Snapshot
			if err := json.Unmarshal(body, &got); err != nil || len(got.VirtualServers) != 100_000 {
				t.Fatalf("answer after the stalled readers were cut: %d virtual servers, %v", len(got.VirtualServers), err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d 20 s after the stalled readers' write deadline of %v", resp.StatusCode, limits.WriteTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := src.builds.Load(); n != 1 {
		t.Errorf("%d snapshots made for one generation, want 1", n)
	}
}

// The endpoint's encoding, element by element, is byte for byte
// encoding/json's of a whole Snapshot with every field set.
func TestEncodingByElementIsEncodingJSONs(t *testing.T) {
	s := bigSnapshot(3)()
	s.Taken = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Node.Addresses = []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}
	s.Addresses = []netip.Addr{netip.MustParseAddr("10.96.0.10")}
	s.Routes = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}
	s.Draining = []snapshot.DrainingRealServer{{Deadline: s.Taken}}
	s.Services = []snapshot.ServiceSummary{{Name: "default/web", Problems: []string{"a <problem> & \\u2028"}}}
	for _, snap := range []snapshot.Snapshot{s, {}} {
		var want, got bytes.Buffer
		if err := json.NewEncoder(&want).Encode(snap); err != nil {
			t.Fatal(err)
		}
		if err := encodeByElement(&got, snap); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("by element:\n%s\nencoding/json:\n%s", got.String(), want.String())
		}
	}
}
