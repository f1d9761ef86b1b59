// Package nodeaddresses publishes every Node's addresses in a few
// EndpointSlices that change only when an address does, so that a node's
// proxy learns the other Nodes' addresses (the node guard: no Service may
// take one) without watching every Node.
//
// A Node object changes at every status report of its kubelet (every five
// minutes, and whenever a condition flips), and the API server sends each
// change whole to every watcher: a proxy on each of N nodes watching all
// Nodes receives N updates per report period, N² in the cluster
// (docs/performance.md has the figures at 5,000 nodes). One Publisher (the
// `ipvsproxy publish-node-addresses` Deployment) watches the Nodes instead
// and keeps, in its namespace, one slice per family and shard of the Node
// names (Slices): an endpoint per address of a Node, the Node named. The
// daemons already watch every EndpointSlice; with
// --node-addresses-from=endpointslices they read these (ipvsproxy's
// ClusterNodes.SetPublished) and watch only their own Node, as kube-proxy
// does.
//
// It owns the slices labelled kubernetes.io/service-name=ipvsproxy-node-addresses
// in its namespace, and never touches another. No Service of that name
// exists: the slices belong to no Service, and no proxy programs them.
package nodeaddresses
