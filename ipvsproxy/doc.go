// Package ipvsproxy is the model of the proxier: what the kernel should hold
// for the Services and EndpointSlices of the cluster, computed without a
// single kernel call. It holds the configuration (Config, DefaultConfig,
// Validate), the ChangeTracker fed by the informers, BuildService (build.go:
// where a Service becomes IPVS entries) with its endpoint selection, the
// address guard every address a Service names passes (addressguard.go)
// and the scheduler annotation, and the desired state: the
// union of every ServiceState with clashes resolved and reference counts
// kept (desired.go).
//
// Data flows one way:
//
//	informers → ChangeTracker (per Service) → BuildService (pure, build.go)
//	→ DesiredState (conflicts resolved) → internal/proxier, the writer,
//	applies it through the kernel adapters
//
// It never touches the kernel: TestModelMakesNoKernelCalls (purity_test.go)
// fails if this package, or internal/owned whose names it uses, imports
// anything that can, or uses more of the adapters ipvs, ipset, iptables,
// conntrack and listeners than their value types and constants.
package ipvsproxy
