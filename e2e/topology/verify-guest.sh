#!/usr/bin/env bash
# verify-guest.sh — runs inside the VM (see verify.sh): builds the topology, proves each path the
# scenarios rely on, tears it down, and prints PASS/FAIL lines and `N passed, N failed`.
# Needs ECHOSERVER (the e2e/echoserver binary).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
topo=$here/topology.sh
passed=0 failed=0

check() {
	local name=$1
	shift
	local out
	if out=$("$@" 2>&1); then
		passed=$((passed + 1))
		echo "PASS $name"
	else
		failed=$((failed + 1))
		echo "FAIL $name"
		echo "$out" | sed 's/^/    /'
	fi
}

# expect_line NS URL LINE: GET URL from NS and require LINE among the body's lines.
expect_line() {
	local body
	body=$("$topo" exec "$1" curl -sS --max-time 10 "$2") || return 1
	echo "$body" | head -4
	grep -qx "$3" <<<"$body"
}

udp_ask() { "$topo" exec "$1" bash -c "echo ping | socat -T5 - UDP:$2"; }

expect_udp() {
	local reply
	reply=$(udp_ask "$1" "$2") || return 1
	echo "$reply"
	grep -qx "$3" <<<"$reply"
}

# lb_answers PORT N: N requests from the client through the VIP; print which node answered each.
lb_answers() {
	for _ in $(seq "$2"); do
		"$topo" exec client curl -sS --max-time 10 "http://203.0.113.140:$1/" | grep -E '^(hostname|client_address)=' | tr '\n' ' '
		echo
	done
}

no_netns_left() {
	local left
	left=$(ip netns list)
	[[ -z $left ]] || { echo "left behind: $left"; return 1; }
	! ip link show e2ebr0 2>/dev/null
}

if [[ ${1:-} == --lb-answers ]]; then
	lb_answers "$2" "$3"
	exit
fi

"$topo" down >/dev/null
check "topology up" "$topo" up
check "pod1 on node1" "$topo" add-pod node1 pod1 10.244.1.10
check "pod2 on node2" "$topo" add-pod node2 pod2 10.244.2.10
check "pod3 on node1" "$topo" add-pod node1 pod3 10.244.1.11
for p in pod1 pod2 pod3; do
	check "echoserver in $p" "$topo" echo "$p" -http :8080 -udp :8081
done

check "pod1 -> pod2 across nodes keeps the pod source" \
	expect_line pod1 http://10.244.2.10:8080/ client_address=10.244.1.10
check "pod3 -> pod1 on one node keeps the pod source" \
	expect_line pod3 http://10.244.1.10:8080/ client_address=10.244.1.11
check "node2 -> pod1 sees the node address" \
	expect_line node2 http://10.244.1.10:8080/ client_address=198.51.100.2
check "UDP reply names the endpoint" \
	expect_udp pod1 10.244.2.10:8081 hostname=pod2
check "client cannot reach pods directly (outside the cluster)" \
	bash -c "! '$topo' exec client curl -sS --max-time 3 http://10.244.2.10:8080/"

# The load balancer: stand in for the proxier by binding the VIP on a dummy kube-ipvs0 in each
# node and serving HTTP there; node1 also answers a health check, node2 does not.
for n in node1 node2; do
	check "$n binds the VIP on kube-ipvs0" bash -c "
		ip -n $n link add kube-ipvs0 type dummy &&
		ip -n $n addr add 203.0.113.140/32 dev kube-ipvs0"
	check "echoserver in $n on :80" "$topo" echo "$n" -http :80 -udp ''
done
check "lb to both nodes (no health check)" "$topo" lb-add tcp 80
check "through the LB the node sees the client's address" \
	expect_line client http://203.0.113.140:80/ client_address=198.51.100.79
check "LB spreads over both nodes" bash -c "
	out=\$('$here/verify-guest.sh' --lb-answers 80 6)
	echo \"\$out\"
	grep -q hostname=node1 <<<\"\$out\" && grep -q hostname=node2 <<<\"\$out\""
check "lb-del" "$topo" lb-del tcp 80

check "health-check server on node1:30100" bash -c "
	'$topo' exec node1 '$ECHOSERVER' -name hc -http :30100 -udp '' >/dev/null 2>&1 &
	echo \$! >/run/e2e-topology/node1.hc.pid"
check "lb with health check 30100" "$topo" lb-add tcp 80 30100
sleep 8 # the checker polls every second; emulated curl is slow
check "only the healthy node gets traffic, with the client's address" bash -c "
	out=\$('$here/verify-guest.sh' --lb-answers 80 4)
	echo \"\$out\"
	ipvsadm_out=\$('$topo' exec lb ipvsadm -Ln); echo \"\$ipvsadm_out\"
	[[ \$(grep 'client_address=198.51.100.79 ' <<<\"\$out\" | grep -c 'hostname=node1 ') == 4 ]]"

if [[ -n ${E2E_HOST_ADDR:-} && -n ${E2E_HOST_PORT:-} ]]; then
	# The path a proxier in a node takes to an API server on the host's loopback.
	check "node1 reaches the host's loopback through the restricted NIC" \
		expect_line node1 "http://$E2E_HOST_ADDR:$E2E_HOST_PORT/" host-loopback-ok
fi

check "topology down" "$topo" down
check "nothing left behind" no_netns_left

echo "$passed passed, $failed failed"
((failed == 0))
