# 23-affinity-timeout.sh — issue 25, item 2: `sessionAffinity: ClientIP` with
# `sessionAffinityConfig.clientIP.timeoutSeconds: 15`, with real traffic from c1 to a cluster IP
# with three endpoints (web, s3, s2):
#   - the virtual server is `persistent 15` (kube-proxy sets the same flag and timeout);
#   - 3 connections, 8 s without traffic (within the timeout), 3 more: all reach one endpoint;
#     IPVS's persistence template for c1 (ipvsadm -Lnc, source c1:0) names it and expires in at
#     most 15 s (were the timeout not programmed, the default 10800 s would show as 180:00);
#   - with no traffic the template goes 15 s after the last connection (measured, at most 45 s
#     allowed, and not before 13 s), and the next connections reach another endpoint, again all
#     the same one.
# The Service uses the rr scheduler (annotation ipvsproxy.io/scheduler): persistence works the same
# with any scheduler, and with rr a fresh choice is the endpoint after the first one, never the
# first again, so "scheduled afresh" is certain rather than likely (twos could pick the same one).
# Without affinity rr would spread the first 6 connections over all three.
#
# Each connection is one HTTP/1.1 request through socat, SIGKILLed 1 s after it started so that
# the kernel ends the still-open connection with an RST (linger=0): IPVS then keeps it 10 s
# (CLOSE) instead of 2 minutes (TIME_WAIT, after FINs), and a template that still controls a
# connection when it expires is kept another 60 s, so connections must be gone before the 15 s
# are up. (socat's own exit sends a FIN first, even with linger=0.)

readonly affinity_timeout=15

# affinity_get IP: one request from c1 on a new connection, ended by an RST after 1 s; prints
# the endpoint's hostname. Under a loaded emulated VM an answer can take longer: then once more,
# with 3 s (another connection within the timeout, which changes nothing here).
affinity_get() {
	local wait got
	for wait in 1 3; do
		got=$(ip netns exec c1 bash -c "printf 'GET / HTTP/1.1\r\nHost: e2e\r\n\r\n' |
			timeout -s KILL $wait socat -t 10 - TCP:$1:8023,linger=0,shut-none 2>/dev/null" | sed -n 's/^hostname=//p')
		[[ -n $got ]] && break
	done
	echo "$got"
}

# affinity_template IP: c1's persistence template on node1: "EXPIRE DESTINATION", or nothing.
affinity_template() {
	ip netns exec node1 ipvsadm -Lnc 2>/dev/null |
		awk -v src="$(pod_ip c1):0" -v vs="$1:8023" '$1 == "TCP" && $4 == src && $5 == vs { print $2, $6 }'
}

# seconds MM:SS: ipvsadm's expire column in seconds.
seconds() { awk -F: '{ print $1 * 60 + $2 }' <<<"$1"; }

scenario_23() {
	heading "ClientIP affinity with a 15 s timeout: one endpoint within it, a fresh choice after it"
	local failures=() info ip
	info=$(kc apply-service - <<YAML
apiVersion: v1
kind: Service
metadata:
  name: affinity
  annotations: {ipvsproxy.io/scheduler: rr}
spec:
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: $affinity_timeout}}
  ports: [{port: 8023, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 23 "ClientIP affinity timeout" false; return; }
	ip=$(field CLUSTER_IP "$info")
	kc set-endpoints affinity "$(pod_ip web)@node1" "$(pod_ip s3)@node1" "$(pod_ip s2)@node2" ||
		{ verdict 23 "ClientIP affinity timeout" false; return; }
	show - "e2ectl apply-service affinity.yaml && e2ectl set-endpoints affinity web@node1 s3@node1 s2@node2  # ClientIP, timeoutSeconds $affinity_timeout, rr" "CLUSTER_IP=$ip"
	wait_real_servers node1 tcp "$ip:8023" "$(printf '%s:8080\n' "$(pod_ip web)" "$(pod_ip s3)" "$(pod_ip s2)" | sort | tr '\n' ' ' | sed 's/ $//')" ||
		failures+=("node1's real servers for $ip:8023: $(real_servers node1 tcp "$ip:8023" | tr '\n' ' ')")
	ask node1 "ipvsadm -Ln -t $ip:8023 | grep ^TCP"
	local flags
	flags=$(awk '{ $1 = $2 = ""; sub(/^ +/, ""); print }' <<<"$answer")
	[[ $answer == *" rr persistent $affinity_timeout" ]] || failures+=("${asked[-1]}: want rr persistent $affinity_timeout")

	# Within the timeout: one endpoint, across an idle gap shorter than it.
	local first=() i
	local t_last chosen template expire
	for i in 1 2 3; do first+=("$(affinity_get "$ip")"); done
	sleep 8
	for i in 1 2 3; do
		t_last=$(now)
		first+=("$(affinity_get "$ip")")
	done
	chosen=${first[0]}
	show c1 "6 x (printf 'GET / HTTP/1.1...' | timeout -s KILL 1 socat - TCP:$ip:8023,linger=0), 8 s pause after the 3rd" "${first[*]}"
	[[ -n $chosen && $(printf '%s\n' "${first[@]}" | sort -u | wc -l) == 1 ]] ||
		failures+=("within the timeout: ${first[*]}, want one endpoint 6 times")
	template=$(affinity_template "$ip")
	show node1 "ipvsadm -Lnc | awk '\$4 == \"$(pod_ip c1):0\"'  # c1's persistence template: expire, destination" "${template:-<none>}"
	expire=$(seconds "${template%% *}")
	[[ -n $template && ${template#* } == "$(pod_ip "$chosen"):8080" ]] || failures+=("c1's template '${template}', want one to $(pod_ip "$chosen"):8080")
	[[ -n $template ]] && ((expire <= affinity_timeout)) || failures+=("c1's template expires in '${template%% *}', want at most ${affinity_timeout}s")

	# No traffic: the template goes, then the scheduler chooses again.
	local gone=
	wait_until 45 bash -c "[[ -z \$(ip netns exec node1 ipvsadm -Lnc | awk '\$4 == \"$(pod_ip c1):0\" && \$5 == \"$ip:8023\"') ]]" && gone=$(since "$t_last")
	show node1 "# c1's template, polled without traffic" "gone ${gone:-never} s after the last connection (timeout $affinity_timeout s)"
	[[ -n $gone ]] || failures+=("c1's template still there 45 s after the last connection: $(affinity_template "$ip")")
	[[ -z $gone ]] || awk -v g="$gone" -v t=$((affinity_timeout - 2)) 'BEGIN { exit !(g >= t) }' ||
		failures+=("c1's template gone ${gone}s after the last connection, before the ${affinity_timeout}s timeout")
	local after=()
	for i in 1 2 3; do after+=("$(affinity_get "$ip")"); done
	show c1 "3 x the same request after the template went" "${after[*]}"
	[[ -n ${after[0]} && ${after[0]} != "$chosen" && $(printf '%s\n' "${after[@]}" | sort -u | wc -l) == 1 ]] ||
		failures+=("after the timeout: ${after[*]}, want one endpoint other than $chosen 3 times")

	kc delete-service affinity >/dev/null
	verdict 23 "ClientIP affinity, timeoutSeconds $affinity_timeout: ${flags:-?}; 6 connections (8 s pause) all to ${chosen:-?}; c1's template gone ${gone:-never}s after the last began; then 3 to ${after[0]:-?}" \
		no_failures "${failures[@]}"
}
