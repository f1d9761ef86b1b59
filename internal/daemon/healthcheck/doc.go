// Package healthcheck owns the node-facing health answers of the proxier:
// the per-Service health-check node port listeners (Services with
// externalTrafficPolicy Local, probed by cloud load balancers) and the
// proxier's own /healthz and /livez on --healthz-bind-address.
//
// Both follow kube-proxy's pkg/proxy/healthcheck (v1.36, v1.37) byte for byte where
// clients can see it (status codes, headers, JSON bodies), because load
// balancers and probes already depend on that behaviour.
//
// It also owns the hardened HTTP serving (timeouts, header limits, a bounded
// number of connections per listener) that every node-facing server of the
// daemon uses, including the status server in package metrics.
//
// It never touches the kernel beyond opening and closing TCP listeners.
package healthcheck
