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
#
# The Service is dual-stack (RequireDualStack, each endpoint's IPv4 and IPv6 address): the same
# steps run on both cluster IPs at once, interleaved connection by connection, so IPv6 adds a
# connection per step and no wait (verdict 23 for IPv4; 23v6 for IPv6, its template keyed by c1's
# IPv6 address).

readonly affinity_timeout=15

# affinity_get IP: one request from c1 on a new connection, ended by an RST after 1 s; prints
# the endpoint's hostname (IP in brackets for IPv6). Under a loaded emulated VM an answer can take longer: then once more,
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

# affinity_template FAMILY IP: c1's persistence template on node1 for the cluster IP (of that
# family, bracketed for IPv6): "EXPIRE DESTINATION", or nothing.
affinity_template() {
	ip netns exec node1 ipvsadm -Lnc 2>/dev/null |
		awk -v src="$(bracketed "$(pod_addr "$1" c1)"):0" -v vs="$2:8023" '$1 == "TCP" && $4 == src && $5 == vs { print $2, $6 }'
}

# affinity_fail FAMILY MESSAGE: a failure for that family's verdict (the caller's failures4 or
# failures6).
affinity_fail() { if [[ $1 == 6 ]]; then failures6+=("$2"); else failures4+=("$2"); fi; }

# seconds MM:SS: ipvsadm's expire column in seconds.
seconds() { awk -F: '{ print $1 * 60 + $2 }' <<<"$1"; }

scenario_23() {
	heading "ClientIP affinity with a 15 s timeout: one endpoint within it, a fresh choice after it, on both families"
	local failures4=() failures6=() info fam i
	local -A h=() flags=() chosen=() t_last=() template=() first=([4]= [6]=) gone=([4]= [6]=) after=([4]= [6]=)
	info=$(kc apply-service - <<YAML
apiVersion: v1
kind: Service
metadata:
  name: affinity
  annotations: {ipvsproxy.io/scheduler: rr}
spec:
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: $affinity_timeout}}
  ipFamilyPolicy: RequireDualStack
  ports: [{port: 8023, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 23 "ClientIP affinity timeout" false; verdict 23v6 "ClientIP affinity timeout over IPv6" false; return; }
	h[4]=$(cluster_ip_of 4 "$info") h[6]=$(bracketed "$(cluster_ip_of 6 "$info")")
	kc set-endpoints affinity $(dual_endpoints web@node1 s3@node1 s2@node2) ||
		{ verdict 23 "ClientIP affinity timeout" false; verdict 23v6 "ClientIP affinity timeout over IPv6" false; return; }
	show - "e2ectl apply-service affinity.yaml && e2ectl set-endpoints affinity web@node1 s3@node1 s2@node2  # ClientIP, timeoutSeconds $affinity_timeout, rr, RequireDualStack" "CLUSTER_IPS=$(field CLUSTER_IPS "$info")"
	[[ -n ${h[4]} && ${h[6]} == \[*:*\] ]] || affinity_fail 4 "CLUSTER_IPS '$(field CLUSTER_IPS "$info")': want one of each family"
	for fam in 4 6; do
		wait_real_servers node1 tcp "${h[$fam]}:8023" "$(for i in web s3 s2; do echo "$(bracketed "$(pod_addr $fam $i)"):8080"; done | sort | tr '\n' ' ' | sed 's/ $//')" ||
			affinity_fail $fam "node1's real servers for ${h[$fam]}:8023: $(real_servers node1 tcp "${h[$fam]}:8023" | tr '\n' ' ')"
		ask node1 "ipvsadm -Ln -t ${h[$fam]}:8023 | grep ^TCP"
		flags[$fam]=$(awk '{ $1 = $2 = ""; sub(/^ +/, ""); print }' <<<"$answer")
		[[ $answer == *" rr persistent $affinity_timeout" ]] || affinity_fail $fam "${asked[-1]}: want rr persistent $affinity_timeout"
	done

	# Within the timeout: one endpoint, across an idle gap shorter than it; IPv4 and IPv6
	# connections alternate.
	for i in 1 2 3; do
		for fam in 4 6; do first[$fam]+="$(affinity_get "${h[$fam]}") "; done
	done
	sleep 8
	for i in 1 2 3; do
		for fam in 4 6; do
			t_last[$fam]=$(now)
			first[$fam]+="$(affinity_get "${h[$fam]}") "
		done
	done
	for fam in 4 6; do
		first[$fam]=${first[$fam]% }
		chosen[$fam]=${first[$fam]%% *}
		show c1 "6 x (printf 'GET / HTTP/1.1...' | timeout -s KILL 1 socat - TCP:${h[$fam]}:8023,linger=0), 8 s pause after the 3rd" "${first[$fam]}"
		[[ -n ${chosen[$fam]} && $(tr ' ' '\n' <<<"${first[$fam]}" | sort -u | wc -l) == 1 && $(wc -w <<<"${first[$fam]}") == 6 ]] ||
			affinity_fail $fam "within the timeout to ${h[$fam]}: ${first[$fam]}, want one endpoint 6 times"
		template[$fam]=$(affinity_template $fam "${h[$fam]}")
		show node1 "ipvsadm -Lnc | awk '\$4 == \"$(bracketed "$(pod_addr $fam c1)"):0\"'  # c1's persistence template: expire, destination" "${template[$fam]:-<none>}"
		[[ -n ${template[$fam]} && ${template[$fam]#* } == "$(bracketed "$(pod_addr $fam "${chosen[$fam]:-none}")"):8080" ]] ||
			affinity_fail $fam "c1's template '${template[$fam]}', want one to ${chosen[$fam]:-?}:8080"
		[[ -n ${template[$fam]} ]] && (($(seconds "${template[$fam]%% *}") <= affinity_timeout)) ||
			affinity_fail $fam "c1's template expires in '${template[$fam]%% *}', want at most ${affinity_timeout}s"
	done

	# No traffic: the templates go, then the scheduler chooses again.
	local start=$SECONDS
	while ((SECONDS - start < 45)) && [[ -z ${gone[4]} || -z ${gone[6]} ]]; do
		for fam in 4 6; do
			[[ -z ${gone[$fam]} && -z $(affinity_template $fam "${h[$fam]}") ]] && gone[$fam]=$(since "${t_last[$fam]}")
		done
		sleep 0.2
	done
	for fam in 4 6; do
		show node1 "# c1's template for ${h[$fam]}:8023, polled without traffic" "gone ${gone[$fam]:-never} s after the last connection (timeout $affinity_timeout s)"
		[[ -n ${gone[$fam]} ]] || affinity_fail $fam "c1's template still there 45 s after the last connection: $(affinity_template $fam "${h[$fam]}")"
		[[ -z ${gone[$fam]} ]] || awk -v g="${gone[$fam]}" -v t=$((affinity_timeout - 2)) 'BEGIN { exit !(g >= t) }' ||
			affinity_fail $fam "c1's template gone ${gone[$fam]}s after the last connection, before the ${affinity_timeout}s timeout"
	done
	for i in 1 2 3; do
		for fam in 4 6; do after[$fam]+="$(affinity_get "${h[$fam]}") "; done
	done
	for fam in 4 6; do
		after[$fam]=${after[$fam]% }
		show c1 "3 x the same request to ${h[$fam]}:8023 after the template went" "${after[$fam]}"
		[[ -n ${after[$fam]%% *} && ${after[$fam]%% *} != "${chosen[$fam]}" && $(tr ' ' '\n' <<<"${after[$fam]}" | sort -u | wc -l) == 1 && $(wc -w <<<"${after[$fam]}") == 3 ]] ||
			affinity_fail $fam "after the timeout: ${after[$fam]}, want one endpoint other than ${chosen[$fam]} 3 times"
	done

	kc delete-service affinity >/dev/null
	verdict 23 "ClientIP affinity, timeoutSeconds $affinity_timeout: ${flags[4]:-?}; 6 connections (8 s pause) all to ${chosen[4]:-?}; c1's template gone ${gone[4]:-never}s after the last began; then 3 to ${after[4]%% *}" \
		no_failures "${failures4[@]}"
	verdict 23v6 "ClientIP affinity over IPv6 (${h[6]}:8023): ${flags[6]:-?}; 6 connections (8 s pause) all to ${chosen[6]:-?}; c1's IPv6 template gone ${gone[6]:-never}s after the last began; then 3 to ${after[6]%% *}" \
		no_failures "${failures6[@]}"
}
