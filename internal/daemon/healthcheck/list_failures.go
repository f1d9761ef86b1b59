package healthcheck

import "time"

// listFailureStale is how long a failed list of a required resource counts
// without a newer failure. While a list keeps failing client-go's reflector
// retries at least every minute (30 s backoff cap, doubled by its jitter),
// so an older failure is one the reflector has since got past, even when
// nothing told us of the success.
const listFailureStale = 90 * time.Second

// listFailure is the last failure of one resource's list or watch.
type listFailure struct {
	reason string
	at     time.Time
}

// ListFailing records that the informer on resource (as the API names it:
// "services", "endpointslices.discovery.k8s.io", "nodes") could not list or
// watch, for reason. Until ListRecovered, or for listFailureStale after the
// last call, every body of /healthz, /livez and /readyz names it under
// "listFailures"; /readyz answers 503, and so does /healthz while no full
// sync has programmed the node (it then serves no Service at all).
func (h *ProxyHealth) ListFailing(resource, reason string) {
	h.lock.Lock()
	defer h.lock.Unlock()
	if h.listFailures == nil {
		h.listFailures = map[string]listFailure{}
	}
	h.listFailures[resource] = listFailure{reason: reason, at: h.clock.Now()}
}

// ListRecovered records that resource's informer listed or watched again.
func (h *ProxyHealth) ListRecovered(resource string) {
	h.lock.Lock()
	defer h.lock.Unlock()
	delete(h.listFailures, resource)
}

// currentListFailures are the failures not yet stale, by resource; nil when
// none. Called with the lock held.
func (h *ProxyHealth) currentListFailures(now time.Time) map[string]string {
	var out map[string]string
	for resource, f := range h.listFailures {
		if now.Sub(f.at) >= listFailureStale {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[resource] = f.reason
	}
	return out
}
