// Package cluster puts into the end-to-end API server what a kubelet and a
// controller manager would: Node objects, Services as a user writes them, and
// EndpointSlices standing in for pods; it also sets up the proxier's identity
// (the RBAC from deploy/, a ServiceAccount token, a kubeconfig).
//
// Nothing runs the EndpointSlice controller in this cluster, so slices written
// here carry the kubernetes.io/service-name label the proxier selects on and a
// managed-by label of their own (ManagedBy). The package only talks to the API
// server; it never touches the kernel or the network of a node.
package cluster
