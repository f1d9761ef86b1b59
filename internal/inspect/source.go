package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/internal/adapters"
	"github.com/ipvsproxy/ipvsproxy/internal/kernel/netif"
	"github.com/ipvsproxy/ipvsproxy/internal/owned"
	"github.com/ipvsproxy/ipvsproxy/internal/proxier"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Where the names come from: the running daemon, or the API server.

// FetchSnapshot asks the daemon's read-only endpoint at addr (host:port,
// the daemon's --metrics-bind-address) for its Snapshot.
func FetchSnapshot(ctx context.Context, addr string) (snapshot.Snapshot, string, error) {
	var snap snapshot.Snapshot
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	url := strings.TrimSuffix(base, "/") + SnapshotPath
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return snap, url, fmt.Errorf("the daemon address %q is not usable: %w", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return snap, url, fmt.Errorf("the daemon is not reachable at %s (is ipvsproxy running on this node, with this --metrics-bind-address?): %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return snap, url, fmt.Errorf("read the daemon's answer from %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return snap, url, fmt.Errorf("the daemon at %s answered %s (an older ipvsproxy without the inspect endpoint?)", url, resp.Status)
	}
	if err := json.Unmarshal(body, &snap); err != nil {
		return snap, url, fmt.Errorf("the daemon's answer from %s is not a snapshot: %w", url, err)
	}
	return snap, url, nil
}

// SnapshotFromObjects computes the Snapshot a proxier with cfg would hold
// on this node for the given objects (inspect --kubeconfig): it runs the
// proxier's own sync against in-memory fakes, so nothing is computed a
// second way. hostAddresses are the node's, as the daemon would read them.
func SnapshotFromObjects(cfg ipvsproxy.Config, nodeName string, node *v1.Node, hostAddresses []netip.Addr, services []*v1.Service, slices []*discovery.EndpointSlice) (snapshot.Snapshot, error) {
	nif := netif.NewFake(owned.DummyInterface)
	nif.SetHostAddresses(hostAddresses...)
	k, _, err := adapters.Open(adapters.Options{Fake: true, Families: adapters.BothFamilies, Links: nif})
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	p, err := proxier.New(cfg, nodeName, k, nil)
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	tr := p.Tracker()
	if node != nil {
		tr.SetNode(node)
	}
	for _, s := range services {
		tr.SetService(s)
	}
	for _, s := range slices {
		tr.SetEndpointSlice(s)
	}
	if res := p.Sync(); res.Err() != nil {
		return snapshot.Snapshot{}, fmt.Errorf("compute the desired state: %w", res.Err())
	}
	snap := p.Snapshot()
	// The status is of this computation, not of the daemon: leave it out.
	snap.Status = snapshot.SyncStatus{FailedWrites: []snapshot.FailedWrite{}, Objects: []snapshot.ObjectStatus{}}
	return snap, nil
}
