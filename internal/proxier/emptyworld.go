package proxier

import (
	"errors"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/snapshot"

	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// APIServerService is the API server's own Service. The API server
// re-creates it within seconds whenever it is missing, so every live
// cluster has it: a list without it is the wrong cluster (a kubeconfig
// pointing elsewhere) or a broken one (etcd restored empty), not a cluster
// whose every Service was deleted.
var APIServerService = types.NamespacedName{Namespace: "default", Name: "kubernetes"}

// errDeletionHeld is the status of a kernel object whose deletion waits for
// APIServerService.
var errDeletionHeld = errors.New("deletion held: the Service default/kubernetes is absent, so the Service list is not believed")

// deletionHold decides, once per sync, whether the reconciler may delete:
// while APIServerService is absent (at the first sync too) virtual servers,
// addresses and set members no Service wants stay, so one empty relist
// cannot take every Service off every node at once. Adds and updates go on.
// A proxier whose informers cannot see default/kubernetes (it carries a
// service-proxy-name label meant for another proxy) holds deletions for as
// long as that lasts; docs/architecture.md says so.
type deletionHold struct {
	held  bool
	since time.Time
}

// update reads the tracker at the start of a sync and reports whether the
// hold just ended: that sync must be full, so the held deletions go.
func (h *deletionHold) update(tracker *ipvsproxy.ChangeTracker, now time.Time) (released bool) {
	absent := tracker.Service(APIServerService) == nil
	switch {
	case absent && !h.held:
		h.held, h.since = true, now
		klog.InfoS("Holding deletions of virtual servers, addresses and set members: the Service default/kubernetes is absent, so the Service list is not believed (the wrong cluster, or an empty etcd); adds and updates go on", "service", APIServerService.String())
	case !absent && h.held:
		klog.InfoS("The Service default/kubernetes is back; the held deletions go through", "service", APIServerService.String(), "heldFor", now.Sub(h.since).Round(time.Second))
		h.held, h.since = false, time.Time{}
		return true
	}
	return false
}

// deletionsHeld reports whether the reconciler must leave objects nobody
// wants in the kernel; a delete operation then returns errHeld, and the
// object is pending with the reason.
func (r *reconciler) deletionsHeld() bool { return r.hold != nil && r.hold.held }

// errHeld is the outcome of a held deletion.
var errHeld = pendingError{errDeletionHeld}

// heldDeletions counts the kernel objects whose deletion is held.
func (s *statusTable) heldDeletions() int {
	n := 0
	for _, st := range s.objects {
		if st.state == snapshot.StatePending && st.lastError == errDeletionHeld {
			n++
		}
	}
	return n
}
