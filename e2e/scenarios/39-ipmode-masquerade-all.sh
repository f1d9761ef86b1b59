# 39-ipmode-masquerade-all.sh — issue 25 item 2.
#
# 39a: a LoadBalancer (externalTrafficPolicy Local) whose ingress has `ipMode: Proxy` (KEP-1860).
# Such a load balancer is a proxy that delivers to the node port itself, so kube-proxy does not
# make the ingress IP local on the nodes, and neither may ipvsproxy: were it bound, a pod's
# connection to the IP would be served by its own node and never reach the load balancer (its
# PROXY protocol, TLS, ...). The load balancer here is socat in namespace lb on a VIP of its own,
# forwarding to node1's node port; nodes and the lb route to each other for the pod's traffic. The
# server sees the proxy's address (Local policy keeps the source) from the outside client and from
# pod c1 alike. As a control the ingress then loses its ipMode (VIP): node1 binds the VIP and c1's
# connection is served by node1 with c1's address, the very difference the first half measures.
#
# 39b: --masquerade-all on node2: a pod's connection to a cluster IP is source-NATed, so web (on
# node1) sees node2's address where it saw c2's before; node1, without the flag, still keeps c1's.
# node2 goes back to the suite's flags and c2's address is kept again.
#
# Both Services are dual-stack (RequireDualStack, web's IPv4 and IPv6 address) and each check is
# made on both families: 39a's load balancer has an ingress IP of each family (VIP6
# 2001:db8:113::141, a second socat on it to node1's IPv6 node port), and web sees the lb's
# IPv6 address through it; 39b's c2 is seen as node2's IPv6 address on the IPv6 cluster IP.
# Verdicts 39av6 and 39bv6 hold the IPv6 checks.

readonly proxy_vip=203.0.113.141 proxy_port=8139 proxy_node_port=30139 lb_addr=198.51.100.140
readonly proxy_vip6=2001:db8:113::141 lb_addr6=2001:db8:1::140

# http_ask WHERE URL: $answer is the body's client_address= and hostname= lines, sorted, on one
# line ("client_address=... hostname=web").
http_ask() {
	ask "$1" "curl -gsS --max-time 5 $2 | grep -E '^(hostname|client_address)=' | sort | tr '\n' ' ' | sed 's/ \$//'; exit \${PIPESTATUS[0]}"
}

# proxy_vip_state NODE [VIP]: "bound=N vs=N": how often VIP ($proxy_vip by default) is on NODE's
# kube-ipvs0 and in its virtual servers.
proxy_vip_state() {
	local v=${2:-$proxy_vip}
	ask "$1" "echo bound=\$(ip -o addr show dev kube-ipvs0 | grep -c ' $v/') vs=\$(ipvsadm -Ln | grep -cF ' $(bracketed "$v"):')"
}

scenario_39() {
	ipmode_proxy_case
	masquerade_all_case
}

ipmode_proxy_case() {
	heading "ipMode Proxy: the load balancer's IPs are not local on the nodes; traffic comes through its node port"
	local failures=() failures6=() info cip cip6 lbproxy lbproxy6 node
	local rs="$(pod_ip web):8080" rs6="[$(pod_ip6 web)]:8080"
	info=$(kc apply-service - <<YAML
apiVersion: v1
kind: Service
metadata: {name: ipmode-proxy}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  ipFamilyPolicy: RequireDualStack
  ports: [{port: $proxy_port, targetPort: 8080, nodePort: $proxy_node_port, protocol: TCP}]
YAML
) || { verdict 39a "ipMode Proxy: apply-service" false; verdict 39av6 "ipMode Proxy over IPv6: apply-service" false; return; }
	cip=$(cluster_ip_of 4 "$info") cip6=$(cluster_ip_of 6 "$info")
	show - "e2ectl apply-service ipmode-proxy.yaml  # LoadBalancer, Local, port $proxy_port, nodePort $proxy_node_port, RequireDualStack" \
		"$(grep -E '^(TYPE|CLUSTER_IPS|EXTERNAL_TRAFFIC_POLICY|HEALTH_CHECK_NODE_PORT)=' <<<"$info")"
	set_lb_ingresses ipmode-proxy "$proxy_vip=Proxy" "$proxy_vip6=Proxy" ||
		{ verdict 39a "ipMode Proxy: set status.loadBalancer.ingress" false; verdict 39av6 "ipMode Proxy over IPv6: set status.loadBalancer.ingress" false; return; }
	show - "curl -X PATCH .../services/ipmode-proxy/status -d '{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"$proxy_vip\",\"ipMode\":\"Proxy\"},{\"ip\":\"$proxy_vip6\",\"ipMode\":\"Proxy\"}]}}}'" ""
	# The endpoints after the status: once their real server is programmed, the proxier has
	# seen the ingress too.
	kc set-endpoints ipmode-proxy $(dual_endpoints web@node1) ||
		{ verdict 39a "ipMode Proxy: set-endpoints" false; verdict 39av6 "ipMode Proxy over IPv6: set-endpoints" false; return; }
	show - "e2ectl set-endpoints ipmode-proxy $(pod_ip web)@node1 $(pod_ip6 web)@node1" ""
	wait_real_servers node1 tcp "$node1_addr:$proxy_node_port" "$rs" || failures+=("node1's node port $proxy_node_port has no real server web")
	wait_real_servers node2 tcp "$node2_addr:$proxy_node_port" "$rs" || failures+=("node2's node port $proxy_node_port has no real server web")
	wait_real_servers node1 tcp "[$node1_addr6]:$proxy_node_port" "$rs6" || failures6+=("node1's node port [$node1_addr6]:$proxy_node_port has no real server $rs6")
	wait_real_servers node2 tcp "[$node2_addr6]:$proxy_node_port" "$rs6" || failures6+=("node2's node port [$node2_addr6]:$proxy_node_port has no real server $rs6")

	# The load balancer: a proxy on each of its VIPs to node1's node port of that family.
	ip -n lb addr add "$proxy_vip/32" dev lo
	ip -n lb addr add "$proxy_vip6/128" dev lo nodad
	ip -n node1 route add "$proxy_vip/32" via "$lb_addr"
	ip -n node1 route add "$proxy_vip6/128" via "$lb_addr6"
	ip -n lb route add 10.244.1.0/24 via "$node1_addr"
	ip -n lb route add 2001:db8:244:1::/64 via "$node1_addr6"
	ip netns exec lb socat "TCP-LISTEN:$proxy_port,bind=$proxy_vip,reuseaddr,fork" "TCP:$node1_addr:$proxy_node_port" \
		>>"$E2E_LOGS/ipmode-proxy-lb.log" 2>&1 &
	lbproxy=$!
	ip netns exec lb socat "TCP6-LISTEN:$proxy_port,bind=[$proxy_vip6],ipv6only=1,reuseaddr,fork" "TCP6:[$node1_addr6]:$proxy_node_port" \
		>>"$E2E_LOGS/ipmode-proxy-lb.log" 2>&1 &
	lbproxy6=$!
	show lb "socat TCP-LISTEN:$proxy_port,bind=$proxy_vip,reuseaddr,fork TCP:$node1_addr:$proxy_node_port & socat TCP6-LISTEN:$proxy_port,bind=[$proxy_vip6],ipv6only=1,reuseaddr,fork TCP6:[$node1_addr6]:$proxy_node_port &  # the load balancer, a proxy" ""
	wait_until 10 bash -c "ip netns exec lb ss -Hltn 'sport = :$proxy_port' | grep -c . | grep -qx 2" || failures+=("the lb's proxies never both listened")

	for node in node1 node2; do
		proxy_vip_state "$node"
		[[ $answer == "bound=0 vs=0" ]] || failures+=("$node: $proxy_vip (ipMode Proxy) is local there: $answer, want bound=0 vs=0")
		proxy_vip_state "$node" "$proxy_vip6"
		[[ $answer == "bound=0 vs=0" ]] || failures6+=("$node: $proxy_vip6 (ipMode Proxy) is local there: $answer, want bound=0 vs=0")
	done
	http_ask client "http://$proxy_vip:$proxy_port/"
	[[ $answer == "client_address=$lb_addr hostname=web" ]] ||
		failures+=("client -> $proxy_vip:$proxy_port: '$answer', want client_address=$lb_addr hostname=web (through the lb's proxy)")
	http_ask c1 "http://$proxy_vip:$proxy_port/"
	[[ $answer == "client_address=$lb_addr hostname=web" ]] ||
		failures+=("c1 -> $proxy_vip:$proxy_port: '$answer', want client_address=$lb_addr hostname=web (through the lb, not node1's IPVS)")
	http_ask client "http://[$proxy_vip6]:$proxy_port/"
	[[ $answer == "client_address=$lb_addr6 hostname=web" ]] ||
		failures6+=("client -> [$proxy_vip6]:$proxy_port: '$answer', want client_address=$lb_addr6 hostname=web (through the lb's proxy)")
	http_ask c1 "http://[$proxy_vip6]:$proxy_port/"
	[[ $answer == "client_address=$lb_addr6 hostname=web" ]] ||
		failures6+=("c1 -> [$proxy_vip6]:$proxy_port: '$answer', want client_address=$lb_addr6 hostname=web (through the lb, not node1's IPVS)")

	# Control: ipMode VIP (the field dropped) makes node1 serve the IPs itself.
	set_lb_ingresses ipmode-proxy "$proxy_vip" "$proxy_vip6" || failures+=("patching the ingress back to VIP mode failed")
	show - "curl -X PATCH .../services/ipmode-proxy/status -d '{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"$proxy_vip\"},{\"ip\":\"$proxy_vip6\"}]}}}'  # control: VIP mode" ""
	wait_real_servers node1 tcp "$proxy_vip:$proxy_port" "$rs" || failures+=("in VIP mode node1 never programmed $proxy_vip:$proxy_port")
	wait_real_servers node1 tcp "[$proxy_vip6]:$proxy_port" "$rs6" || failures6+=("in VIP mode node1 never programmed [$proxy_vip6]:$proxy_port")
	proxy_vip_state node1
	[[ $answer == "bound=1 vs=1" ]] || failures+=("node1 in VIP mode: $answer, want bound=1 vs=1")
	proxy_vip_state node1 "$proxy_vip6"
	[[ $answer == "bound=1 vs=1" ]] || failures6+=("node1 in VIP mode: $proxy_vip6 $answer, want bound=1 vs=1")
	http_ask c1 "http://$proxy_vip:$proxy_port/"
	[[ $answer == "client_address=$(pod_ip c1) hostname=web" ]] ||
		failures+=("c1 -> $proxy_vip:$proxy_port in VIP mode: '$answer', want client_address=$(pod_ip c1) hostname=web (node1's IPVS)")
	http_ask c1 "http://[$proxy_vip6]:$proxy_port/"
	[[ $answer == "client_address=$(pod_ip6 c1) hostname=web" ]] ||
		failures6+=("c1 -> [$proxy_vip6]:$proxy_port in VIP mode: '$answer', want client_address=$(pod_ip6 c1) hostname=web (node1's IPVS)")

	kill_tree "$lbproxy"
	kill_tree "$lbproxy6"
	ip -n lb route del 10.244.1.0/24 via "$node1_addr"
	ip -n lb route del 2001:db8:244:1::/64 via "$node1_addr6"
	ip -n node1 route del "$proxy_vip/32" via "$lb_addr"
	ip -n node1 route del "$proxy_vip6/128" via "$lb_addr6"
	ip -n lb addr del "$proxy_vip/32" dev lo
	ip -n lb addr del "$proxy_vip6/128" dev lo
	kc delete-service ipmode-proxy >/dev/null
	for node in node1 node2; do
		wait_until 60 vs_gone "$node" "$cip" || failures+=("$node still has $cip 60 s after its Service was deleted")
		wait_until 60 vs_gone "$node" "$proxy_vip" || failures+=("$node still has $proxy_vip 60 s after its Service was deleted")
		wait_until 60 vs_gone "$node" "[$cip6]" || failures6+=("$node still has [$cip6] 60 s after its Service was deleted")
		wait_until 60 vs_gone "$node" "[$proxy_vip6]" || failures6+=("$node still has [$proxy_vip6] 60 s after its Service was deleted")
	done
	verdict 39a "ipMode Proxy (Local): $proxy_vip neither bound nor a virtual server on either node; the client and pod c1 both reach web through the lb's proxy and node1's node port; in VIP mode node1 serves c1 itself" \
		no_failures "${failures[@]}"
	verdict 39av6 "ipMode Proxy (Local) over IPv6: $proxy_vip6 neither bound nor a virtual server on either node; the client and pod c1 both reach web through the lb's proxy (web sees $lb_addr6) and node1's IPv6 node port; in VIP mode node1 serves c1 itself (web sees $(pod_ip6 c1))" \
		no_failures "${failures6[@]}"
}

masquerade_all_case() {
	heading "--masquerade-all: a pod's connection to a cluster IP is source-NATed, on both families"
	local failures=() failures6=() info cip cip6
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: masq-all}
spec:
  type: ClusterIP
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 39b "masquerade-all: apply-service" false; verdict 39bv6 "masquerade-all over IPv6: apply-service" false; return; }
	cip=$(cluster_ip_of 4 "$info") cip6=$(cluster_ip_of 6 "$info")
	kc set-endpoints masq-all $(dual_endpoints web@node1) ||
		{ verdict 39b "masquerade-all: set-endpoints" false; verdict 39bv6 "masquerade-all over IPv6: set-endpoints" false; return; }
	show - "e2ectl apply-service masq-all.yaml && e2ectl set-endpoints masq-all $(pod_ip web)@node1 $(pod_ip6 web)@node1  # ClusterIP 80 -> 8080, RequireDualStack" "CLUSTER_IPS=$cip,$cip6"
	wait_real_servers node2 tcp "$cip:80" "$(pod_ip web):8080" || failures+=("node2 never programmed $cip:80")
	wait_real_servers node2 tcp "[$cip6]:80" "[$(pod_ip6 web)]:8080" || failures6+=("node2 never programmed [$cip6]:80")
	# masq_check FAMILY WHERE WANT WHEN: the pod WHERE's connection to the cluster IP of FAMILY is
	# seen as WANT.
	masq_check() {
		local h=$cip
		[[ $1 == 6 ]] && h=[$cip6]
		http_ask "$2" "http://$h/"
		[[ $answer == "client_address=$3 hostname=web" ]] && return
		if [[ $1 == 6 ]]; then
			failures6+=("$2 -> $h $4: '$answer', want client_address=$3 hostname=web")
		else
			failures+=("$2 -> $h $4: '$answer', want client_address=$3 hostname=web")
		fi
	}
	masq_check 4 c2 "$(pod_ip c2)" before
	masq_check 6 c2 "$(pod_ip6 c2)" before

	restart_proxier_with node2 --masquerade-all || failures+=("node2's daemon with --masquerade-all did not sync")
	show node2 "ipvsproxy run ... --masquerade-all" ""
	wait_real_servers node2 tcp "$cip:80" "$(pod_ip web):8080" || failures+=("node2 with --masquerade-all has no $cip:80")
	wait_real_servers node2 tcp "[$cip6]:80" "[$(pod_ip6 web)]:8080" || failures6+=("node2 with --masquerade-all has no [$cip6]:80")
	masq_check 4 c2 "$node2_addr" "with --masquerade-all on node2 (SNAT)"
	masq_check 6 c2 "$node2_addr6" "with --masquerade-all on node2 (SNAT)"
	masq_check 4 c1 "$(pod_ip c1)" "(node1 without the flag)"
	masq_check 6 c1 "$(pod_ip6 c1)" "(node1 without the flag)"

	restart_proxier_with node2 || failures+=("node2's daemon did not sync after its restart with the suite's flags")
	show node2 "ipvsproxy run ...  # the suite's flags again" ""
	masq_check 4 c2 "$(pod_ip c2)" "after node2's flags were restored"
	masq_check 6 c2 "$(pod_ip6 c2)" "after node2's flags were restored"

	kc delete-service masq-all >/dev/null
	local node
	for node in node1 node2; do
		wait_until 60 vs_gone "$node" "$cip" || failures+=("$node still has $cip 60 s after its Service was deleted")
		wait_until 60 vs_gone "$node" "[$cip6]" || failures6+=("$node still has [$cip6] 60 s after its Service was deleted")
	done
	verdict 39b "masquerade-all on node2: web sees $node2_addr for c2's cluster-IP connection (c2's own address before and after); c1 through node1 keeps its address" \
		no_failures "${failures[@]}"
	verdict 39bv6 "masquerade-all on node2 over IPv6: web sees $node2_addr6 for c2's connection to [$cip6] (c2's own IPv6 address before and after); c1 through node1 keeps its IPv6 address" \
		no_failures "${failures6[@]}"
}
