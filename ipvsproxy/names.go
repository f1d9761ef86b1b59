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
}

func (p Problem) String() string {
	return fmt.Sprintf("%s %s/%s: %s: %s", p.Object.Kind, p.Object.Namespace, p.Object.Name, p.Reason, p.Message)
}

// Event reasons.
const (
	ReasonInvalidService  = "InvalidService"
	ReasonInvalidEndpoint = "InvalidEndpoint"
	ReasonPortConflict    = "PortConflict"
	// ReasonServiceTooLarge: the Service would overflow an ipset (limits.go).
	ReasonServiceTooLarge = "ServiceTooLarge"
)

func serviceRef(svc *v1.Service) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}
}
