//go:build fakekernel

package main

// fakeKernel: this build of the daemon (go build -tags fakekernel) programs
// every adapter's in-memory Fake and nothing of the host, whatever it is
// told: the simulations of docs/performance.md run one or hundreds of real
// daemons against a real API server on one machine (the cost of watching
// every Node, a fleet starting at once) without a kernel each. No release
// is built with it.
const fakeKernel = true
