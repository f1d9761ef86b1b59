# 17-local-detect.sh — issue 14, item 7: local-traffic detection. node2's daemon is restarted
# three times with other flags (and with the suite's own at the end):
#   no --cluster-cidr          kube-proxy's fallback masquerades what the node sends from a
#                              service address, so node2 reaches a cluster IP whose endpoint is
#                              on node1 (before: no masquerade rule, the reply went to node1);
#   --detect-local-mode NodeCIDR   starts without a pod CIDR on the Node; once spec.podCIDRs is
#                              set the rules follow without a restart (kube-proxy exits);
#   InterfaceNamePrefix v-     the pods' veths on the node are v-NAME (e2e/topology).
# In each, c2 keeps its address to the cluster IP and node2 is answered.

# corner_restart_node2 ARGS...: node2's daemon with the suite's flags but --cluster-cidr, plus ARGS.
corner_restart_node2() {
	stop_proxier node2
	echo "--- start $(date -u +%T.%N) $*" >>"$E2E_LOGS/ipvsproxy-node2.log"
	# shellcheck disable=SC2086 # E2E_PROXIER_ARGS is a list of flags
	ip netns exec node2 "$ipvsproxy" run --kubeconfig "$PROXIER_KUBECONFIG" --hostname-override node2 --lock-file "$(node_lock node2)" \
		--ipvs-sync-period "$sync_period" --ipvs-min-sync-period "$min_sync_period" \
		${E2E_PROXIER_ARGS:-} "$@" >>"$E2E_LOGS/ipvsproxy-node2.log" 2>&1 &
	local pid=$! start=$SECONDS
	echo "$pid" >"$E2E_LOGS/ipvsproxy-node2.pid"
	show node2 "ipvsproxy run ... $*" ""
	until proxier_synced node2; do
		if [[ ! -e /proc/$pid || $(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) == Z ]]; then
			corner_failures+=("node2's proxier with '$*' exited: $(tail -n 2 "$E2E_LOGS/ipvsproxy-node2.log" | tr '\n' ' ')")
			return
		fi
		((SECONDS - start < 120)) || { corner_failures+=("node2's proxier with '$*' did not sync"); return; }
		sleep 0.5
	done
}

# corner_detect_checks IP WHAT: c2 keeps its address, node2 is answered.
corner_detect_checks() {
	corner_curl c2 "http://$1:8017/"
	corner_expect "hostname=web" "client_address=$(pod_ip c2)"
	corner_curl node2 "http://$1:8017/"
	corner_expect "hostname=web"
}

scenario_17() {
	heading "Local-traffic detection: fallback without --cluster-cidr, NodeCIDR, InterfaceNamePrefix"
	corner_failures=()
	corner_service corner-detect "
apiVersion: v1
kind: Service
metadata: {name: corner-detect}
spec:
  type: ClusterIP
  ports: [{port: 8017, targetPort: 8080, protocol: TCP}]
" || { verdict 17 "local-traffic detection" false; return; }
	local ip
	ip=$(field CLUSTER_IP "$corner_info")

	corner_restart_node2
	wait_real_servers node2 tcp "$ip:8017" "$(pod_ip web):8080"
	corner_detect_checks "$ip"

	corner_restart_node2 --detect-local-mode NodeCIDR
	wait_real_servers node2 tcp "$ip:8017" "$(pod_ip web):8080"
	local pid
	pid=$(cat "$E2E_LOGS/ipvsproxy-node2.pid")
	curl -sS --fail --max-time 20 --cacert "$E2E_PKI/ca.crt" --cert "$E2E_PKI/admin.crt" --key "$E2E_PKI/admin.key" \
		-X PATCH -H 'Content-Type: application/merge-patch+json' \
		--data '{"spec":{"podCIDR":"10.244.2.0/24","podCIDRs":["10.244.2.0/24","2001:db8:244:2::/64"]}}' \
		"https://$E2E_HOST_ADDR:6443/api/v1/nodes/node2" >/dev/null ||
		corner_failures+=("PATCH node2 spec.podCIDRs failed")
	show - "curl -X PATCH .../nodes/node2 -d '{\"spec\":{\"podCIDRs\":[\"10.244.2.0/24\",\"2001:db8:244:2::/64\"]}}'" ""
	wait_until 30 bash -c "ip netns exec node2 iptables-save -t nat | grep -q -- '-A KUBE-SERVICES ! -s 10.244.2.0/24 -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ'" ||
		corner_failures+=("node2's rules did not follow spec.podCIDRs")
	wait_until 30 bash -c "ip netns exec node2 ip6tables-save -t nat | grep -q -- '-A KUBE-SERVICES ! -s 2001:db8:244:2::/64 -m set --match-set KUBE-6-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ'" ||
		corner_failures+=("node2's IPv6 rules did not follow spec.podCIDRs")
	ask node2 "iptables-save -t nat | grep -- '-A KUBE-SERVICES.*KUBE-CLUSTER-IP.*KUBE-MARK-MASQ'"
	[[ $(cat "$E2E_LOGS/ipvsproxy-node2.pid") == "$pid" && -e /proc/$pid ]] || corner_failures+=("node2's daemon restarted or exited on the pod CIDR change")
	corner_detect_checks "$ip"

	corner_restart_node2 --detect-local-mode InterfaceNamePrefix --pod-interface-name-prefix v-
	wait_real_servers node2 tcp "$ip:8017" "$(pod_ip web):8080"
	ask node2 "iptables-save -t nat | grep -- '-A KUBE-SERVICES.*KUBE-CLUSTER-IP.*KUBE-MARK-MASQ'"
	corner_detect_checks "$ip"

	# Back to the suite's flags.
	stop_proxier node2
	start_proxier node2
	wait_until 120 proxier_synced node2 || corner_failures+=("node2's proxier did not come back with the suite's flags")
	kc delete-service corner-detect >/dev/null
	verdict 17 "local-traffic detection on node2: without --cluster-cidr, with NodeCIDR (rules follow spec.podCIDRs, no restart) and InterfaceNamePrefix v-: c2 keeps its address, node2 is answered" \
		no_failures "${corner_failures[@]}"
}
