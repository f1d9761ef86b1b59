// Package servicetest builds the Services and EndpointSlices of the tests on
// the fixed address plan (this node "node1" at 198.51.100.1, pods in
// 10.244.0.0/16, external and load-balancer IPs in 203.0.113.0/24), and
// compares what tests produce with golden files and with the generated parts
// of docs/ (-update rewrites them). Only tests import it.
package servicetest
