# 20-exclude-cidrs.sh — issue 14 item 9: --ipvs-exclude-cidrs means what it means in kube-proxy.
# node1's daemon is restarted with --ipvs-exclude-cidrs 10.96.200.0/24,203.0.113.200/29. A Service
# whose cluster IP (10.96.200.20) lies in an excluded range must still get its NodePort and
# cluster IP virtual servers (before the fix it got neither), and a virtual server someone else
# made in an excluded range, bound on kube-ipvs0 as a leftover would be, must stay exactly as it
# was through the daemon's full sync. At the end node1's daemon runs with its usual flags again.

# restart_proxier_with NODE ARGS...: restart NODE's daemon with extra flags (none: the usual ones)
# and wait for its first full sync.
restart_proxier_with() {
	local node=$1
	shift
	stop_proxier "$node"
	E2E_PROXIER_ARGS="${E2E_PROXIER_ARGS:-} $*" start_proxier "$node"
	wait_until 120 proxier_synced "$node"
}

scenario_20() {
	heading "--ipvs-exclude-cidrs limits clean-up only (kube-proxy's meaning)"
	local foreign=203.0.113.201 excluded_ip=10.96.200.20 np=30200 info
	stop_proxier node1
	# Someone else's virtual server in an excluded range, its address on kube-ipvs0.
	ip netns exec node1 ipvsadm -A -t "$foreign:80" -s rr
	ip netns exec node1 ipvsadm -a -t "$foreign:80" -r 192.0.2.9:80 -m -w 3
	ip -n node1 addr add "$foreign/32" dev kube-ipvs0
	show node1 "ipvsadm -A -t $foreign:80 -s rr; ipvsadm -a -t $foreign:80 -r 192.0.2.9:80 -m -w 3; ip addr add $foreign/32 dev kube-ipvs0" ""
	restart_proxier_with node1 --ipvs-exclude-cidrs 10.96.200.0/24,203.0.113.200/29 ||
		{ verdict 20 "exclude-cidrs" false; return; }
	show - "ipvsproxy run ... --ipvs-exclude-cidrs 10.96.200.0/24,203.0.113.200/29  # node1" ""
	info=$(kc apply-service - <<YAML
apiVersion: v1
kind: Service
metadata: {name: excluded}
spec:
  type: NodePort
  clusterIP: $excluded_ip
  ports: [{port: 80, targetPort: 8080, nodePort: $np, protocol: TCP}]
YAML
) || { verdict 20 "exclude-cidrs" false; return; }
	show - "e2ectl apply-service excluded.yaml  # clusterIP $excluded_ip, nodePort $np" "$(grep -E '^(CLUSTER_IP|NODE_PORT_80)=' <<<"$info")"
	kc set-endpoints excluded "$(pod_ip web)@node1" || { verdict 20 "exclude-cidrs" false; return; }
	wait_real_servers node1 tcp "$node1_addr:$np" "$(pod_ip web):8080"
	ask client "curl -s --max-time 5 $node1_addr:$np | grep ^hostname="
	local via_node_port=$answer
	ask c1 "curl -s --max-time 5 $excluded_ip | grep ^hostname="
	local via_cluster_ip=$answer
	ask node1 "ipvsadm -Ln -t $foreign:80 | awk '\$1 == \"TCP\" || \$1 == \"->\" && \$2 != \"RemoteAddress:Port\" { \$1 = \$1; print }'"
	local foreign_now=$answer
	verdict 20 "exclude-cidrs: a Service whose cluster IP is excluded is served on its NodePort and cluster IP; a foreign virtual server there is untouched" \
		exclude_ok "$via_node_port" "$via_cluster_ip" "$foreign_now" "$foreign"

	kc delete-service excluded >/dev/null
	stop_proxier node1
	ip netns exec node1 ipvsadm -D -t "$foreign:80"
	ip -n node1 addr del "$foreign/32" dev kube-ipvs0
	restart_proxier_with node1
}

# exclude_ok NODEPORT_ANSWER CLUSTERIP_ANSWER FOREIGN_LISTING FOREIGN_ADDR
exclude_ok() {
	local fail=()
	[[ $1 == hostname=web ]] || fail+=("NodePort of the excluded-cluster-IP Service answered '$1', want hostname=web")
	[[ $2 == hostname=web ]] || fail+=("its cluster IP answered '$2', want hostname=web")
	[[ $3 == "TCP $4:80 rr"$'\n'"-> 192.0.2.9:80 Masq 3 0 0" ]] || fail+=("foreign virtual server now: '$3', want rr with 192.0.2.9:80 Masq weight 3")
	no_failures "${fail[@]}"
}
