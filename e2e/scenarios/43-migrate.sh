# 43-migrate.sh — the node-by-node migration of docs/migrate-from-kube-proxy.md, step by step
# (issue 11). kube-proxy's DaemonSet (kubeadm's) and ipvsproxy's select on the node label
# ipvsproxy.io/proxy; relabelling node1 moves it from one to the other (no DaemonSet controller
# runs here: `e2ectl daemonsets-for` says which DaemonSets would run a pod on the node). node1
# carries kube-proxy's iptables-mode leftovers: between the proxies, its nat DNAT to an endpoint
# that is gone breaks the node's own connection to the cluster IP. The init container's command
# removes them (and nothing of ipvsproxy's), ipvsproxy starts and serves the cluster IP and the
# NodePort; the command again (a pod restart) changes nothing. (Once ipvsproxy has synced, most
# leftovers no longer act: it rewrites nat KUBE-SERVICES, its jumps come first, and IPVS
# rewrites a local connection's destination before filter OUTPUT; the clean-up is what removes
# them, which the counts below check.) Rollback: the rollback
# pod's `ipvsproxy cleanup`, and node1 back on kube-proxy. kubectl's place is taken by e2ectl
# (label-node, create-daemonset, patch-daemonset), each a one-line equivalent.

readonly migrate43_port=30043

# migrate43_code: the HTTP status of node1's NodePort, from the client outside the cluster.
migrate43_code() {
	ip netns exec client curl -s -o /dev/null -w '%{http_code}' --connect-timeout 2 --max-time 5 \
		"http://$node1_addr:$migrate43_port/"
}

scenario_43() {
	heading "node-by-node migration from kube-proxy: labels, the init container's clean-up, rollback"
	local info ip failures=()
	info=$(kc apply-service - <<YAML
apiVersion: v1
kind: Service
metadata: {name: migrate43}
spec:
  type: NodePort
  ports: [{port: 80, targetPort: 8080, nodePort: $migrate43_port, protocol: TCP}]
YAML
) || { verdict 43 "migration" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints migrate43 "$(pod_ip web)@node1" || { verdict 43 "migration" false; return; }
	wait_real_servers node1 tcp "$node1_addr:$migrate43_port" "$(pod_ip web):8080"

	# 1. Both DaemonSets on the label; every node starts on kube-proxy.
	local n
	kc create-daemonset "$repo/e2e/scenarios/testdata/kube-proxy-daemonset.yaml" || failures+=("create kube-proxy DaemonSet")
	show - "kubectl apply -f kube-proxy-daemonset.yaml  # kubeadm's, as e2ectl create-daemonset" ""
	for n in node1 node2; do
		kc label-node "$n" kubernetes.io/os=linux || failures+=("label $n os")
		kc label-node "$n" ipvsproxy.io/proxy=kube-proxy || failures+=("label $n")
	done
	show - "kubectl label node --all ipvsproxy.io/proxy=kube-proxy" ""
	kc patch-daemonset kube-system/kube-proxy "$repo/deploy/overlays/migrate/kube-proxy-patch.yaml" || failures+=("patch kube-proxy")
	show - "kubectl -n kube-system patch daemonset kube-proxy --patch-file deploy/overlays/migrate/kube-proxy-patch.yaml" ""
	kc patch-daemonset kube-system/ipvsproxy "$repo/deploy/overlays/migrate/daemonset-patch.yaml" || failures+=("patch ipvsproxy")
	show - "kubectl apply -k deploy/overlays/migrate  # its patch, as e2ectl patch-daemonset" ""
	local on_kube_proxy
	on_kube_proxy=$(kc daemonsets-for node1)
	show - "e2ectl daemonsets-for node1" "$on_kube_proxy"

	# node1 as kube-proxy left it: ipvsproxy not running, kube-proxy's rules in the kernel.
	stop_proxier node1
	sed -e "s/CLUSTER_IP/$ip/" -e "s/NODE_PORT/$migrate43_port/" "$repo/e2e/scenarios/testdata/kube-proxy-leftovers.rules" |
		ip netns exec node1 iptables-restore --noflush || failures+=("install kube-proxy's leftovers")
	ask node1 "curl -s -o /dev/null -w '%{http_code}' --connect-timeout 2 --max-time 5 http://$ip/  # between the proxies: kube-proxy's DNAT"
	local refused=$answer

	# 2. Move node1: the label, then what the DaemonSet's pod runs there.
	kc label-node node1 ipvsproxy.io/proxy=ipvsproxy || failures+=("relabel node1")
	show - "kubectl label node node1 ipvsproxy.io/proxy=ipvsproxy --overwrite" ""
	local on_ipvsproxy
	on_ipvsproxy=$(kc daemonsets-for node1)
	show - "e2ectl daemonsets-for node1" "$on_ipvsproxy"
	ask node1 "ipvsproxy cleanup --kube-proxy-leftovers  # the init container"
	((status == 0)) || failures+=("cleanup --kube-proxy-leftovers failed: $(oneline "$answer")")
	local cleaned=$answer
	ask node1 "iptables-save | grep -cE 'KUBE-(SVC|SEP|NODEPORTS|EXTERNAL-SERVICES|PROXY-FIREWALL|PROXY-CANARY)'"
	local left=$answer
	start_proxier node1
	wait_until 120 proxier_synced node1 || failures+=("node1's ipvsproxy did not sync")
	wait_until 30 bash -c "[[ \$(ip netns exec client curl -s -o /dev/null -w '%{http_code}' --connect-timeout 2 --max-time 5 http://$node1_addr:$migrate43_port/) == 200 ]]"
	ask client "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://$node1_addr:$migrate43_port/  # ipvsproxy on node1"
	local served=$answer
	ask node1 "curl -s -o /dev/null -w '%{http_code}' --connect-timeout 2 --max-time 5 http://$ip/  # the node's own connection"
	local served_local=$answer

	# A restart of the pod runs the init container again, after the old container stopped (it
	# holds the node lock while it runs): nothing of ipvsproxy's goes.
	local vs_before vs_after rules_before rules_after
	stop_proxier node1
	vs_before=$(ip netns exec node1 ipvsadm -Ln | sort)
	rules_before=$(ip netns exec node1 iptables-save | grep -v '^#' | sed 's/\[[0-9:]*\]//')
	ask node1 "ipvsproxy cleanup --kube-proxy-leftovers  # a restart's init container"
	local again=$answer
	vs_after=$(ip netns exec node1 ipvsadm -Ln | sort)
	rules_after=$(ip netns exec node1 iptables-save | grep -v '^#' | sed 's/\[[0-9:]*\]//')
	start_proxier node1
	wait_until 120 proxier_synced node1
	[[ $vs_before == "$vs_after" ]] || failures+=("the second clean-up changed IPVS")
	[[ $rules_before == "$rules_after" ]] || failures+=("the second clean-up changed iptables")
	ask client "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://$node1_addr:$migrate43_port/  # after the second clean-up"
	local still=$answer

	# 3. Rollback: off both DaemonSets, the rollback pod's command, back on kube-proxy.
	kc label-node node1 ipvsproxy.io/proxy=rollback || failures+=("label rollback")
	show - "kubectl label node node1 ipvsproxy.io/proxy=rollback --overwrite" ""
	local on_none
	on_none=$(kc daemonsets-for node1)
	show - "e2ectl daemonsets-for node1" "$on_none"
	stop_proxier node1
	ask node1 "ipvsproxy cleanup  # the rollback pod"
	((status == 0)) || failures+=("rollback cleanup failed: $(oneline "$answer")")
	ask node1 "ipvsadm -Ln | grep -cE '^(TCP|UDP)'; ipset list -n | grep -c KUBE-; iptables-save | grep -c KUBE-"
	local gone
	gone=$(tr '\n' ' ' <<<"$answer")
	kc label-node node1 ipvsproxy.io/proxy=kube-proxy || failures+=("label back")
	show - "kubectl label node node1 ipvsproxy.io/proxy=kube-proxy --overwrite" ""
	local back
	back=$(kc daemonsets-for node1)
	show - "e2ectl daemonsets-for node1" "$back"

	# Leave node1 as the other scenarios expect it.
	start_proxier node1
	wait_until 120 proxier_synced node1 || failures+=("node1's ipvsproxy did not come back")
	kc delete-service migrate43 >/dev/null || true

	[[ $on_kube_proxy == kube-proxy ]] || failures+=("node1 on '$on_kube_proxy' before, want kube-proxy only")
	[[ $refused != 200 ]] || failures+=("kube-proxy's leftover DNAT did not break the node's connection to the cluster IP")
	[[ $on_ipvsproxy == ipvsproxy ]] || failures+=("node1 on '$on_ipvsproxy' after relabelling, want ipvsproxy only")
	[[ $cleaned == *"Removed kube-proxy's leftovers"* && $cleaned != *count=0* ]] || failures+=("the init container removed nothing: $(oneline "$cleaned")")
	[[ $left == 0 ]] || failures+=("$left kube-proxy rules left")
	[[ $served == 200 ]] || failures+=("NodePort $served under ipvsproxy, want 200")
	[[ $served_local == 200 ]] || failures+=("the node's connection to the cluster IP: $served_local, want 200")
	[[ $again == *count=0* ]] || failures+=("the second clean-up removed something: $(oneline "$again")")
	[[ $still == 200 ]] || failures+=("NodePort $still after the second clean-up")
	[[ -z $on_none ]] || failures+=("node1 on '$on_none' during rollback, want neither")
	[[ $gone == "0 0 0 " ]] || failures+=("after rollback's cleanup: virtual servers, KUBE- sets, KUBE- rules = $gone")
	[[ $back == kube-proxy ]] || failures+=("node1 on '$back' after rollback, want kube-proxy")
	verdict 43 "migration node by node: label moves node1 between the DaemonSets; kube-proxy's leftovers (which break the node's connection between proxies) removed by the init container's command, cluster IP and NodePort served; a second run changes nothing; rollback cleans and hands back" \
		no_failures "${failures[@]}"
}
