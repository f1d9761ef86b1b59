package healthcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"

	"github.com/ipvsproxy/ipvsproxy/internal/events"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// ReasonFailedToStartServiceHealthcheck is the reason of the Warning event
// recorded on a Service whose health-check node port cannot be bound.
const ReasonFailedToStartServiceHealthcheck = "FailedToStartServiceHealthcheck"

// ServiceHealthServer serves one health-check listener per Service with
// externalTrafficPolicy Local, on its spec.healthCheckNodePort. A load
// balancer probes it to learn whether this node has a local endpoint: 200
// when it has at least one and the proxier is healthy, 503 otherwise.
type ServiceHealthServer struct {
	nodeAddresses []netip.Prefix
	recorder      events.Recorder
	health        *ProxyHealth
	settings      settings

	lock     sync.RWMutex
	services map[types.NamespacedName]*serviceListener
}

// serviceListener is one Service's open health-check port: one listener per
// node address (or a single wildcard one), all answered by one http.Server.
type serviceListener struct {
	port           uint16
	localEndpoints int
	server         *http.Server
	listeners      []net.Listener
}

// NewServiceHealthServer returns a server with no listener yet. With
// nodeAddresses empty it listens on every address of the node; otherwise on
// each node address inside one of the prefixes (kube-proxy's
// --nodeport-addresses). recorder may be nil; health must not be.
func NewServiceHealthServer(nodeAddresses []netip.Prefix, recorder events.Recorder, health *ProxyHealth, opts ...Option) *ServiceHealthServer {
	return &ServiceHealthServer{
		nodeAddresses: append([]netip.Prefix(nil), nodeAddresses...),
		recorder:      recorder,
		health:        health,
		settings:      newSettings(opts),
		services:      map[types.NamespacedName]*serviceListener{},
	}
}

// SyncServices makes ports the set of open health checks: a Service missing
// from ports, or whose port changed, is closed; a new one is opened; the
// others are left alone, so their probes never see a gap. A port that cannot
// be bound is reported as a Warning event on the Service and tried again on
// the next call. The error is always nil, as in kube-proxy: one Service's
// port must not fail the sync of the others.
func (s *ServiceHealthServer) SyncServices(ports map[types.NamespacedName]uint16) error {
	s.lock.Lock()
	defer s.lock.Unlock()

	for name, svc := range s.services {
		if port, found := ports[name]; !found || port != svc.port {
			klog.V(2).InfoS("Closing service health check", "service", name, "port", svc.port)
			svc.close()
			delete(s.services, name)
		}
	}

	for name, port := range ports {
		if s.services[name] != nil {
			continue
		}
		if port == 0 {
			// No healthCheckNodePort allocated: listening on 0 would pick a
			// random port nobody probes.
			klog.V(2).InfoS("Service has no health check node port", "service", name)
			continue
		}
		klog.V(2).InfoS("Opening service health check", "service", name, "port", port)
		svc, err := s.open(name, port)
		if err != nil {
			s.reportListenFailure(name, port, err)
			continue
		}
		s.services[name] = svc
	}
	return nil
}

// SyncEndpoints sets each open Service's count of local ready endpoints; an
// open Service missing from localReady has none. Counts for Services that
// have no open health check are ignored.
func (s *ServiceHealthServer) SyncEndpoints(localReady map[types.NamespacedName]int) error {
	s.lock.Lock()
	defer s.lock.Unlock()
	for name, svc := range s.services {
		svc.localEndpoints = localReady[name]
	}
	return nil
}

// Close closes every listener.
func (s *ServiceHealthServer) Close() {
	s.lock.Lock()
	defer s.lock.Unlock()
	for name, svc := range s.services {
		svc.close()
		delete(s.services, name)
	}
}

// listenAddresses are the host:port strings one Service listens on.
func (s *ServiceHealthServer) listenAddresses(port uint16) ([]string, error) {
	portText := strconv.Itoa(int(port))
	if len(s.nodeAddresses) == 0 {
		return []string{net.JoinHostPort("", portText)}, nil
	}
	addrs, err := matchingHostAddresses(s.nodeAddresses, s.settings.hostAddresses)
	if err != nil {
		return nil, err
	}
	hostPorts := make([]string, 0, len(addrs))
	for _, addr := range addrs {
		if addr.Is6() && addr.IsLinkLocalUnicast() {
			// Cannot be bound without its zone (EINVAL), and no load
			// balancer probes one; kube-proxy never binds one either.
			continue
		}
		hostPorts = append(hostPorts, net.JoinHostPort(addr.String(), portText))
	}
	return hostPorts, nil
}

func (s *ServiceHealthServer) open(name types.NamespacedName, port uint16) (*serviceListener, error) {
	hostPorts, err := s.listenAddresses(port)
	if err != nil {
		return nil, err
	}
	if len(hostPorts) == 0 {
		// kube-proxy behaves the same: nothing to listen on is not a failure.
		klog.InfoS("No node address matches the node port addresses; health check not reachable", "service", name, "port", port)
	}
	svc := &serviceListener{port: port}
	svc.server = newHTTPServer(serviceHandler{name: name, server: s}, s.settings.limits)
	for _, hostPort := range hostPorts {
		ln, err := net.Listen("tcp", hostPort)
		if err != nil {
			// Release what was bound so the retry starts clean.
			svc.close()
			return nil, fmt.Errorf("listen on %s: %w", hostPort, err)
		}
		svc.listeners = append(svc.listeners, ln)
		go func() {
			if err := svc.server.Serve(resettingListener{ln}); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "Service health check stopped", "service", name, "address", hostPort)
			}
		}()
	}
	return svc, nil
}

// close stops serving and closes the listeners before returning, so the
// port refuses connections (and can be bound again) at once.
func (svc *serviceListener) close() {
	svc.server.Close()
	for _, ln := range svc.listeners {
		ln.Close() // already closed by Serve: nothing to report
	}
}

func (s *ServiceHealthServer) reportListenFailure(name types.NamespacedName, port uint16, err error) {
	msg := fmt.Sprintf("node %s failed to start healthcheck %q on port %d: %v", s.settings.nodeName, name.String(), port, err)
	klog.ErrorS(err, "Failed to start service health check", "node", s.settings.nodeName, "service", name, "port", port)
	if s.recorder == nil {
		return
	}
	ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: name.Namespace, Name: name.Name}
	s.recorder.Event(ref, v1.EventTypeWarning, ReasonFailedToStartServiceHealthcheck, msg)
}

// serviceHandler answers every path and method the same, as kube-proxy does:
// load balancers are configured with a path of their own choosing.
type serviceHandler struct {
	name   types.NamespacedName
	server *ServiceHealthServer
}

func (h serviceHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.server.lock.RLock()
	svc := h.server.services[h.name]
	count := 0
	if svc != nil {
		count = svc.localEndpoints
	}
	h.server.lock.RUnlock()
	if svc == nil {
		// A request that raced with closing. kube-proxy writes nothing (an
		// empty 200); 503 is the answer a load balancer should act on.
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	proxyHealthy := h.server.health.Healthy()

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
	if count > 0 && proxyHealthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	w.Write(serviceHealthBody(h.name, count, proxyHealthy))
}

// serviceHealthBody is kube-proxy's body to the byte: tab-indented JSON
// without a trailing newline.
func serviceHealthBody(name types.NamespacedName, localEndpoints int, proxyHealthy bool) []byte {
	namespace, _ := json.Marshal(name.Namespace)
	svcName, _ := json.Marshal(name.Name)
	return fmt.Appendf(nil, "{\n\t\"service\": {\n\t\t\"namespace\": %s,\n\t\t\"name\": %s\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %t\n}",
		namespace, svcName, localEndpoints, proxyHealthy)
}
