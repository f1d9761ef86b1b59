# 07-spread.sh — the seed's iptables rules split a Service three ways with probabilities 1/3, 1/2,
# 1. IPVS's twos scheduler must spread new connections over three endpoints too: 600 requests,
# each on a new connection, from a pod; each endpoint's share must lie in [100, 300] (expected
# 200; a binomial standard deviation is about 12, so a failure means a skew, not bad luck).

scenario_7() {
	heading "Three endpoints share the load"
	local info
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata: {name: spread}
spec:
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 7 "spread" false; return; }
	spread_ip=$(field CLUSTER_IP "$info")
	show - "e2ectl apply-service spread.yaml && e2ectl set-endpoints spread $(pod_ip web)@node1 $(pod_ip s3)@node1 $(pod_ip s2)@node2" "CLUSTER_IP=$spread_ip"
	kc set-endpoints spread "$(pod_ip web)@node1" "$(pod_ip s3)@node1" "$(pod_ip s2)@node2" ||
		{ verdict 7 "spread" false; return; }
	local want
	want=$(printf '%s:8080\n' "$(pod_ip web)" "$(pod_ip s3)" "$(pod_ip s2)" | sort | tr '\n' ' ' | sed 's/ $//')
	wait_real_servers node1 tcp "$spread_ip:80" "$want"
	# Connection: close makes curl open a new connection per URL, so each one is scheduled.
	ask c1 "curl -s -H 'Connection: close' 'http://$spread_ip/?n=[1-600]' | grep ^hostname= | sort | uniq -c"
	verdict 7 "600 requests over three endpoints: each gets between 100 and 300" \
		shares_within "$answer" 100 300 web s3 s2
}

# shares_within UNIQ_C LOW HIGH NAME...: each NAME's count in `uniq -c` output is in [LOW, HIGH].
shares_within() {
	local counts=$1 low=$2 high=$3 name n total=0
	shift 3
	for name in "$@"; do
		n=$(awk -v h="hostname=$name" '$2 == h { print $1 }' <<<"$counts")
		n=${n:-0}
		total=$((total + n))
		((n >= low && n <= high)) || { echo "$name got $n, want $low..$high"; return 1; }
	done
	((total == 600)) || { echo "only $total of 600 requests answered"; return 1; }
}
