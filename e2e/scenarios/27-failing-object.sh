# 27-failing-object.sh — issue 8 item 1: one kernel object that keeps failing costs its own
# retries and nothing else. Service "bad27" has one endpoint, 198.51.100.255: a valid IPv4
# address to the API server and the builder, but the broadcast address of node1's subnet, so
# node1's IPVS refuses the real server (ip_vs_new_dest wants RTN_UNICAST or RTN_LOCAL) — a
# refusal only the kernel's routing table can tell. While it fails, on node1: the failure is
# one object in ipvsproxy_kernel_objects_failing and a SyncFailed Event on bad27; a new
# Service is programmed at once by a partial sync; over 25 s (more than two sync periods)
# syncs are not all full and /healthz stays 200.

scenario_27() {
	heading "One failing object costs nothing else"
	local why=() t0 full0 partial0
	kc apply-service - >/dev/null <<YAML || { verdict 27 "failing object: apply bad27" false; return; }
apiVersion: v1
kind: Service
metadata: {name: bad27}
spec:
  type: ClusterIP
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
	kc set-endpoints bad27 "198.51.100.255@node2" || { verdict 27 "failing object: endpoints" false; return; }
	wait_until 30 objects_failing node1 ||
		why+=("node1 reports no failing object")
	ask node1 "curl -s --max-time 5 http://127.0.0.1:10249/metrics | grep '^ipvsproxy_kernel_objects_failing'"
	t0=$SECONDS
	full0=$(metric node1 ipvsproxy_sync_full_total) partial0=$(metric node1 ipvsproxy_sync_partial_total)
	kc apply-service - >/dev/null <<YAML || { verdict 27 "failing object: apply good27" false; return; }
apiVersion: v1
kind: Service
metadata: {name: good27}
spec:
  type: ClusterIP
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
YAML
	kc set-endpoints good27 "$(pod_ip s3)@node1" || { verdict 27 "failing object: endpoints" false; return; }
	local good_ip start
	good_ip=$(field CLUSTER_IP "$(kc service-info good27)")
	start=$(now)
	wait_real_servers node1 tcp "$good_ip:80" "$(pod_ip s3):8080" || why+=("good27 was not programmed on node1")
	show node1 "(good27 programmed after)" "$(since "$start") s"
	ask c1 "curl -s --max-time 5 $good_ip | grep hostname"
	[[ $answer == hostname=s3 ]] || why+=("good27 answered '$answer', want hostname=s3")
	sleep $((25 - (SECONDS - t0) > 0 ? 25 - (SECONDS - t0) : 0))
	ask node1 "curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:10256/healthz"
	[[ $answer == 200 ]] || why+=("/healthz answered $answer while one object fails, want 200")
	local full1 partial1
	full1=$(metric node1 ipvsproxy_sync_full_total) partial1=$(metric node1 ipvsproxy_sync_partial_total)
	show node1 "(syncs in $((SECONDS - t0)) s)" "full +$((full1 - full0)), partial +$((partial1 - partial0))"
	# Periodic full syncs come every 10 s; a failure must not add any.
	((full1 - full0 <= (SECONDS - t0) / 10 + 1)) || why+=("$((full1 - full0)) full syncs in $((SECONDS - t0)) s: failures make syncs full")
	((partial1 > partial0)) || why+=("no partial sync ran")
	wait_until 20 bash -c "events_for bad27 | grep -q SyncFailed" || why+=("no SyncFailed Event on bad27")
	ask - "events_for bad27 | grep SyncFailed | head -n 1"
	kc delete-service bad27 >/dev/null
	kc delete-service good27 >/dev/null
	verdict 27 "failing object: bad27's refused real server is one failing object with a SyncFailed Event; good27 programmed by a partial sync; /healthz 200; no extra full sync" \
		no_failures "${why[@]}"
}

# objects_failing NODE: the node's proxier reports some kernel object failing.
objects_failing() {
	local n
	n=$(metric "$1" ipvsproxy_kernel_objects_failing)
	[[ -n $n ]] && ((n >= 1))
}
