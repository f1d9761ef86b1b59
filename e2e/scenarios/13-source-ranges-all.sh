# 13-source-ranges-all.sh — issue 14, item 3: loadBalancerSourceRanges [0.0.0.0/0] means everyone,
# as in kube-proxy. (Before, the kernel refused the /0 member of KUBE-LOAD-BALANCER-SRC-CIDR, every
# sync failed, and KUBE-IPVS-FILTER dropped all traffic to the LB.) An unparsable range cannot be
# written through the API server, which validates the field: the fakes' tests cover it.

scenario_13() {
	heading "loadBalancerSourceRanges 0.0.0.0/0: everyone reaches the LB, syncs do not fail"
	corner_failures=()
	local f1 f2
	f1=$(metric node1 ipvsproxy_kernel_write_failures_total)
	f2=$(metric node2 ipvsproxy_kernel_write_failures_total)
	corner_service corner-allow-all "
apiVersion: v1
kind: Service
metadata: {name: corner-allow-all}
spec:
  type: LoadBalancer
  loadBalancerSourceRanges: [0.0.0.0/0]
  ports: [{port: 8013, targetPort: 8080, nodePort: 30113, protocol: TCP}]
" || { verdict 13 "source ranges 0.0.0.0/0" false; return; }
	set_lb_ingress corner-allow-all "$vip" || { verdict 13 "source ranges 0.0.0.0/0: set status" false; return; }
	wait_real_servers node1 tcp "$vip:8013" "$(pod_ip web):8080"
	wait_real_servers node2 tcp "$vip:8013" "$(pod_ip web):8080"
	"$topo" lb-add tcp 8013
	local i
	for i in 1 2; do # the load balancer alternates between the nodes
		corner_curl client "http://$vip:8013/"
		corner_expect "hostname=web"
	done
	sleep 1
	local g1 g2
	g1=$(metric node1 ipvsproxy_kernel_write_failures_total)
	g2=$(metric node2 ipvsproxy_kernel_write_failures_total)
	show - "kernel write failures node1 ${f1:-0} -> ${g1:-0}, node2 ${f2:-0} -> ${g2:-0}" ""
	[[ ${f1:-0} == "${g1:-0}" && ${f2:-0} == "${g2:-0}" ]] || corner_failures+=("kernel write failures grew: node1 ${f1:-0} -> ${g1:-0}, node2 ${f2:-0} -> ${g2:-0}")
	"$topo" lb-del tcp 8013
	kc delete-service corner-allow-all >/dev/null
	verdict 13 "loadBalancerSourceRanges [0.0.0.0/0]: the client reaches $vip:8013 through both nodes; no failed kernel write" \
		no_failures "${corner_failures[@]}"
}
