# 10-cleanup.sh — `ipvsproxy cleanup` removes everything the proxier installed in a node: virtual
# servers, KUBE-* ipsets and chains, and the kube-ipvs0 interface.

scenario_10() {
	heading "ipvsproxy cleanup"
	local n failures=()
	for n in node1 node2; do
		stop_proxier "$n"
		ask "$n" "ipvsproxy cleanup"
		((status == 0)) || failures+=("$n: cleanup failed: $(oneline "$answer")")
		ask "$n" "ipvsadm -Ln | grep -E '^(TCP|UDP|FWM)'; ipset list -n | grep KUBE-; iptables-save | grep KUBE-; ip link show kube-ipvs0"
		[[ -z $(ip netns exec "$n" ipvsadm -Ln | grep -E '^(TCP|UDP|FWM)') ]] || failures+=("$n: virtual servers left")
		[[ -z $(ip netns exec "$n" ipset list -n | grep KUBE-) ]] || failures+=("$n: KUBE- ipsets left")
		[[ -z $(ip netns exec "$n" iptables-save | grep KUBE-) ]] || failures+=("$n: KUBE- iptables left")
		! ip -n "$n" link show kube-ipvs0 >/dev/null 2>&1 || failures+=("$n: kube-ipvs0 left")
	done
	verdict 10 "ipvsproxy cleanup leaves no IPVS service, KUBE-* ipset or chain, or kube-ipvs0" \
		no_failures "${failures[@]}"
}
