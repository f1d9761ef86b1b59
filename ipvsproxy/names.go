package ipvsproxy

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ServicePortName identifies one port of one Service.
type ServicePortName struct {
	types.NamespacedName
	Port     string
	Protocol v1.Protocol
}

// String renders "namespace/name:port/TCP" (no ":port" for an unnamed port).
func (n ServicePortName) String() string {
	if n.Port == "" {
		return fmt.Sprintf("%s/%s", n.NamespacedName, n.Protocol)
	}
	return fmt.Sprintf("%s:%s/%s", n.NamespacedName, n.Port, n.Protocol)
}

// Problem is bad input found while building: the object is skipped (wholly
// or in part) and reported as a Kubernetes Event and a log line.
type Problem struct {
	// Object is the Service or EndpointSlice at fault.
	Object v1.ObjectReference
	// Reason is the Event reason (CamelCase).
	Reason  string
	Message string
	// Scope says who posts the Event (report.go).
	Scope problemScope
}

// problemScope says which nodes post a problem's Event.
type problemScope int

const (
	// ScopeCluster: every node finds the problem in the same objects; a few
	// designated nodes post its Event, not all of them.
	ScopeCluster problemScope = iota
	// ScopeNode: the problem is a fact of this node (a port it listens on,
	// a virtual server someone created on it); this node posts it.
	ScopeNode
	// ScopeLog: legal input handled on purpose (an endpoint listed twice
	// while it moves between slices): logged, no Event.
	ScopeLog
)

func (p Problem) String() string {
	return fmt.Sprintf("%s %s/%s: %s: %s", p.Object.Kind, p.Object.Namespace, p.Object.Name, p.Reason, p.Message)
}

// Event reasons.
const (
	ReasonInvalidService  = "InvalidService"
	ReasonInvalidEndpoint = "InvalidEndpoint"
	ReasonPortConflict    = "PortConflict"
	// ReasonServiceTooLarge: the Service is beyond a per-Service cap
	// (limits.go), or would overflow an ipset or the node's real servers
	// (admission.go).
	ReasonServiceTooLarge = "ServiceTooLarge"
	// ReasonSchedulerNotAllowed: the Service's scheduler annotation names a
	// scheduler outside Config.AllowedSchedulers (scheduler_annotation.go).
	ReasonSchedulerNotAllowed = "SchedulerNotAllowed"
)

func serviceRef(svc *v1.Service) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}
}
