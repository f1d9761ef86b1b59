# 50-ipv6.sh — IPv6 and dual-stack traffic. Every namespace of the topology has an IPv6 address
# beside its IPv4 one (node N 2001:db8:1::N, pod 10.244.N.X also 2001:db8:244:N::X, client
# 2001:db8:1::79, VIP6 2001:db8:113::140), the API server's Service range is dual-stack and the
# daemons run with --ip-families auto (both families). Each scenario sends real packets over IPv6
# and checks the address the echo server saw, as the IPv4 scenarios do:
#   50 RequireDualStack ClusterIP: both cluster IPs answer; pods keep their IPv4 and IPv6 address
#   51 PreferDualStack (IPv6 first) and IPv6-only Services
#   52 NodePort on the nodes' IPv6 addresses: Cluster SNATs, Local keeps the client's address,
#      the node without a local endpoint drops the client (timeout, no reset)
#   53 LoadBalancer with an IPv6 ingress IP, Local: healthCheckNodePort over IPv6, LB keeps client
#   54 loadBalancerSourceRanges with an IPv6 range
#   55 externalIPs over IPv6
#   56 UDP over IPv6: the stale flow of a deleted endpoint is cleaned up
#   57 inspect and inspect trace for an IPv6 Service
# (10, cleanup, also checks that no IPv6 object is left.) NodePorts 30601-30609 clash with nothing.

# v6_curl WHERE URL: curl with a short timeout; $answer is the body's hostname= and
# client_address= lines (each followed by a space), or curl's message; $status is curl's exit
# status (28: timed out, no reply; 7: refused or unreachable).
v6_curl() {
	ask "$1" "curl -gsS --max-time 3 '$2' | grep -E '^(hostname|client_address)=' | tr '\n' ' '; exit \${PIPESTATUS[0]}"
}

# v6_expect TEXT...: collect a failure unless the last v6_curl succeeded and its answer holds
# every TEXT.
v6_expect() {
	local want
	if ((status != 0)); then
		v6_failures+=("${asked[-1]}: curl exit $status, want an answer")
		return
	fi
	for want in "$@"; do
		[[ $answer == *"$want"* ]] || v6_failures+=("${asked[-1]}: want '$want'")
	done
}

# v6_expect_timeout: the last v6_curl got no answer at all (dropped, not refused).
v6_expect_timeout() {
	((status == 28)) || v6_failures+=("${asked[-1]}: curl exit $status, want 28 (timed out: dropped silently)")
}

# v6_service NAME YAML ENDPOINT...: apply the Service, set its endpoints; sets v6_info.
v6_service() {
	local name=$1 yaml=$2
	shift 2
	v6_info=$(kc apply-service - <<<"$yaml") || { v6_failures+=("apply-service $name failed: $v6_info"); return 1; }
	show - "e2ectl apply-service $name.yaml" "$(grep -E '^(TYPE|CLUSTER_IPS|EXTERNAL_TRAFFIC_POLICY|HEALTH_CHECK_NODE_PORT)=' <<<"$v6_info")"
	kc set-endpoints "$name" "$@" || { v6_failures+=("set-endpoints $name failed"); return 1; }
	show - "e2ectl set-endpoints $name $*" ""
}

# v6_family_ip FAMILY: the cluster IP of that family (4 or 6) in $v6_info.
v6_family_ip() {
	local ip
	for ip in $(field CLUSTER_IPS "$v6_info" | tr ',' ' '); do
		if [[ $1 == 6 && $ip == *:* ]] || [[ $1 == 4 && $ip != *:* ]]; then
			echo "$ip"
			return
		fi
	done
}

# v6_wait NODE PROTO VS WANT: wait_real_servers, a failure collected when it times out.
v6_wait() {
	wait_real_servers "$@" || v6_failures+=("$1: real servers of $3 never became '$4': $(real_servers "$1" "$2" "$3" | tr '\n' ' ')")
}

scenario_50() {
	heading "Dual-stack ClusterIP (RequireDualStack): both cluster IPs answer, pods keep their address"
	v6_failures=()
	v6_service v6-dual "
apiVersion: v1
kind: Service
metadata: {name: v6-dual}
spec:
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
" "$(pod_ip web)@node1" "$(pod_ip6 web)@node1" || { verdict 50 "dual-stack ClusterIP" no_failures "${v6_failures[@]}"; return; }
	local ip4 ip6
	ip4=$(v6_family_ip 4) ip6=$(v6_family_ip 6)
	[[ -n $ip4 && -n $ip6 ]] || v6_failures+=("CLUSTER_IPS '$(field CLUSTER_IPS "$v6_info")': want one of each family")
	v6_wait node1 tcp "$ip4:80" "$(pod_ip web):8080"
	v6_wait node1 tcp "[$ip6]:80" "[$(pod_ip6 web)]:8080"
	v6_wait node2 tcp "[$ip6]:80" "[$(pod_ip6 web)]:8080"
	local c
	for c in c1 c2; do
		v6_curl "$c" "http://$ip4/"
		v6_expect "hostname=web" "client_address=$(pod_ip "$c") "
		v6_curl "$c" "http://[$ip6]/"
		v6_expect "hostname=web" "client_address=$(pod_ip6 "$c") "
	done
	verdict 50 "RequireDualStack ClusterIP $ip4 and [$ip6]: c1 and c2 (same and other node) answered on both, seen as their own IPv4 and IPv6 address" \
		no_failures "${v6_failures[@]}"
}

scenario_51() {
	heading "PreferDualStack (IPv6 first) and IPv6-only Services"
	v6_failures=()
	v6_service v6-prefer "
apiVersion: v1
kind: Service
metadata: {name: v6-prefer}
spec:
  ipFamilyPolicy: PreferDualStack
  ipFamilies: [IPv6, IPv4]
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
" "$(pod_ip s2)@node2" "$(pod_ip6 s2)@node2" || { verdict 51 "PreferDualStack and IPv6-only" no_failures "${v6_failures[@]}"; return; }
	local prefer_ips=$(field CLUSTER_IPS "$v6_info") prefer_primary=$(field CLUSTER_IP "$v6_info")
	local p4 p6
	p4=$(v6_family_ip 4) p6=$(v6_family_ip 6)
	[[ $prefer_primary == *:* && -n $p4 ]] || v6_failures+=("v6-prefer CLUSTER_IP $prefer_primary CLUSTER_IPS $prefer_ips: want IPv6 first, then IPv4")
	v6_service v6-only "
apiVersion: v1
kind: Service
metadata: {name: v6-only}
spec:
  ipFamilyPolicy: SingleStack
  ipFamilies: [IPv6]
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
" "$(pod_ip6 s3)@node1" || { verdict 51 "PreferDualStack and IPv6-only" no_failures "${v6_failures[@]}"; return; }
	local only=$(field CLUSTER_IPS "$v6_info")
	[[ $only == *:* && $only != *,* ]] || v6_failures+=("v6-only CLUSTER_IPS '$only': want one IPv6 address")
	v6_wait node1 tcp "[$p6]:80" "[$(pod_ip6 s2)]:8080"
	v6_wait node1 tcp "$p4:80" "$(pod_ip s2):8080"
	v6_wait node2 tcp "[$only]:80" "[$(pod_ip6 s3)]:8080"
	v6_curl c1 "http://[$p6]/"
	v6_expect "hostname=s2" "client_address=$(pod_ip6 c1) "
	v6_curl c1 "http://$p4/"
	v6_expect "hostname=s2" "client_address=$(pod_ip c1) "
	v6_curl c2 "http://[$only]/"
	v6_expect "hostname=s3" "client_address=$(pod_ip6 c2) "
	# The IPv6-only Service has no IPv4 virtual server and its address is in no IPv4 set.
	ask node1 "ipvsadm -Ln | grep -c '$only' ; ipset list -n | grep KUBE-6-CLUSTER-IP; ipset test KUBE-6-CLUSTER-IP $only,tcp:80"
	((status == 0)) || v6_failures+=("node1: [$only]:80 not in KUBE-6-CLUSTER-IP")
	verdict 51 "PreferDualStack [$p6] (primary) and $p4, IPv6-only [$only]: served from the other node, c1/c2 seen as their own addresses" \
		no_failures "${v6_failures[@]}"
}

scenario_52() {
	heading "NodePort on the nodes' IPv6 addresses: Cluster SNATs, Local keeps the client"
	v6_failures=()
	v6_service v6-nodeport "
apiVersion: v1
kind: Service
metadata: {name: v6-nodeport}
spec:
  type: NodePort
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 80, targetPort: 8080, nodePort: 30601, protocol: TCP}]
" "$(pod_ip web)@node1" "$(pod_ip6 web)@node1" || { verdict 52 "IPv6 NodePort" no_failures "${v6_failures[@]}"; return; }
	v6_wait node2 tcp "[$node2_addr6]:30601" "[$(pod_ip6 web)]:8080"
	v6_wait node1 tcp "[$node1_addr6]:30601" "[$(pod_ip6 web)]:8080"
	# Cluster: either node answers; the pod sees the node that forwarded it (node1 itself or node2,
	# whose address on the way to the pod is its own).
	v6_curl client "http://[$node1_addr6]:30601/"
	v6_expect "hostname=web" "client_address=$node1_addr6 "
	v6_curl client "http://[$node2_addr6]:30601/"
	v6_expect "hostname=web" "client_address=$node2_addr6 "
	# IPv4 still served the same way on this dual-stack Service.
	v6_curl client "http://$node2_addr:30601/"
	v6_expect "hostname=web" "client_address=$node2_addr "

	show - "e2ectl patch-etp v6-nodeport Local" "$(kc patch-etp v6-nodeport Local | grep EXTERNAL_TRAFFIC_POLICY)"
	# Both daemons see the change within a sync: node1 first keeps the client's address.
	wait_until 30 bash -c "ip netns exec client curl -gs --max-time 2 'http://[$node1_addr6]:30601/' | grep -qx 'client_address=$client_addr6'" ||
		v6_failures+=("node1 never kept the client's address after the patch to Local")
	sleep 2
	v6_curl client "http://[$node1_addr6]:30601/"
	v6_expect "hostname=web" "client_address=$client_addr6 "
	v6_curl client "http://[$node2_addr6]:30601/"
	v6_expect_timeout
	verdict 52 "IPv6 NodePort 30601: Cluster seen as $node1_addr6 via node1 and $node2_addr6 via node2 (SNAT), IPv4 too; Local via node1 keeps $client_addr6, node2 without endpoint drops (curl 28)" \
		no_failures "${v6_failures[@]}"
}

scenario_53() {
	heading "LoadBalancer with an IPv6 ingress IP, Local: healthCheckNodePort over IPv6"
	v6_failures=()
	v6_service v6-lb "
apiVersion: v1
kind: Service
metadata: {name: v6-lb}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  ipFamilyPolicy: SingleStack
  ipFamilies: [IPv6]
  ports: [{port: 80, targetPort: 8080, nodePort: 30602, protocol: TCP}]
" "$(pod_ip6 web)@node1" || { verdict 53 "IPv6 LoadBalancer" no_failures "${v6_failures[@]}"; return; }
	local hc
	hc=$(field HEALTH_CHECK_NODE_PORT "$v6_info")
	set_lb_ingress v6-lb "$vip6" || v6_failures+=("set status.loadBalancer.ingress $vip6 failed")
	show - "curl -X PATCH .../services/v6-lb/status -d '{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"$vip6\"}]}}}'" ""
	v6_wait node1 tcp "[$vip6]:80" "[$(pod_ip6 web)]:8080"
	wait_until 30 bash -c "ip -n node1 -6 addr show dev kube-ipvs0 | grep -q '$vip6/128'" || v6_failures+=("node1: $vip6 not bound on kube-ipvs0")
	wait_until 30 bash -c "[[ \$(ip netns exec lb curl -gs -o /dev/null -w '%{http_code}' --max-time 2 'http://[$node2_addr6]:$hc/healthz') == 503 ]]"
	ask lb "curl -gs -w ' %{http_code}' --max-time 3 'http://[$node1_addr6]:$hc/healthz'"
	local h1=${answer//[[:space:]]/}
	ask lb "curl -gs -w ' %{http_code}' --max-time 3 'http://[$node2_addr6]:$hc/healthz'"
	local h2=${answer//[[:space:]]/}
	[[ $h1 == *'"localEndpoints":1'* && $h1 == *'}200' ]] || v6_failures+=("node1's health check over IPv6: '$h1', want localEndpoints 1 and 200")
	[[ $h2 == *'"localEndpoints":0'* && $h2 == *'}503' ]] || v6_failures+=("node2's health check over IPv6: '$h2', want localEndpoints 0 and 503")
	"$topo" lb6-add tcp 80 "$hc"
	wait_until 30 bash -c "ip netns exec lb ipvsadm -Ln -t '[$vip6]:80' | awk '\$2 == \"[$node1_addr6]:80\" && \$4 == 1 { a = 1 } \$2 == \"[$node2_addr6]:80\" && \$4 == 0 { b = 1 } END { exit !(a && b) }'" ||
		v6_failures+=("the load balancer's weights never became node1 1, node2 0")
	ask lb "ipvsadm -Ln -t '[$vip6]:80'"
	local i
	for i in 1 2 3; do
		v6_curl client "http://[$vip6]/"
		v6_expect "hostname=web" "client_address=$client_addr6 "
	done
	"$topo" lb6-del tcp 80
	verdict 53 "IPv6 LoadBalancer [$vip6]:80 Local: healthCheckNodePort $hc over IPv6 200/localEndpoints 1 on node1, 503/0 on node2; through the LB the pod sees $client_addr6" \
		no_failures "${v6_failures[@]}"
}

scenario_54() {
	heading "loadBalancerSourceRanges with an IPv6 range"
	v6_failures=()
	v6_service v6-ranged "
apiVersion: v1
kind: Service
metadata: {name: v6-ranged}
spec:
  type: LoadBalancer
  ipFamilyPolicy: SingleStack
  ipFamilies: [IPv6]
  loadBalancerSourceRanges: [2001:db8:1::79/128]
  ports: [{port: 81, targetPort: 8080, nodePort: 30603, protocol: TCP}]
" "$(pod_ip6 web)@node1" || { verdict 54 "IPv6 source ranges" no_failures "${v6_failures[@]}"; return; }
	set_lb_ingress v6-ranged "$vip6" || v6_failures+=("set status.loadBalancer.ingress $vip6 failed")
	v6_wait node1 tcp "[$vip6]:81" "[$(pod_ip6 web)]:8080"
	v6_wait node2 tcp "[$vip6]:81" "[$(pod_ip6 web)]:8080"
	"$topo" lb6-add tcp 81
	# Allowed: the client, through the load balancer to either node (Cluster: SNAT).
	local i
	for i in 1 2; do
		v6_curl client "http://[$vip6]:81/"
		v6_expect "hostname=web"
	done
	# Forbidden: pods, whose addresses lie outside the range, dropped on their own node.
	v6_curl c1 "http://[$vip6]:81/"
	v6_expect_timeout
	v6_curl c2 "http://[$vip6]:81/"
	v6_expect_timeout
	"$topo" lb6-del tcp 81
	verdict 54 "IPv6 loadBalancerSourceRanges 2001:db8:1::79/128 on [$vip6]:81: the client is served through both nodes, c1 and c2 are dropped (curl 28)" \
		no_failures "${v6_failures[@]}"
}

scenario_55() {
	heading "externalIPs over IPv6"
	v6_failures=()
	local eip=2001:db8:114::10
	v6_service v6-external "
apiVersion: v1
kind: Service
metadata: {name: v6-external}
spec:
  ipFamilyPolicy: SingleStack
  ipFamilies: [IPv6]
  externalTrafficPolicy: Local
  externalIPs: [$eip]
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
" "$(pod_ip6 web)@node1" || { verdict 55 "IPv6 externalIPs" no_failures "${v6_failures[@]}"; return; }
	v6_wait node1 tcp "[$eip]:80" "[$(pod_ip6 web)]:8080"
	# The network routes the external IP to node1, as a router or BGP speaker would.
	ip -n client -6 route replace "$eip/128" via "$node1_addr6"
	show client "ip -6 route add $eip/128 via $node1_addr6" ""
	v6_curl client "http://[$eip]/"
	v6_expect "hostname=web" "client_address=$client_addr6 "
	# From a pod on the other node: cluster-internal traffic to an external IP is served too.
	v6_curl c2 "http://[$eip]/"
	v6_expect "hostname=web"
	ip -n client -6 route del "$eip/128" via "$node1_addr6" 2>/dev/null
	verdict 55 "IPv6 externalIP [$eip]:80 (Local) through node1: the pod sees $client_addr6; c2 is served" \
		no_failures "${v6_failures[@]}"
}

scenario_56() {
	heading "UDP over IPv6: the flow of a deleted endpoint is cleaned up"
	v6_failures=()
	"$topo" add-pod node1 u61 10.244.1.61 >/dev/null && "$topo" echo u61 -http '' -udp :8081 &&
		"$topo" add-pod node2 u62 10.244.2.62 >/dev/null && "$topo" echo u62 -http '' -udp :8081 ||
		{ verdict 56 "UDP over IPv6: pods" false; return; }
	local u61=2001:db8:244:1::61 u62=2001:db8:244:2::62
	v6_service v6-udp "
apiVersion: v1
kind: Service
metadata: {name: v6-udp}
spec:
  ipFamilyPolicy: SingleStack
  ipFamilies: [IPv6]
  ports: [{port: 53, targetPort: 8081, protocol: UDP}]
" "$u61@node1" "$u62@node2" || { verdict 56 "UDP over IPv6" no_failures "${v6_failures[@]}"; return; }
	local ip
	ip=$(field CLUSTER_IP "$v6_info")
	v6_wait node1 udp "[$ip]:53" "[$u61]:8081 [$u62]:8081"
	local replies=$E2E_LOGS/udp6-replies.log
	: >"$replies"
	ip netns exec c1 bash -c "
		while sleep 0.3; do echo ping; done |
			socat - 'UDP6:[$ip]:53,sourceport=40063' |
			while read -r line; do [[ \$line == hostname=* || \$line == client_address=* ]] && echo \"\$(date +%s.%N) \$line\"; done" >>"$replies" 2>&1 &
	local sender=$!
	wait_until 30 grep -q hostname= "$replies"
	sleep 1
	local victim survivor seen
	victim=$(awk '$2 ~ /^hostname=/ { sub(/^hostname=/, "", $2); print $2 }' "$replies" | sort -u | tr '\n' ' ' | sed 's/ $//')
	seen=$(awk '$2 ~ /^client_address=/ { print $2 }' "$replies" | sort -u | tr '\n' ' ' | sed 's/ $//')
	show c1 "socat - 'UDP6:[$ip]:53,sourceport=40063'  # replies so far" "$(awk '{ print $2 }' "$replies" | sort | uniq -c)"
	[[ $seen == "client_address=[$(pod_ip6 c1)]:40063" || $seen == "client_address=$(pod_ip6 c1):40063" ]] ||
		v6_failures+=("the UDP server saw '$seen', want c1's [$(pod_ip6 c1)]:40063")
	case $victim in
	u61) survivor=u62 ;;
	u62) survivor=u61 ;;
	*)
		kill_tree "$sender"
		verdict 56 "UDP over IPv6: one flow reaches one endpoint" bash -c "echo 'replies from: ${victim:-nobody}'; exit 1"
		return
		;;
	esac
	local victim_ip=$u61
	[[ $victim == u62 ]] && victim_ip=$u62
	"$topo" del-pod "$victim"
	kc delete-endpoint v6-udp "$victim_ip" || v6_failures+=("delete-endpoint $victim_ip failed")
	local t0
	t0=$(now)
	show - "topology.sh del-pod $victim && e2ectl delete-endpoint v6-udp $victim_ip" ""
	local limit=$((2 * ${sync_period%s}))
	while (($(since "$t0" | cut -d. -f1) <= limit)); do
		awk -v t="$t0" -v h="hostname=$survivor" '$1 > t && $2 == h { found = 1 } END { exit !found }' "$replies" && break
		sleep 0.3
	done
	kill_tree "$sender"
	local resumed
	resumed=$(awk -v t="$t0" -v h="hostname=$survivor" '$1 > t && $2 == h { printf "%.1f", $1 - t; exit }' "$replies")
	[[ -n $resumed ]] || v6_failures+=("no reply from $survivor within ${limit}s of the endpoint's deletion")
	ask node1 "conntrack -L -f ipv6 -p udp --orig-dst $ip 2>/dev/null"
	[[ $answer != *"$victim_ip"* ]] || v6_failures+=("node1 still has a flow to $victim_ip")
	"$topo" del-pod "$survivor"
	kc delete-service v6-udp >/dev/null
	verdict 56 "UDP over IPv6 [$ip]:53 from c1 port 40063 (seen as ${seen#client_address=}): after deleting $victim, replies from $survivor after ${resumed:-never}s (limit ${limit}s), no flow to it left" \
		no_failures "${v6_failures[@]}"
}

scenario_57() {
	heading "inspect and inspect trace for an IPv6 Service"
	v6_failures=()
	v6_service v6-inspect "
apiVersion: v1
kind: Service
metadata: {name: v6-inspect}
spec:
  ipFamilyPolicy: SingleStack
  ipFamilies: [IPv6]
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
" "$(pod_ip6 web)@node1" "$(pod_ip6 s2)@node2" || { verdict 57 "inspect IPv6" no_failures "${v6_failures[@]}"; return; }
	local ip
	ip=$(field CLUSTER_IP "$v6_info")
	v6_wait node1 tcp "[$ip]:80" "[$(pod_ip6 web)]:8080 [$(pod_ip6 s2)]:8080"
	local i
	for i in 1 2 3 4; do
		v6_curl c1 "http://[$ip]/"
		v6_expect "client_address=$(pod_ip6 c1) "
	done
	ask node1 "$ipvsproxy inspect --service default/v6-inspect"
	local table=$answer
	[[ $table == *"default/v6-inspect:http"*"ClusterIP"*"$ip"* ]] || v6_failures+=("inspect table lacks default/v6-inspect:http ClusterIP $ip")
	[[ $table == *"$(pod_ip6 web)"*"ready on node1"* && $table == *"$(pod_ip6 s2)"*"ready on node2"* ]] ||
		v6_failures+=("inspect table lacks the IPv6 endpoints with their nodes")
	ask node1 "$ipvsproxy inspect -o json --service default/v6-inspect | jq -c '[.virtualServers[] | {type, flows, connections: .stats.connections}]'"
	local conns
	conns=$(jq -r '[.[].connections] | add' <<<"$answer" 2>/dev/null)
	[[ -n $conns && $conns != null && $conns -ge 4 ]] || v6_failures+=("inspect json: connections '$conns', want >= 4 after 4 requests")
	ask node1 "$ipvsproxy inspect trace $(pod_ip6 c1) '[$ip]:80/tcp'"
	local trace=$answer
	printf '%s\n' "$trace" >"$E2E_LOGS/inspect-trace-ipv6.txt"
	[[ $trace == *"verdict: load-balanced"* ]] || v6_failures+=("trace: want verdict load-balanced")
	[[ $trace == *"$(pod_ip6 web)"*"not masqueraded"* && $trace == *"$(pod_ip6 s2)"* ]] || v6_failures+=("trace: want both IPv6 real servers, not masqueraded")
	[[ $trace == *"kernel: virtual server TCP [$ip]:80 is in the kernel with the same real servers"* ]] ||
		v6_failures+=("trace: want the kernel check to agree for TCP [$ip]:80")
	ask node1 "$ipvsproxy inspect --check"
	((status == 0)) || v6_failures+=("inspect --check exit $status with IPv6 Services, want 0")
	kc delete-service v6-inspect >/dev/null
	verdict 57 "inspect names default/v6-inspect [$ip]:80 with both IPv6 endpoints and connections >= 4; trace c1 [$(pod_ip6 c1)] -> [$ip]:80 load-balanced, not masqueraded, kernel agrees; --check 0" \
		no_failures "${v6_failures[@]}"
}
