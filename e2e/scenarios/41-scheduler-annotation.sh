# 41-scheduler-annotation.sh — a Service chooses its IPVS scheduler and the scheduler's flags
# (issue 11; kubernetes#75502, #118784): `ipvsproxy.io/scheduler: mh` with
# `ipvsproxy.io/scheduler-flags: mh-port,mh-fallback` becomes an mh virtual server with both
# flags in the VM's kernel; a Service with a misspelt scheduler keeps the default and gets a
# Warning Event naming the annotation, and neither disturbs the other.

# events_of NAME: the reason and message of the Events about Service NAME (admin certificate).
events_of() {
	curl -sS --max-time 20 --cacert "$E2E_PKI/ca.crt" --cert "$E2E_PKI/admin.crt" --key "$E2E_PKI/admin.key" \
		"https://$E2E_HOST_ADDR:6443/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=$1" |
		tr ',' '\n' | grep -E '"(reason|message)"' | tr '\n' ' '
}

has_invalid_service_event() { events_of "$1" | grep -q InvalidService; }

scenario_41() {
	heading "A Service's own scheduler: mh with mh-port and mh-fallback"
	local info hashed_ip typo_ip
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata:
  name: hashed41
  annotations: {ipvsproxy.io/scheduler: mh, ipvsproxy.io/scheduler-flags: "mh-port,mh-fallback"}
spec:
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 41 "scheduler annotation" false; return; }
	hashed_ip=$(field CLUSTER_IP "$info")
	info=$(kc apply-service - <<'YAML'
apiVersion: v1
kind: Service
metadata:
  name: typo41
  annotations: {ipvsproxy.io/scheduler: mhh}
spec:
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
) || { verdict 41 "scheduler annotation" false; return; }
	typo_ip=$(field CLUSTER_IP "$info")
	kc set-endpoints hashed41 "$(pod_ip web)@node1" "$(pod_ip s2)@node2" || { verdict 41 "scheduler annotation" false; return; }
	kc set-endpoints typo41 "$(pod_ip web)@node1" || { verdict 41 "scheduler annotation" false; return; }
	wait_real_servers node1 tcp "$hashed_ip:80" "$(printf '%s:8080\n' "$(pod_ip web)" "$(pod_ip s2)" | sort | tr '\n' ' ' | sed 's/ $//')"
	wait_real_servers node1 tcp "$typo_ip:80" "$(pod_ip web):8080"
	ask node1 "ipvsadm -Ln -t $hashed_ip:80 | awk '\$1 == \"TCP\"'"
	local hashed=$answer
	ask node1 "ipvsadm -Ln -t $typo_ip:80 | awk '\$1 == \"TCP\"'"
	local typo=$answer
	ask c1 "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://$hashed_ip/"
	local code=$answer
	wait_until 30 has_invalid_service_event typo41
	local events
	events=$(events_of typo41)
	show - "kubectl get events --field-selector involvedObject.name=typo41" "$events"
	verdict 41 "scheduler annotation: mh with mh-port,mh-fallback in the kernel; a misspelt one keeps twos with an Event" \
		annotation41_ok "$hashed" "$typo" "$code" "$events"
	kc delete-service hashed41 >/dev/null 2>&1 || true
	kc delete-service typo41 >/dev/null 2>&1 || true
}

annotation41_ok() {
	local hashed=$1 typo=$2 code=$3 events=$4
	[[ $(awk '{ print $3 }' <<<"$hashed") == mh && $hashed == *mh-fallback* && $hashed == *mh-port* ]] ||
		{ echo "annotated virtual server: '$hashed', want mh with mh-fallback and mh-port"; return 1; }
	[[ $(awk '{ print $3 }' <<<"$typo") == twos && $typo != *mh* ]] || { echo "misspelt annotation's virtual server: '$typo', want twos"; return 1; }
	[[ $code == 200 ]] || { echo "the mh Service answered $code"; return 1; }
	[[ $events == *InvalidService* && $events == *ipvsproxy.io/scheduler* && $events == *mhh* ]] ||
		{ echo "no Warning Event naming the annotation: $events"; return 1; }
}
