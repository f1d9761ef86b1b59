package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
)

// FieldManager names e2ectl's writes in managedFields.
const FieldManager = "e2ectl"

// ServiceRef names a Service; Namespace defaults to "default".
type ServiceRef struct {
	Namespace, Name string
}

// ParseServiceRef reads NAME or NAMESPACE/NAME.
func ParseServiceRef(s string) (ServiceRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		ns, name = metav1.NamespaceDefault, s
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return ServiceRef{}, fmt.Errorf("parse service %q: want NAME or NAMESPACE/NAME", s)
	}
	return ServiceRef{Namespace: ns, Name: name}, nil
}

func (r ServiceRef) String() string { return r.Namespace + "/" + r.Name }

// DecodeService reads one Service from YAML or JSON.
func DecodeService(r io.Reader) (*v1.Service, error) {
	svc := &v1.Service{}
	if err := utilyaml.NewYAMLOrJSONDecoder(r, 4096).Decode(svc); err != nil {
		return nil, fmt.Errorf("decode service: %w", err)
	}
	if svc.Kind != "" && svc.Kind != "Service" {
		return nil, fmt.Errorf("decode service: got kind %q", svc.Kind)
	}
	if svc.Name == "" {
		return nil, fmt.Errorf("decode service: metadata.name is empty")
	}
	if svc.Namespace == "" {
		svc.Namespace = metav1.NamespaceDefault
	}
	return svc, nil
}

// ApplyService writes svc with server-side apply, so the API server
// validates it against its schema and allocates what a user leaves out:
// clusterIP, nodePorts and healthCheckNodePort. It returns the stored object.
func ApplyService(ctx context.Context, cs kubernetes.Interface, svc *v1.Service) (*v1.Service, error) {
	svc = svc.DeepCopy()
	svc.APIVersion, svc.Kind = "v1", "Service"
	svc.ResourceVersion = ""
	body, err := json.Marshal(svc)
	if err != nil {
		return nil, fmt.Errorf("encode service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	force := true
	got, err := cs.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if err != nil {
		return nil, fmt.Errorf("apply service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return got, nil
}

// SetExternalTrafficPolicy patches spec.externalTrafficPolicy; going to Local
// on a LoadBalancer Service makes the API server allocate healthCheckNodePort,
// going back to Cluster releases it.
func SetExternalTrafficPolicy(ctx context.Context, cs kubernetes.Interface, ref ServiceRef, policy v1.ServiceExternalTrafficPolicy) (*v1.Service, error) {
	if policy != v1.ServiceExternalTrafficPolicyLocal && policy != v1.ServiceExternalTrafficPolicyCluster {
		return nil, fmt.Errorf("set externalTrafficPolicy of %s: %q is neither Local nor Cluster", ref, policy)
	}
	spec := map[string]any{"externalTrafficPolicy": policy}
	if policy == v1.ServiceExternalTrafficPolicyCluster {
		// A port left over from Local fails validation under Cluster.
		spec["healthCheckNodePort"] = nil
	}
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return nil, err
	}
	got, err := cs.CoreV1().Services(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("set externalTrafficPolicy of %s to %s: %w", ref, policy, err)
	}
	return got, nil
}

// ServiceInfo renders what the API server allocated for svc as KEY=VALUE
// lines a shell can eval: CLUSTER_IP, NODE_PORT_<port name or number>,
// HEALTH_CHECK_NODE_PORT, EXTERNAL_TRAFFIC_POLICY, TYPE, and
// INTERNAL_TRAFFIC_POLICY and TRAFFIC_DISTRIBUTION when set. Keys are sorted so
// the output is stable.
func ServiceInfo(svc *v1.Service) string {
	kv := map[string]string{
		"TYPE":                    string(svc.Spec.Type),
		"CLUSTER_IP":              svc.Spec.ClusterIP,
		"CLUSTER_IPS":             strings.Join(svc.Spec.ClusterIPs, ","),
		"EXTERNAL_TRAFFIC_POLICY": string(svc.Spec.ExternalTrafficPolicy),
		"HEALTH_CHECK_NODE_PORT":  fmt.Sprint(svc.Spec.HealthCheckNodePort),
	}
	// These two only when set, as most Services leave them.
	if p := svc.Spec.InternalTrafficPolicy; p != nil {
		kv["INTERNAL_TRAFFIC_POLICY"] = string(*p)
	}
	if d := svc.Spec.TrafficDistribution; d != nil {
		kv["TRAFFIC_DISTRIBUTION"] = *d
	}
	for _, p := range svc.Spec.Ports {
		key := p.Name
		if key == "" {
			key = fmt.Sprint(p.Port)
		}
		key = strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(key))
		kv["PORT_"+key] = fmt.Sprint(p.Port)
		kv["NODE_PORT_"+key] = fmt.Sprint(p.NodePort)
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, kv[k])
	}
	return b.String()
}
