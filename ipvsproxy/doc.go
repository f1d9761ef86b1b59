// Package ipvsproxy is the model of the proxier: what the kernel should hold
// for the Services and EndpointSlices of the cluster, computed without a
// single kernel call. It holds the configuration (Config, DefaultConfig,
// Validate), the ChangeTracker fed by the informers, the Model (model.go)
// whose one entry point, Update, makes every decision of a build — which
// Services to rebuild, the routed Service CIDRs, BuildService (build.go:
// where a Service becomes IPVS entries) with its endpoint selection, the
// address guard every address a Service names passes (addressguard.go)
// and the Services depending on its facts, admission within the sets'
// and the node's limits (admission.go, readmit.go) — and the desired state:
// the union of every ServiceState with clashes resolved and reference
// counts kept (desired.go), changed by the Model alone.
//
// Data flows one way:
//
//	informers → ChangeTracker (per Service) → Model.Update (pure:
//	BuildService, admission, guards) → DesiredState (conflicts resolved)
//	→ internal/proxier, the writer, applies it through the kernel adapters
//	and reports what it found (Observed), which the model takes in
//
// The writer reads the desired state and never changes it: someone else's
// virtual server found in the kernel, or a Service CIDR route not in
// place, reaches the desired state only through Model.Update (what a read
// found) and Model.TakeIn (what a sync's writes found).
//
// It never touches the kernel: TestModelMakesNoKernelCalls (purity_test.go)
// fails if this package, or internal/owned whose names it uses, imports
// anything that can, or uses more of the adapters ipvs, ipset, iptables,
// conntrack and listeners than their value types and constants.
package ipvsproxy
