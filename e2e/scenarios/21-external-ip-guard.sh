# 21-external-ip-guard.sh — issue 14 item 11, the CVE-2020-8554 guard. node1's daemon is restarted
# with --external-ip-cidrs 203.0.113.0/25,10.96.210.0/24. Service "squat" (created first, so it would win a
# clash) names four external IPs, all on port 8080, served by s3:
#   10.96.210.10  not yet anyone's; then Service "victim" is created with that cluster IP
#   10.244.2.10   pod s2's address (inside --cluster-cidr)
#   203.0.113.210 outside --external-ip-cidrs
#   203.0.113.30  an ordinary external IP, inside --external-ip-cidrs
# Before the guard, c1 calling the victim's cluster IP or pod s2 reached s3, and node1 answered
# 203.0.113.210. After: victim's cluster IP reaches web, s2 answers as itself, 203.0.113.210
# gets nothing, 203.0.113.30 is served, and squat has ExternalIPRefused Events. When victim is
# deleted, squat's 10.96.210.10 stays refused: it lies in the API server's Service range (its
# ServiceCIDR object, which the daemon reads since issue 9), which no external IP may use.

scenario_21() {
	heading "External IPs that would intercept someone else's traffic are refused (CVE-2020-8554)"
	local taken=10.96.210.10 outside=203.0.113.210 fine=203.0.113.30 pod=10.244.2.10
	restart_proxier_with node1 --external-ip-cidrs 203.0.113.0/25,10.96.210.0/24 || { verdict 21 "external IP guard" false; return; }
	show - "ipvsproxy run ... --external-ip-cidrs 203.0.113.0/25,10.96.210.0/24  # node1" ""
	kc apply-service - >/dev/null <<YAML || { verdict 21 "external IP guard" false; return; }
apiVersion: v1
kind: Service
metadata: {name: squat}
spec:
  ports: [{port: 8080, targetPort: 8080, protocol: TCP}]
  externalIPs: [$taken, $pod, $outside, $fine]
YAML
	kc set-endpoints squat "$(pod_ip s3)@node1" >/dev/null || { verdict 21 "external IP guard" false; return; }
	show - "e2ectl apply-service squat.yaml  # externalIPs $taken $pod $outside $fine, endpoint s3" ""
	wait_real_servers node1 tcp "$fine:8080" "$(pod_ip s3):8080"
	sleep 1
	kc apply-service - >/dev/null <<YAML || { verdict 21 "external IP guard" false; return; }
apiVersion: v1
kind: Service
metadata: {name: victim}
spec:
  clusterIP: $taken
  ports: [{port: 8080, targetPort: 8080, protocol: TCP}]
YAML
	kc set-endpoints victim "$(pod_ip web)@node1" >/dev/null || { verdict 21 "external IP guard" false; return; }
	show - "e2ectl apply-service victim.yaml  # clusterIP $taken, endpoint web" ""
	wait_until 30 bash -c "ip netns exec c1 curl -s --max-time 2 $taken:8080 | grep -q ^hostname=web"
	ask c1 "curl -s --max-time 5 $taken:8080 | grep ^hostname="
	local victim_answer=$answer
	ask c1 "curl -s --max-time 5 $pod:8080 | grep ^hostname="
	local pod_answer=$answer
	ask node1 "curl -s --connect-timeout 2 --max-time 3 $outside:8080 | grep ^hostname="
	local outside_answer=$answer
	ask c1 "curl -s --max-time 5 $fine:8080 | grep ^hostname="
	local fine_answer=$answer
	# Events are posted asynchronously by the daemons' broadcasters.
	wait_until 20 bash -c "squat_events | grep -q 'is the cluster IP of Service default/victim'"
	ask - "squat_events"
	local events=$answer
	kc delete-service victim >/dev/null
	sleep 5 # many sync periods: time for a wrong answer to show
	ask c1 "curl -s --connect-timeout 2 --max-time 3 $taken:8080 | grep ^hostname=  # victim deleted"
	local after_delete=$answer
	verdict 21 "external IP guard: another Service's cluster IP, a pod IP and an address outside --external-ip-cidrs are refused with Events; an allowed one is served; after victim's deletion its address stays refused (in the Service range)" \
		guard_ok "$victim_answer" "$pod_answer" "$outside_answer" "$fine_answer" "$events" "$after_delete"
	kc delete-service squat >/dev/null
	restart_proxier_with node1
}

# squat_events: the ExternalIPRefused Events on Service squat, one message a line.
squat_events() {
	curl -sS --fail --max-time 20 --cacert "$E2E_PKI/ca.crt" --cert "$E2E_PKI/admin.crt" --key "$E2E_PKI/admin.key" \
		"https://$E2E_HOST_ADDR:6443/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=squat,reason=ExternalIPRefused" |
		grep -o '"message": *"[^"]*"' | sort -u
}
export -f squat_events
export E2E_PKI E2E_HOST_ADDR

guard_ok() {
	local fail=()
	[[ $1 == hostname=web ]] || fail+=("victim's cluster IP answered '$1', want hostname=web")
	[[ $2 == hostname=s2 ]] || fail+=("pod s2 answered '$2', want hostname=s2")
	[[ -z $3 ]] || fail+=("node1 answered $3 for an external IP outside --external-ip-cidrs")
	[[ $4 == hostname=s3 ]] || fail+=("the allowed external IP answered '$4', want hostname=s3")
	local want
	for want in "10.96.210.10 is the cluster IP of Service default/victim" "10.244.2.10 lies in the pod range 10.244.0.0/16" \
		"203.0.113.210 is outside --external-ip-cidrs" "10.96.210.10 lies in the Service range"; do
		[[ $5 == *"$want"* ]] || fail+=("no Event saying '$want'")
	done
	[[ $6 != hostname=s3 ]] || fail+=("after victim's deletion squat took its address (answered $6): a Service-range address must stay refused")
	no_failures "${fail[@]}"
}
