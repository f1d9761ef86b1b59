package proxier

import (
	"sync/atomic"

	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

// Sources are what the informers feed: the change tracker and every Node's
// addresses, with the signal that a change waits. They exist before the
// proxier, so that the daemon's informers list the cluster while it finds
// its IP families and sets the kernel up (at 1,000 Services under emulation
// those took 5 s before the first list began); the proxier made from them
// (NewFromSources) syncs only once the informers have synced, as before.
type Sources struct {
	nodeName     string
	tracker      *ipvsproxy.ChangeTracker
	clusterNodes *ipvsproxy.ClusterNodes
	trigger      chan struct{}
	// onQueued is called whenever a change is queued; set while the
	// informers may already be calling requestSync.
	onQueued atomic.Pointer[func()]
}

// NewSources returns the sources of a proxier for node nodeName.
func NewSources(nodeName string) *Sources {
	s := &Sources{nodeName: nodeName, trigger: make(chan struct{}, 1)}
	s.tracker = ipvsproxy.NewChangeTracker(nodeName, s.requestSync)
	s.clusterNodes = ipvsproxy.NewClusterNodes(s.requestSync)
	return s
}

// Tracker is where informer events go.
func (s *Sources) Tracker() *ipvsproxy.ChangeTracker { return s.tracker }

// ClusterNodes is where an informer on all Nodes sends its events (the node
// guard: no external IP may take another Node's address).
func (s *Sources) ClusterNodes() *ipvsproxy.ClusterNodes { return s.clusterNodes }

func (s *Sources) requestSync() {
	if f := s.onQueued.Load(); f != nil {
		(*f)()
	}
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}
