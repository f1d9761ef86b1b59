# 22-scheduler.sh — issue 14 item 12: a scheduler named by --ipvs-scheduler that the kernel lacks
# is a start-up error with a clear message (before: a silent fallback to wrr and a daemon that
# ran on). The daemon is started in a namespace of its own, so nothing of the nodes changes; it
# must exit non-zero within seconds, naming the flag. The running daemons' logs say which
# scheduler they use (the VM kernel has twos, so no fallback).

scenario_22() {
	heading "An explicit --ipvs-scheduler the kernel lacks stops the start-up"
	local ns=e2e-sched-$$
	ip netns add "$ns" && ip -n "$ns" link set lo up
	ask - "timeout 30 ip netns exec $ns $ipvsproxy run --kubeconfig $PROXIER_KUBECONFIG --hostname-override node1 --lock-file $(node_lock "$ns") --ip-families IPv4 --ipvs-scheduler no-such-scheduler 2>&1 | tail -n 3"
	local out=$answer
	ask - "timeout 30 ip netns exec $ns $ipvsproxy run --kubeconfig $PROXIER_KUBECONFIG --hostname-override node1 --lock-file $(node_lock "$ns") --ip-families IPv4 --ipvs-scheduler no-such-scheduler >/dev/null 2>&1; echo exit=\$?"
	local code=$answer
	ip netns del "$ns"
	ask - "grep -h -o 'Using the IPVS scheduler.*' $E2E_LOGS/ipvsproxy-node1.log | tail -n 1"
	local used=$answer
	verdict 22 "--ipvs-scheduler=no-such-scheduler exits with an error naming the flag; the running daemons log twos" \
		scheduler_ok "$out" "$code" "$used"
}

scheduler_ok() {
	local fail=()
	[[ $1 == *"--ipvs-scheduler=no-such-scheduler: the kernel has no such IPVS scheduler"* ]] || fail+=("output '$1' does not name the flag and the scheduler")
	[[ $2 == exit=1 ]] || fail+=("want exit=1 (an error, not the timeout's 124), got $2")
	[[ $3 == *'scheduler="twos"'* ]] || fail+=("node1's log does not say it uses twos: '$3'")
	no_failures "${fail[@]}"
}
