# 16-host-firewall.sh — issue 14, item 6: a host firewall installed before the daemon starts.
# node2's daemon is stopped and cleaned up; then node2 gets what RHEL, Docker and CNI portmap put
# there: INPUT ending in a REJECT, FORWARD accepting pod traffic then rejecting, a DOCKER chain and
# a CNI-HOSTPORT-DNAT chain jumped to for every --dst-type LOCAL packet (which every service address
# is) that DNAT the Service's port and node port elsewhere. The daemon then starts: its jumps go
# first (kube-proxy prepends them) and its nat and filter chains accept service traffic
# (acceptIPVSTraffic), so every Service still answers. The host rules are removed at the end.

corner_host_rules() {
	local op=$1 # -A or -D
	local n="ip netns exec node2 iptables"
	$n "$op" INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
	$n "$op" INPUT -i lo -j ACCEPT
	$n "$op" INPUT -p icmp -j ACCEPT
	$n "$op" INPUT -j REJECT --reject-with icmp-host-prohibited
	$n "$op" FORWARD -s 10.244.0.0/16 -j ACCEPT
	$n "$op" FORWARD -d 10.244.0.0/16 -j ACCEPT
	$n "$op" FORWARD -j REJECT --reject-with icmp-host-prohibited
	[[ $op == -A ]] && $n -t nat -N DOCKER && $n -t nat -N CNI-HOSTPORT-DNAT
	$n -t nat "$op" PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
	$n -t nat "$op" OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER
	$n -t nat "$op" PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
	$n -t nat "$op" OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
	# A container publishing port 8016, a hostPort 30116: both sent to the bridge's closed port 9.
	$n -t nat "$op" DOCKER -p tcp --dport 8016 -j DNAT --to-destination 198.51.100.254:9
	$n -t nat "$op" CNI-HOSTPORT-DNAT -p tcp --dport 30116 -j DNAT --to-destination 198.51.100.254:9
	if [[ $op == -D ]]; then
		$n -t nat -X DOCKER
		$n -t nat -X CNI-HOSTPORT-DNAT
	fi
}

scenario_16() {
	heading "A host firewall installed before the daemon: every Service still answers"
	corner_failures=()
	corner_service corner-fw "
apiVersion: v1
kind: Service
metadata: {name: corner-fw}
spec:
  type: NodePort
  ports: [{port: 8016, targetPort: 8080, nodePort: 30116, protocol: TCP}]
" || { verdict 16 "host firewall" false; return; }
	local ip
	ip=$(field CLUSTER_IP "$corner_info")
	stop_proxier node2
	ip netns exec node2 "$ipvsproxy" cleanup --lock-file "$(node_lock node2)" >>"$E2E_LOGS/ipvsproxy-node2.log" 2>&1
	corner_host_rules -A
	show node2 "ipvsproxy cleanup; iptables ... # RHEL INPUT/FORWARD REJECT, DOCKER and CNI-HOSTPORT-DNAT DNAT of :8016 and :30116" \
		"$(ip netns exec node2 iptables-save | grep -E '^-A (INPUT|FORWARD|PREROUTING|OUTPUT|DOCKER|CNI-HOSTPORT-DNAT) ')"
	start_proxier node2
	wait_until 120 proxier_synced node2 || corner_failures+=("node2's proxier did not sync after the restart")
	wait_real_servers node2 tcp "$ip:8016" "$(pod_ip web):8080"

	corner_curl c2 "http://$ip:8016/"
	corner_expect "hostname=web" "client_address=$(pod_ip c2)"
	corner_curl node2 "http://$ip:8016/"
	corner_expect "hostname=web"
	corner_curl client "http://$node2_addr:30116/"
	corner_expect "hostname=web"
	local chain first
	for chain in "filter INPUT" "filter FORWARD" "nat PREROUTING" "nat OUTPUT" "nat POSTROUTING"; do
		first=$(ip netns exec node2 iptables -t "${chain% *}" -S "${chain#* }" | sed -n 2p)
		[[ $first == *"-j KUBE-"* ]] || corner_failures+=("$chain starts with '$first', want the kube jump")
	done
	show node2 "iptables -S INPUT; iptables -t nat -S PREROUTING" \
		"$(ip netns exec node2 iptables -S INPUT; ip netns exec node2 iptables -t nat -S PREROUTING)"

	corner_host_rules -D 2>/dev/null
	kc delete-service corner-fw >/dev/null
	verdict 16 "host firewall before the daemon: c2 and node2 reach $ip:8016, the client node2:30116; the kube jumps are first" \
		no_failures "${corner_failures[@]}"
}
