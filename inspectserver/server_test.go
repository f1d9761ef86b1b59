package inspectserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

func testSnapshot() snapshot.Snapshot {
	return snapshot.Snapshot{
		Node: snapshot.Node{Name: "node1"},
		VirtualServers: []snapshot.DesiredVirtualServer{{
			VirtualServer: ipvs.VirtualServer{VirtualServerKey: ipvs.VirtualServerKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80}, Scheduler: "twos"},
			Service:       "default/web", PortName: "http", Kind: ipvsproxy.KindClusterIP,
		}},
	}
}

func TestSnapshotIsServedReadOnly(t *testing.T) {
	srv := httptest.NewServer(Handler(testSnapshot))
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
