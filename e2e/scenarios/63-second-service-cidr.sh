# 63-second-service-cidr.sh — a second Service range added and removed at runtime (KEP-1880):
# a networking.k8s.io/v1 ServiceCIDR "second63" with 203.0.113.64/26 and 2001:db8:63::/112
# (documentation ranges the topology leaves unused: the load balancer's VIP is 203.0.113.140,
# other scenarios' external IPs lie below .64 or above .127).
#
# The proxiers watch ServiceCIDR objects and make each range local with one route on kube-ipvs0
# (scenario 45, ipvsproxy/routes.go): the new range must get its route, its anchor address and
# its KUBE-SERVICE-CIDRS member on both nodes without a restart; a dual-stack Service whose
# cluster IPs the API allocates from it (given explicitly: before the ServiceCIDR exists the API
# refuses them) is answered for a pod (its own address seen) and for the node itself, on both
# families, and its cluster IP is not bound (the route covers it: were the range unknown to the
# proxier, the address would be bound and answer too, so the route is checked, not only
# traffic); a host port is refused on an unused address of the range. Then the Service and the
# ServiceCIDR are deleted (no controller manager runs, so no finalizer holds it) and the route,
# anchor and set member go. Times from each API write to the kernel are printed.

readonly cidr63_v4=203.0.113.64/26 cidr63_v6=2001:db8:63::/112
readonly ip63_v4=203.0.113.70 ip63_v6=2001:db8:63::70 unused63=203.0.113.99 host_port63=9163

# range63 NODE: the ranges of second63 the node has: its routes (proto 233) on kube-ipvs0, the
# IPv4 anchor, the KUBE-SERVICE-CIDRS members, one word each ("route4 route6 anchor set4 set6").
range63() {
	local n=$1 have=()
	[[ $(ip -n "$n" route show table local dev kube-ipvs0 proto 233) == *"local $cidr63_v4 "* ]] && have+=(route4)
	[[ $(ip -n "$n" -6 route show table local dev kube-ipvs0 proto 233) == *"local $cidr63_v6 "* ]] && have+=(route6)
	ip -n "$n" -o -4 addr show dev kube-ipvs0 | grep -q " ${cidr63_v4%/*}/32 " && have+=(anchor)
	ip netns exec "$n" ipset test KUBE-SERVICE-CIDRS "$cidr63_v4" >/dev/null 2>&1 && have+=(set4)
	ip netns exec "$n" ipset test KUBE-6-SERVICE-CIDRS "$cidr63_v6" >/dev/null 2>&1 && have+=(set6)
	echo "${have[*]}"
}
range63_is() { [[ $(range63 "$1") == "$2" ]]; }

scenario_63() {
	heading "A second ServiceCIDR at runtime: its range routed local on kube-ipvs0 without a restart, and removed with it"
	local failures=() info n pid1 pid2 t0 took_add=() took_del=()
	local all="route4 route6 anchor set4 set6"
	kc delete-service svc63 >/dev/null 2>&1
	kc delete-servicecidr second63 >/dev/null 2>&1
	for n in node1 node2; do
		wait_until 30 range63_is "$n" "" || failures+=("$n has parts of $cidr63_v4/$cidr63_v6 before the ServiceCIDR exists: $(range63 "$n")")
	done
	pid1=$(<"$E2E_LOGS/ipvsproxy-node1.pid") pid2=$(<"$E2E_LOGS/ipvsproxy-node2.pid")

	local svc_yaml
	svc_yaml="apiVersion: v1
kind: Service
metadata: {name: svc63}
spec:
  ipFamilyPolicy: RequireDualStack
  ipFamilies: [IPv4, IPv6]
  clusterIP: $ip63_v4
  clusterIPs: [$ip63_v4, \"$ip63_v6\"]
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]"
	# The API allocates from ServiceCIDRs only: without the second one it refuses these addresses.
	info=$(kc apply-service - <<<"$svc_yaml" 2>&1)
	show - "e2ectl apply-service svc63.yaml  # clusterIPs $ip63_v4, $ip63_v6, before the ServiceCIDR" "$(oneline "$info")"
	[[ $info == *CLUSTER_IP* ]] && failures+=("the API allocated $ip63_v4 before a ServiceCIDR holds it")

	t0=$(now)
	ask - "$E2E_BIN/e2ectl --kubeconfig $ADMIN_KUBECONFIG create-servicecidr second63 $cidr63_v4,$cidr63_v6 && $E2E_BIN/e2ectl --kubeconfig $ADMIN_KUBECONFIG servicecidrs"
	((status == 0)) || { verdict 63 "second ServiceCIDR: create" no_failures "${failures[@]}" "create-servicecidr failed: $answer"; return; }
	for n in node1 node2; do
		if wait_until 60 range63_is "$n" "$all"; then
			took_add+=("$n $(since "$t0")s")
		else
			failures+=("$n has '$(range63 "$n")' of the new range 60 s after its ServiceCIDR, want '$all'")
		fi
	done
	show - "# route (proto 233), anchor, KUBE-SERVICE-CIDRS members of the new range on each node, from the create" "${took_add[*]}"
	ask - "ip -n node2 route show table local dev kube-ipvs0 proto 233; ip -n node2 -6 route show table local dev kube-ipvs0 proto 233"
	[[ $answer == *"local $cidr63_v4 scope host"* && $answer == *"local 10.96.0.0/16 scope host"* ]] ||
		failures+=("node2's kube-ipvs0 routes: '$(oneline "$answer")', want both ranges")

	info=$(kc apply-service - <<<"$svc_yaml" 2>&1) || failures+=("apply-service svc63 after the ServiceCIDR failed: $(oneline "$info")")
	show - "e2ectl apply-service svc63.yaml  # again, after the ServiceCIDR" "$(grep -E '^CLUSTER_IPS=' <<<"$info")"
	[[ $(field CLUSTER_IPS "$info") == "$ip63_v4,$ip63_v6" ]] || failures+=("svc63's cluster IPs: '$(field CLUSTER_IPS "$info")'")
	kc set-endpoints svc63 "$(pod_ip web)@node1" "$(pod_ip6 web)@node1" || failures+=("set-endpoints svc63 failed")
	for n in node1 node2; do
		wait_real_servers "$n" tcp "$ip63_v4:80" "$(pod_ip web):8080" || failures+=("$n: no IPv4 virtual server of svc63")
		wait_real_servers "$n" tcp "[$ip63_v6]:80" "[$(pod_ip6 web)]:8080" || failures+=("$n: no IPv6 virtual server of svc63")
	done
	ask - "ip -n node1 -o addr show dev kube-ipvs0 | awk '{ print \$4 }' | grep -E '^(203\\.0\\.113\\.|2001:db8:63:)' | paste -sd ' '; ip -n node2 -o addr show dev kube-ipvs0 | awk '{ print \$4 }' | grep -E '^(203\\.0\\.113\\.|2001:db8:63:)' | paste -sd ' '"
	[[ $answer == "${cidr63_v4%/*}/32"$'\n'"${cidr63_v4%/*}/32" ]] ||
		failures+=("kube-ipvs0 holds '$(oneline "$answer")' of the new range on node1 and node2, want only the anchor ${cidr63_v4%/*}/32 (the cluster IPs are routed, not bound)")

	ask c2 "curl -s --max-time 5 http://$ip63_v4/ | grep client_address"
	[[ $answer == "client_address=$(pod_ip c2)" ]] || failures+=("c2 (node2) -> $ip63_v4: '$answer'")
	ask c2 "curl -gs --max-time 5 'http://[$ip63_v6]/' | grep client_address"
	[[ $answer == "client_address=$(pod_ip6 c2)" ]] || failures+=("c2 (node2) -> [$ip63_v6]: '$answer'")
	ask c1 "curl -s --max-time 5 http://$ip63_v4/ | grep client_address"
	[[ $answer == "client_address=$(pod_ip c1)" ]] || failures+=("c1 (node1) -> $ip63_v4: '$answer'")
	ask node2 "curl -s --max-time 5 http://$ip63_v4/ | grep -c hostname=web"
	[[ $answer == 1 ]] || failures+=("node2 itself -> $ip63_v4: '$answer'")
	ask node2 "curl -gs --max-time 5 'http://[$ip63_v6]/' | grep -c hostname=web"
	[[ $answer == 1 ]] || failures+=("node2 itself -> [$ip63_v6]: '$answer'")

	# A host port on node2: answered on the node's address, refused on an unused address of the
	# new range (KUBE-SERVICE-CIDRS; without it the route would deliver it to the host port).
	ip netns exec node2 "$ECHOSERVER" -name node2-host -http ":$host_port63" -udp '' >"$E2E_LOGS/scenario-63-host-port.log" 2>&1 &
	local host_pid=$!
	wait_until 20 bash -c "ip netns exec node2 ss -Hltn 'sport = :$host_port63' | grep -q ."
	ask c2 "curl -s --max-time 5 $node2_addr:$host_port63 | grep -c hostname=node2-host"
	[[ $answer == 1 ]] || failures+=("the host port does not answer on $node2_addr: '$answer'")
	ask c2 "curl -sS --connect-timeout 3 --max-time 5 $unused63:$host_port63 2>&1; echo exit=\$?"
	[[ $answer == *"exit=7" ]] || failures+=("the host port on the unused $unused63 of the new range was not refused: '$(oneline "$answer")'")
	kill "$host_pid" 2>/dev/null
	wait "$host_pid" 2>/dev/null

	kc delete-service svc63 >/dev/null || failures+=("delete-service svc63 failed")
	for n in node1 node2; do
		wait_until 60 vs_gone "$n" "$ip63_v4" || failures+=("$n still has svc63's IPv4 virtual server")
		wait_until 60 vs_gone "$n" "[$ip63_v6]" || failures+=("$n still has svc63's IPv6 virtual server")
	done
	t0=$(now)
	ask - "$E2E_BIN/e2ectl --kubeconfig $ADMIN_KUBECONFIG delete-servicecidr second63 && $E2E_BIN/e2ectl --kubeconfig $ADMIN_KUBECONFIG servicecidrs"
	((status == 0)) || failures+=("delete-servicecidr second63 failed: $answer")
	[[ $answer == *second63* ]] && failures+=("second63 still listed after its deletion: $(oneline "$answer")")
	for n in node1 node2; do
		if wait_until 60 range63_is "$n" ""; then
			took_del+=("$n $(since "$t0")s")
		else
			failures+=("$n still has '$(range63 "$n")' of the range 60 s after its ServiceCIDR's deletion")
		fi
	done
	show - "# route, anchor and KUBE-SERVICE-CIDRS members of the range gone, from the delete" "${took_del[*]}"
	ask - "ip -n node2 route show table local dev kube-ipvs0 proto 233"
	[[ $answer == *"local 10.96.0.0/16 scope host"* ]] || failures+=("node2 lost the default range's route: '$answer'")
	[[ $(<"$E2E_LOGS/ipvsproxy-node1.pid") == "$pid1" && $(<"$E2E_LOGS/ipvsproxy-node2.pid") == "$pid2" ]] && kill -0 "$pid1" "$pid2" 2>/dev/null ||
		failures+=("a proxier was restarted or died during the scenario")
	grep -h "Not routing a Service CIDR" "$E2E_LOGS"/ipvsproxy-node*.log | grep -q "${cidr63_v4%/*}" &&
		failures+=("a proxier refused to route $cidr63_v4: $(grep -h 'Not routing a Service CIDR' "$E2E_LOGS"/ipvsproxy-node*.log | tail -n1)")
	verdict 63 "second ServiceCIDR $cidr63_v4,$cidr63_v6 at runtime: routed on both nodes without a restart (${took_add[*]:-never}), svc63 from it answered a pod and the node on both families, unbound, a host port refused in the range; gone after its deletion (${took_del[*]:-never})" \
		no_failures "${failures[@]}"
}
