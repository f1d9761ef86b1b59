# selection.sh — sourced by run.sh and status.sh: which upstream specs the conformance run
# selects. The full run takes the Services [Conformance] specs first, then the rest of what
# concerns a service proxy; together they are what proxy_focus selects less the skips. The
# dual-stack cluster (run.sh --dual-stack) selects dual_stack_focus less dual_stack_skip instead;
# select_cluster sets selection_focus and selection_skip for either.

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

# The dual-stack cluster: upstream's dual-stack specs, all of them [Feature:IPv6DualStack] (so
# the IPv4 run's '\[Feature:' skip cannot apply), less these, each with its reason in
# docs/testing.md. "should provide Internet connection for containers [Feature:Networking-IPv6]"
# does not match the focus: it needs the Internet.
dual_stack_focus='\[sig-network\] .*(DualStack|IPv6DualStack|\[Feature:IPv6)'
dual_stack_skips=(
	'\[Feature:SCTPConnectivity\]'   # SCTP, opt-in upstream; the IPv4 run skips it too ('\[Feature:')
	'\[Disruptive\]'                 # as in the IPv4 run (none of the selected specs today)
	'LoadBalancer'                    # as in the IPv4 run (none of the selected specs today)
	'\[Slow\]'                       # as in the IPv4 run (none of the selected specs today)
)
dual_stack_skip=$(IFS='|'; echo "${dual_stack_skips[*]}")

# select_cluster CLUSTER: selection_focus and selection_skip of the specs a run on CLUSTER
# (ipv4, kube-proxy-ipvs, dual-stack) selects; the shards are cut from them.
select_cluster() {
	case $1 in
	dual-stack) selection_focus=$dual_stack_focus selection_skip=$dual_stack_skip ;;
	ipv4 | kube-proxy-ipvs) selection_focus=$proxy_focus selection_skip=$skip_all ;;
	*) echo "selection.sh: unknown cluster $1 (ipv4, dual-stack or kube-proxy-ipvs)" >&2; return 2 ;;
	esac
}

# dry_run_specs BIN DIR FOCUS SKIP: the names of the specs e2e.test selects with FOCUS and SKIP,
# sorted, one a line; ginkgo's dry run (nothing runs, no cluster needed) leaves its JUnit report
# in DIR.
dry_run_specs() {
	"$1/e2e.test" --ginkgo.dry-run --ginkgo.focus="$3" --ginkgo.skip="$4" --ginkgo.no-color \
		--ginkgo.junit-report="$2/dry-run.xml" >"$2/dry-run.log" 2>&1 || { cat "$2/dry-run.log" >&2; return 1; }
	"$1/conformanceledger" specs "$2/dry-run.xml"
}
