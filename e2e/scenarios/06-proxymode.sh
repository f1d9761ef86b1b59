# 06-proxymode.sh — seed: "curl localhost:10249/proxyMode" on a node. The seeds' kube-proxy
# answered iptables; this one answers ipvs, and its virtual servers use the twos scheduler.

scenario_6() {
	heading "The proxy mode, asked on each node"
	local n modes=() scheds=()
	for n in node1 node2; do
		ask "$n" "curl -s localhost:10249/proxyMode"
		modes+=("$answer")
		ask "$n" "ipvsadm -Ln | awk '/^(TCP|UDP)/ { print \$1, \$2, \$3 }'"
		scheds+=("$(awk '{ print $3 }' <<<"$answer" | sort -u | tr '\n' ' ')")
	done
	verdict 6 "proxyMode answers ipvs on both nodes; every virtual server uses twos" \
		bash -c "[[ '${modes[0]}' == ipvs && '${modes[1]}' == ipvs ]] || { echo 'proxyMode: ${modes[*]}'; exit 1; }
			[[ '${scheds[0]}' == 'twos ' && '${scheds[1]}' == 'twos ' ]] || { echo 'schedulers: ${scheds[*]}'; exit 1; }"
}
