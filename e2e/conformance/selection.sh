# selection.sh — sourced by run.sh and status.sh: which upstream specs the conformance run
# selects. The full run takes the Services [Conformance] specs first, then the rest of what
# concerns a service proxy; together they are what proxy_focus selects less the skips.

# Tests that cannot run in this cluster, by name, each with its reason in docs/testing.md
# ("Conformance: what is skipped and why"). Everything else that fails is a bug.
skips=(
	'\[Feature:'                       # alpha/beta features and cloud integrations not enabled here
	'\[Disruptive\]'                   # reboot or restart nodes and system components
	'LoadBalancer'                     # need a cloud load balancer (no cloud provider here)
	'\[Slow\]'                         # hours under emulation
	'\[sig-network\] DNS'               # CoreDNS's own tests; cmd/clusterdns answers only Service names
	'IPv6|DualStack|\[Feature:IPv6'    # the cluster is IPv4-only
	'Netpol|NetworkPolicy'             # needs a network-policy provider, not a service proxy
	'Ingress'                          # needs an ingress controller
	'should be able to handle large requests|Networking IPerf' # throughput, not correctness
)
default_focus='\[sig-network\] Services .*\[Conformance\]'
# The rest of what concerns a service proxy (other [Conformance] specs too); the Services
# [Conformance] specs ran in the first pass.
proxy_focus='\[sig-network\] (Services|Conntrack|Networking|KubeProxy|EndpointSlice|Service endpoints latency|Topology Hints|Traffic Distribution)'
skip_all=$(IFS='|'; echo "${skips[*]}")

# dry_run_specs BIN DIR FOCUS SKIP: the names of the specs e2e.test selects with FOCUS and SKIP,
# sorted, one a line; ginkgo's dry run (nothing runs, no cluster needed) leaves its JUnit report
# in DIR.
dry_run_specs() {
	"$1/e2e.test" --ginkgo.dry-run --ginkgo.focus="$3" --ginkgo.skip="$4" --ginkgo.no-color \
		--ginkgo.junit-report="$2/dry-run.xml" >"$2/dry-run.log" 2>&1 || { cat "$2/dry-run.log" >&2; return 1; }
	"$1/conformanceledger" specs "$2/dry-run.xml"
}
