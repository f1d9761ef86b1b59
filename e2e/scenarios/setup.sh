# setup.sh — the cluster the scenarios run on (sourced by guest.sh): the topology of
# e2e/topology/topology.sh, echo-server pods, Node objects, and one `ipvsproxy run` per node.
#
#   node1 198.51.100.1: web 10.244.1.10 (HTTP), s3 10.244.1.11 (HTTP), c1 10.244.1.20 (client),
#                       u1 10.244.1.40 (UDP)
#   node2 198.51.100.2: s2 10.244.2.10 (HTTP), c2 10.244.2.20 (client), u2 10.244.2.40 (UDP)
#   client 198.51.100.79 outside the cluster; load balancer VIP 203.0.113.140
# Dual-stack: node N also has 2001:db8:1::N, a pod 10.244.N.X also 2001:db8:244:N::X, the client
# 2001:db8:1::79, the load balancer VIP6 2001:db8:113::140 (e2e/topology/topology.sh); the API
# server's Service range is 10.96.0.0/16,2001:db8:96::/112 (e2e/run.sh).

readonly topo=$repo/e2e/topology/topology.sh
readonly ipvsproxy=$repo/bin/ipvsproxy
readonly node1_addr=198.51.100.1 node2_addr=198.51.100.2 client_addr=198.51.100.79 vip=203.0.113.140
readonly cluster_cidrs=10.244.0.0/16,2001:db8:244::/48
# Two periodic syncs bound how long stale state may survive (udp-endpoint-removed). e2e/suite/proxier_test.go
# has these three as constants of its own.
readonly sync_period=10s min_sync_period=100ms

# name node ip role (role: http, udp or client)
readonly pods="
web node1 10.244.1.10 http
s3 node1 10.244.1.11 http
c1 node1 10.244.1.20 client
u1 node1 10.244.1.40 udp
s2 node2 10.244.2.10 http
c2 node2 10.244.2.20 client
u2 node2 10.244.2.40 udp
"

pod_ip() { awk -v n="$1" '$1 == n { print $3 }' <<<"$pods"; }
setup_pods() {
	local name node ip role
	while read -r name node ip role; do
		[[ -n $name ]] || continue
		"$topo" add-pod "$node" "$name" "$ip" >/dev/null || return 1
		case $role in
		http) "$topo" echo "$name" -http :8080 -udp '' || return 1 ;;
		udp) "$topo" echo "$name" -http '' -udp :8081 || return 1 ;;
		esac
	done <<<"$pods"
}

# start_proxier NODE: one daemon in the node's namespace, as a DaemonSet pod with hostNetwork
# would run, with the proxier's own ServiceAccount token (deploy/base's RBAC).
# e2e/suite/proxier_test.go starts, stops and restarts the daemon of a Go scenario the same way
# (these flags, log and pid files): change both together.
start_proxier() {
	local node=$1
	echo "--- start $(date -u +%T.%N)" >>"$E2E_LOGS/ipvsproxy-$node.log"
	ip netns exec "$node" "$ipvsproxy" run \
		--kubeconfig "$PROXIER_KUBECONFIG" --hostname-override "$node" --lock-file "$(node_lock "$node")" \
		--cluster-cidr "$cluster_cidrs" \
		--ipvs-sync-period "$sync_period" --ipvs-min-sync-period "$min_sync_period" \
		${E2E_PROXIER_ARGS:-} >>"$E2E_LOGS/ipvsproxy-$node.log" 2>&1 &
	# ip netns exec execs the program: this is the daemon's pid.
	echo $! >"$E2E_LOGS/ipvsproxy-$node.pid"
}

# stop_proxier NODE [SIGNAL]
stop_proxier() {
	local f=$E2E_LOGS/ipvsproxy-$1.pid pid
	[[ -f $f ]] || return 0
	pid=$(<"$f")
	kill "-${2:-TERM}" "$pid" 2>/dev/null || true
	# wait reaps it when it is our child; the ones setup started in a subshell are not: poll
	# until it is gone or a zombie.
	wait "$pid" 2>/dev/null
	wait_until 30 bash -c "[[ ! -e /proc/$pid ]] || [[ \$(awk '{ print \$3 }' /proc/$pid/stat 2>/dev/null) == Z ]]"
	rm -f "$f"
}

# proxier_synced NODE: the daemon finished its first (full) sync. (/healthz is no sign: like
# kube-proxy's it answers 200 before the first sync.)
proxier_synced() {
	local n
	n=$(metric "$1" ipvsproxy_sync_full_total)
	[[ -n $n ]] && ((n >= 1))
}

setup_cluster() {
	mkdir -p "$E2E_LOGS"
	"$topo" down >/dev/null 2>&1
	"$topo" up >/dev/null || { echo "topology up failed"; return 1; }
	setup_pods || { echo "pods failed"; return 1; }
	kc create-nodes >/dev/null || { echo "create-nodes failed"; return 1; }
	start_proxier node1
	start_proxier node2
	# Under emulation the daemon takes seconds to start and list from the API server.
	wait_until 120 proxier_synced node1 || { echo "node1's proxier never became healthy"; return 1; }
	wait_until 120 proxier_synced node2 || { echo "node2's proxier never became healthy"; return 1; }
}

# metric NODE NAME: a metric's value from the node's /metrics (sum over its label sets).
metric() {
	ip netns exec "$1" curl -s --max-time 5 http://127.0.0.1:10249/metrics |
		awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $2; found = 1 } END { if (found) print s + 0 }'
}

# dump_node NODE: what the proxier wrote into a node, for failure reports.
dump_node() {
	local n=$1
	echo "----- $n: ipvsadm -Ln"
	ip netns exec "$n" ipvsadm -Ln
	echo "----- $n: ip addr show kube-ipvs0"
	ip -n "$n" addr show kube-ipvs0 2>&1
	ip -n "$n" route show table local dev kube-ipvs0 2>&1
	echo "----- $n: ipset list"
	ip netns exec "$n" ipset list 2>&1 | head -n 80
	echo "----- $n: iptables-save"
	ip netns exec "$n" iptables-save 2>&1
	echo "----- $n: conntrack -L"
	ip netns exec "$n" conntrack -L 2>&1 | head -n 40
	echo "----- $n: ipvsproxy log (last 60 lines)"
	tail -n 60 "$E2E_LOGS/ipvsproxy-$n.log" 2>&1
}
