# 10-cleanup.sh — `ipvsproxy cleanup` removes everything the proxier installed in a node: virtual
# servers, KUBE-* ipsets and chains, and the kube-ipvs0 interface, for IPv6 as for IPv4: the
# dual-stack daemons made ip6tables chains, KUBE-6-* sets and IPv6 addresses and routes on
# kube-ipvs0 (checked present first, so their absence afterwards means something).

scenario_10() {
	heading "ipvsproxy cleanup"
	local n failures=()
	for n in node1 node2; do
		stop_proxier "$n"
		ask "$n" "ip6tables-save | grep -c KUBE-; ipset list -n | grep -c '^KUBE-6-'; ip -6 route show table local dev kube-ipvs0 | grep -c ."
		local before=($answer)
		[[ ${before[0]:-0} -gt 0 && ${before[1]:-0} -gt 0 && ${before[2]:-0} -gt 0 ]] ||
			failures+=("$n: before cleanup want IPv6 chains, KUBE-6-* sets and routes on kube-ipvs0, got counts '${answer//$'\n'/ }'")
		ask "$n" "ipvsproxy cleanup"
		((status == 0)) || failures+=("$n: cleanup failed: $(oneline "$answer")")
		ask "$n" "ipvsadm -Ln | grep -E '^(TCP|UDP|FWM)'; ipset list -n | grep KUBE-; iptables-save | grep KUBE-; ip link show kube-ipvs0"
		[[ -z $(ip netns exec "$n" ipvsadm -Ln | grep -E '^(TCP|UDP|FWM)') ]] || failures+=("$n: virtual servers left")
		[[ -z $(ip netns exec "$n" ipset list -n | grep KUBE-) ]] || failures+=("$n: KUBE- ipsets left")
		[[ -z $(ip netns exec "$n" iptables-save | grep KUBE-) ]] || failures+=("$n: KUBE- iptables left")
		! ip -n "$n" link show kube-ipvs0 >/dev/null 2>&1 || failures+=("$n: kube-ipvs0 left")
		ask "$n" "ip6tables-save | grep KUBE-; ip -6 route show table all proto 233; ip -6 addr show | grep -E '2001:db8:(96|113|114)::'"
		[[ -z $(ip netns exec "$n" ip6tables-save | grep KUBE-) ]] || failures+=("$n: KUBE- ip6tables left")
		[[ -z $(ip -n "$n" -6 route show table all proto 233) ]] || failures+=("$n: IPv6 routes of proto 233 left")
		[[ -z $(ip -n "$n" -6 addr show | grep -E '2001:db8:(96|113|114)::') ]] || failures+=("$n: IPv6 service addresses left")
	done
	verdict 10 "ipvsproxy cleanup leaves no IPVS service, KUBE-* or KUBE-6-* ipset, iptables or ip6tables chain, IPv6 route or address, or kube-ipvs0" \
		no_failures "${failures[@]}"
}
