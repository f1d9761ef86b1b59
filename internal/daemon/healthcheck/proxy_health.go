package healthcheck

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// toBeDeletedTaint is the taint the Cluster Autoscaler puts on a node it is
// about to delete; a node carrying it answers 503 on /healthz so load
// balancers drain it first (kube-proxy KEP-3836).
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// ProxyHealth tracks whether the proxier keeps up with the changes it is
// given, with kube-proxy's ProxyHealthServer semantics:
//
//   - QueuedUpdate marks the oldest change not yet written to the kernel;
//     Updated clears it and records the time of the successful sync.
//   - The proxier is unhealthy once a queued change has waited healthTimeout
//     (twice the sync period, as kube-proxy's server.go sets it) or more.
//   - Until the first Updated the proxier counts as healthy, however old a
//     queued change is: kube-proxy (v1.36, v1.37) only judges IP families that have
//     synced at least once, so a slow first sync never fails the probe.
//   - /healthz additionally requires the node to be eligible (not being
//     deleted, no toBeDeletedTaint); /livez ignores the node.
//
// One proxier here programs every IP family in the same sync, so QueuedUpdate
// and Updated apply to all families given to SetIPFamilies.
type ProxyHealth struct {
	clock         clock.PassiveClock
	healthTimeout time.Duration

	lock                sync.RWMutex
	families            []v1.IPFamily
	lastUpdated         map[v1.IPFamily]time.Time
	oldestPendingQueued map[v1.IPFamily]time.Time
	nodeEligible        bool
	// programmed is set once a full sync has written every Service.
	programmed bool
	// listFailures are the required informers that cannot list or watch.
	listFailures map[string]listFailure
	healthzTotal *prometheus.CounterVec
	livezTotal   *prometheus.CounterVec
}

// NewProxyHealth returns the health of a proxier that syncs at least every
// syncPeriod. It reports IPv4 until SetIPFamilies says otherwise, and counts
// the node eligible until SyncNode says otherwise.
func NewProxyHealth(syncPeriod time.Duration, clock clock.PassiveClock) *ProxyHealth {
	return &ProxyHealth{
		clock:               clock,
		healthTimeout:       2 * syncPeriod,
		families:            []v1.IPFamily{v1.IPv4Protocol},
		lastUpdated:         map[v1.IPFamily]time.Time{},
		oldestPendingQueued: map[v1.IPFamily]time.Time{},
		// Eligible while starting up, until the Node object says otherwise.
		nodeEligible: true,
	}
}

// SetIPFamilies sets the IP families the proxier programs; they appear under
// "status" in the /healthz and /livez bodies. Call it before serving.
func (h *ProxyHealth) SetIPFamilies(families ...v1.IPFamily) {
	h.lock.Lock()
	defer h.lock.Unlock()
	h.families = append([]v1.IPFamily(nil), families...)
}

// CountResponses makes /healthz and /livez count their answers by status
// code, as kube-proxy's kubeproxy_proxy_healthz_total and
// kubeproxy_proxy_livez_total do (label "code"). Either may be nil.
func (h *ProxyHealth) CountResponses(healthz, livez *prometheus.CounterVec) {
	h.lock.Lock()
	defer h.lock.Unlock()
	h.healthzTotal, h.livezTotal = healthz, livez
}

// QueuedUpdate records that a change is queued and not yet synced. Only the
// oldest pending change counts, so repeated calls do not move the deadline.
func (h *ProxyHealth) QueuedUpdate() {
	h.lock.Lock()
	defer h.lock.Unlock()
	now := h.clock.Now()
	for _, family := range h.families {
		if _, pending := h.oldestPendingQueued[family]; !pending {
			h.oldestPendingQueued[family] = now
		}
	}
}

// Updated records a successful sync: nothing is pending any more.
func (h *ProxyHealth) Updated() {
	h.lock.Lock()
	defer h.lock.Unlock()
	now := h.clock.Now()
	for _, family := range h.families {
		delete(h.oldestPendingQueued, family)
		h.lastUpdated[family] = now
	}
}

// Programmed records that a full sync has completed: the kernel holds every
// Service the informers listed, so this node may take traffic. /readyz
// answers 503 until then; it never goes back (a later failing sync shows on
// /healthz and /livez, which judge the loop keeping up).
func (h *ProxyHealth) Programmed() {
	h.lock.Lock()
	defer h.lock.Unlock()
	h.programmed = true
}

// SyncNode records whether this node may receive load-balanced traffic: not
// when it is being deleted or carries toBeDeletedTaint. A nil node means the
// Node object is gone, which kube-proxy also treats as not eligible.
func (h *ProxyHealth) SyncNode(node *v1.Node) {
	eligible := node != nil && node.DeletionTimestamp.IsZero()
	if eligible {
		for _, taint := range node.Spec.Taints {
			if taint.Key == toBeDeletedTaint {
				eligible = false
				break
			}
		}
	}
	h.lock.Lock()
	defer h.lock.Unlock()
	h.nodeEligible = eligible
}

// NodeEligible reports the last SyncNode verdict.
func (h *ProxyHealth) NodeEligible() bool {
	h.lock.RLock()
	defer h.lock.RUnlock()
	return h.nodeEligible
}

// Healthy reports the proxier's own health, ignoring the node: what
// serviceProxyHealthy and /livez show.
func (h *ProxyHealth) Healthy() bool {
	return h.status().Healthy
}

// familyStatus is kube-proxy's ProxierHealth: one IP family's proxier.
type familyStatus struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// proxyStatus is the JSON body of /healthz and /livez, field for field
// kube-proxy's ProxyHealth (same names, order and omissions).
type proxyStatus struct {
	LastUpdated  time.Time `json:"lastUpdated"`
	CurrentTime  time.Time `json:"currentTime"`
	NodeEligible *bool     `json:"nodeEligible,omitempty"`
	// Programmed is only in /readyz's body.
	Programmed *bool                        `json:"programmed,omitempty"`
	Healthy    bool                         `json:"healthy"`
	Status     map[v1.IPFamily]familyStatus `json:"status,omitempty"`
	// ListFailures names each required resource the daemon cannot list or
	// watch, with the API server's answer (ours; kube-proxy has no such
	// field).
	ListFailures map[string]string `json:"listFailures,omitempty"`
}

func (h *ProxyHealth) status() proxyStatus {
	h.lock.RLock()
	defer h.lock.RUnlock()
	now := h.clock.Now()
	st := proxyStatus{CurrentTime: now, Healthy: true, Status: map[v1.IPFamily]familyStatus{}}
	for family, updated := range h.lastUpdated {
		if updated.After(st.LastUpdated) {
			st.LastUpdated = updated
		}
		healthy := true
		if queued, pending := h.oldestPendingQueued[family]; pending && now.Sub(queued) >= h.healthTimeout {
			healthy = false
			st.Healthy = false
		}
		st.Status[family] = familyStatus{LastUpdated: updated, Healthy: healthy}
	}
	st.ListFailures = h.currentListFailures(now)
	return st
}

// Handler serves /healthz, /livez and /readyz; any other path is 404.
func (h *ProxyHealth) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", h.serveHealthz)
	mux.HandleFunc("/livez", h.serveLivez)
	mux.HandleFunc("/readyz", h.serveReadyz)
	return mux
}

// serveReadyz is the DaemonSet's readiness: /livez's verdict, and 503 until
// the first full sync has completed. kube-proxy has no such endpoint; its
// /healthz counts a proxier that never synced as healthy (and must stay so
// for load balancers), which let a daemon that cannot reach the API server
// or read the kernel pass a rolling update on every node. The body
// is /livez's with "programmed" added.
func (h *ProxyHealth) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	st := h.status()
	h.lock.RLock()
	programmed := h.programmed
	h.lock.RUnlock()
	st.Programmed = &programmed
	// A list failing is a rollout that must stop here (an older
	// ClusterRole, a wrong kubeconfig); readiness only gates the rollout.
	h.respond(w, st, st.Healthy && programmed && len(st.ListFailures) == 0, nil)
}

// serveHealthz fails, beyond kube-proxy's rules, on a node that has never
// been programmed because a required list fails: it serves no Service, so
// load balancers must skip it. Once programmed, the kernel keeps serving
// the last state while the API cannot be read, and failing every node's
// probe at once would turn an API outage into a traffic outage: the body
// names the failure, the code stays.
func (h *ProxyHealth) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	st := h.status()
	eligible := h.NodeEligible()
	st.NodeEligible = &eligible
	h.lock.RLock()
	unprogrammedAndBlind := !h.programmed && len(st.ListFailures) > 0
	h.lock.RUnlock()
	h.respond(w, st, st.Healthy && eligible && !unprogrammedAndBlind, h.counter(true))
}

func (h *ProxyHealth) serveLivez(w http.ResponseWriter, _ *http.Request) {
	st := h.status()
	h.respond(w, st, st.Healthy, h.counter(false))
}

func (h *ProxyHealth) counter(healthz bool) *prometheus.CounterVec {
	h.lock.RLock()
	defer h.lock.RUnlock()
	if healthz {
		return h.healthzTotal
	}
	return h.livezTotal
}

func (h *ProxyHealth) respond(w http.ResponseWriter, st proxyStatus, healthy bool, total *prometheus.CounterVec) {
	code := http.StatusServiceUnavailable
	if healthy {
		code = http.StatusOK
		// kube-proxy keeps an old promise here: a healthy answer's
		// lastUpdated is "now", as when it meant "the sync loop last ran".
		st.LastUpdated = h.clock.Now()
	}
	if total != nil {
		total.WithLabelValues(strconv.Itoa(code)).Inc()
	}
	body, _ := json.Marshal(st) // cannot fail: times and plain fields only
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(body)
}

// ServeProxyHealth serves h's /healthz, /livez and /readyz on addr (kube-proxy's
// --healthz-bind-address, 0.0.0.0:10256 by default) until ctx is done.
func ServeProxyHealth(ctx context.Context, addr string, h *ProxyHealth, opts ...Option) error {
	return ListenAndServe(ctx, addr, h.Handler(), opts...)
}
