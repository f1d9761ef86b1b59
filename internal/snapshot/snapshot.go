// Package snapshot is the read-only account of a node's proxier: the
// desired kernel state with the Kubernetes name of every object, and how its
// syncs went. The daemon serves it to `ipvsproxy inspect` as JSON; inspect
// names, checks (--check) and traces (package rules) from it. The writer
// fills it; nothing here reads or writes the kernel.
package snapshot

import (
	"net/netip"
	"time"

	"github.com/ipvsproxy/ipvsproxy/internal/kernel/ipvs"
	"github.com/ipvsproxy/ipvsproxy/ipvsproxy"
)

// Snapshot is a read-only copy of what the proxier wants from this node's
// kernel, with the Kubernetes names of every object and the sync status.
// The daemon serves it as JSON to `ipvsproxy inspect` (inspect.Handler);
// inspect names the kernel's objects with it, compares the
// kernel against it (--check) and traces packets through it (Trace). It is
// the same desired state the reconciler writes, never a second computation.
type Snapshot struct {
	Taken  time.Time        `json:"taken"`
	Node   Node             `json:"node"`
	Config ipvsproxy.Config `json:"config"`
	// VirtualServers are the winning desired virtual servers, sorted by key.
	VirtualServers []DesiredVirtualServer `json:"virtualServers"`
	// Addresses are bound on kube-ipvs0.
	Addresses []netip.Addr `json:"addresses"`
	// Routes are the Service CIDRs made local by one route each on
	// kube-ipvs0 (routes.go); their cluster IPs are not in Addresses.
	Routes     []netip.Prefix       `json:"routes"`
	SetEntries []ipvsproxy.SetEntry `json:"setEntries"`
	// Draining are removed TCP real servers at weight 0 waiting for their
	// connections to end.
	Draining []DrainingRealServer `json:"draining"`
	Services []ServiceSummary     `json:"services"`
	Status   SyncStatus           `json:"status"`
}

// Node is this node as the builder saw it.
type Node struct {
	Name string `json:"name"`
	Zone string `json:"zone,omitempty"`
	// Addresses are the node's own addresses (not kube-ipvs0's).
	Addresses []netip.Addr `json:"addresses"`
	// PodCIDRs are the Node's spec.podCIDRs (--detect-local-mode NodeCIDR).
	PodCIDRs []netip.Prefix `json:"podCIDRs,omitempty"`
}

// DesiredVirtualServer is one virtual server with the Service port it serves.
type DesiredVirtualServer struct {
	ipvs.VirtualServer
	// Service is "namespace/name"; PortName the Service port's name.
	Service  string `json:"service"`
	PortName string `json:"portName"`
	// Kind is ClusterIP, NodePort, LoadBalancer or ExternalIP.
	Kind string `json:"kind"`
	// LocalOnly: only this node's endpoints serve it (a Local policy).
	LocalOnly bool `json:"localOnly"`
	// InClusterOnly: a Local policy without an endpoint here; in-cluster
	// sources get the cluster endpoints, other sources are dropped.
	InClusterOnly bool `json:"inClusterOnly,omitempty"`
	// TopologyHints: the endpoints were narrowed by topology hints for this
	// node or its zone.
	TopologyHints bool                `json:"topologyHints"`
	RealServers   []DesiredRealServer `json:"realServers"`
}

// ServicePort renders "namespace/name:port" (no ":port" for an unnamed port).
func (vs DesiredVirtualServer) ServicePort() string {
	if vs.PortName == "" {
		return vs.Service
	}
	return vs.Service + ":" + vs.PortName
}

// DesiredRealServer is one real server with the endpoint behind it.
type DesiredRealServer struct {
	ipvs.RealServer
	NodeName string `json:"nodeName,omitempty"`
	// Condition is ready, serving-terminating or unknown (the endpoint
	// changed since the last sync).
	Condition string `json:"condition"`
}

// Endpoint conditions as inspect shows them.
const (
	ConditionReady              = "ready"
	ConditionServingTerminating = "serving-terminating"
	ConditionDraining           = "draining"
	ConditionUnknown            = "unknown"
)

// DrainingRealServer is a real server at weight 0 until Deadline.
type DrainingRealServer struct {
	VirtualServer ipvs.VirtualServerKey `json:"virtualServer"`
	RealServer    ipvs.RealServerKey    `json:"realServer"`
	Deadline      time.Time             `json:"deadline"`
}

// ServiceSummary is one Service's share of the desired state.
type ServiceSummary struct {
	Name                string   `json:"name"`
	HealthCheckNodePort uint16   `json:"healthCheckNodePort,omitempty"`
	LocalReadyEndpoints int      `json:"localReadyEndpoints"`
	Problems            []string `json:"problems,omitempty"`
}
