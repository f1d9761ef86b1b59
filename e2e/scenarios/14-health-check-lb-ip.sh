# 14-health-check-lb-ip.sh — issue 14, item 4: health-check node ports. A cloud probe that targets
# LB-IP:healthCheckNodePort reaches the health server instead of KUBE-IPVS-FILTER's REJECT
# (kube-proxy's regression fixed by kubernetes#117723): through the load balancer, node1 answers 200
# (it has the endpoint) and node2 503. And on a node whose filter INPUT policy is DROP, the probe
# to the node's address still answers, while another port of the node (10256) is dropped.

scenario_14() {
	heading "healthCheckNodePort through the LB IP, and under an INPUT policy of DROP"
	corner_failures=()
	corner_service corner-hc "
apiVersion: v1
kind: Service
metadata: {name: corner-hc}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  ports: [{port: 8014, targetPort: 8080, nodePort: 30114, protocol: TCP}]
" || { verdict 14 "health check node port" false; return; }
	local hc
	hc=$(field HEALTH_CHECK_NODE_PORT "$corner_info")
	set_lb_ingress corner-hc "$vip" || { verdict 14 "health check node port: set status" false; return; }
	wait_real_servers node1 tcp "$vip:8014" "$(pod_ip web):8080"
	wait_until 30 bash -c "[[ \$(ip netns exec node2 curl -s -o /dev/null -w '%{http_code}' --max-time 2 localhost:$hc/healthz) == 503 ]]"
	# The probe's path: the load balancer forwards VIP:hc to each node in turn.
	"$topo" lb-add tcp "$hc"
	local i codes=()
	for i in 1 2; do
		ask client "curl -sS --max-time 3 -o /dev/null -w '%{http_code}' http://$vip:$hc/healthz"
		codes+=("$answer")
	done
	[[ " ${codes[*]} " == *" 200 "* && " ${codes[*]} " == *" 503 "* ]] ||
		corner_failures+=("probes to $vip:$hc answered '${codes[*]}', want 200 (node1) and 503 (node2)")
	"$topo" lb-del tcp "$hc"

	# node1 with INPUT policy DROP (and the usual ESTABLISHED and loopback accepts).
	ip netns exec node1 iptables -A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
	ip netns exec node1 iptables -A INPUT -i lo -j ACCEPT
	ip netns exec node1 iptables -P INPUT DROP
	show node1 "iptables -P INPUT DROP  # with ESTABLISHED and lo accepted" ""
	ask client "curl -sS --max-time 3 -o /dev/null -w '%{http_code}' http://$node1_addr:$hc/healthz"
	[[ $status == 0 && $answer == 200 ]] || corner_failures+=("${asked[-1]}: want 200 under INPUT DROP")
	ask client "curl -sS --max-time 3 -o /dev/null -w '%{http_code}' http://$node1_addr:10256/healthz"
	((status == 28)) || corner_failures+=("${asked[-1]}: want a timeout (the policy drops other ports)")
	ip netns exec node1 iptables -P INPUT ACCEPT
	ip netns exec node1 iptables -D INPUT -i lo -j ACCEPT
	ip netns exec node1 iptables -D INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT

	kc delete-service corner-hc >/dev/null
	verdict 14 "healthCheckNodePort $hc: through $vip node1 200 and node2 503; node1 under INPUT DROP answers the probe and drops :10256" \
		no_failures "${corner_failures[@]}"
}
