# lib.sh — what the host-side simulations share (sourced by node-watch.sh and fleet-start.sh):
# a control plane whose API server the network namespaces reach, proxies started in namespaces
# of their own (each namespace's veth counts exactly what its proxy receives), and the
# measurements of a process (CPU time, memory) and of the API server (its metrics).
# Needs root (network namespaces), run on the host, not in the VM.

sim_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$sim_here/../.." && pwd)
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
clk_tck=$(getconf CLK_TCK)
say() { printf '%s: %s\n' "${sim_name:-sim}" "$*" >&2; }
die() { say "error: $*"; exit 1; }

# sim_controlplane DIR: etcd and kube-apiserver on this host, listening on every address (the
# namespaces reach it through their veth; its serving certificate names localhost, which their
# kubeconfigs check), ports from SIM_PORT (default 7843; etcd SIM_PORT-3400 and -3399).
sim_controlplane() {
	local dir=$1 port=${SIM_PORT:-7843}
	sim_bin "$dir.bin"
	IPVSPROXY_E2E_BIN=$dir.bin APISERVER_PORT=$port ETCD_CLIENT_PORT=$((port - 3400)) ETCD_PEER_PORT=$((port - 3399)) \
		APISERVER_EXTRA_ARGS="--bind-address=0.0.0.0 ${SIM_APISERVER_ARGS:-}" \
		"$repo/e2e/controlplane/start.sh" "$dir" >/dev/null 2>"$dir.start.log" || { cat "$dir.start.log" >&2; die "control plane did not start"; }
	sim_cp=$dir sim_port=$port
	E2E_BIN=$(sed -n 's/^E2E_BIN=//p' "$dir/env")
	export KUBECONFIG=$dir/admin.kubeconfig
}

# sim_bin DIR: the control plane's binaries for this run in DIR: kube-apiserver, etcd and
# kube-proxy from build.sh's cache, e2ectl built from this tree (the cache's e2ectl is rebuilt by
# every checkout that starts a control plane, and may lack this tree's commands meanwhile).
sim_bin() {
	local shared
	shared=$("$repo/e2e/controlplane/build.sh" 2>/dev/null) || die "e2e/controlplane/build.sh failed"
	mkdir -p "$1"
	for b in kube-apiserver etcd kube-proxy; do ln -sf "$shared/$b" "$1/$b"; done
	(cd "$repo/e2e/controlplane" && CGO_ENABLED=0 "$go" build -trimpath -buildvcs=false -o "$1/e2ectl" ./cmd/e2ectl) || die "e2ectl did not build"
}

sim_kc() { "$E2E_BIN/e2ectl" --kubeconfig "$sim_cp/admin.kubeconfig" "$@"; }

# sim_netns NAME INDEX: a namespace with a veth to this host, 10.253.INDEX/30 (.1 here, .2 there;
# INDEX 0-255 with the third octet from INDEX/64), its loopback up. It prints the host side's name.
sim_netns() {
	local name=$1 i=$2 host_if
	local net=$((i / 64)) sub=$(((i % 64) * 4))
	host_if=sv$i
	ip netns add "$name"
	ip link add "$host_if" type veth peer name eth0 netns "$name"
	ip addr add "10.253.$net.$((sub + 1))/30" dev "$host_if"
	ip link set "$host_if" up
	ip -n "$name" addr add "10.253.$net.$((sub + 2))/30" dev eth0
	ip -n "$name" link set eth0 up
	ip -n "$name" link set lo up
	ip -n "$name" route add default via "10.253.$net.$((sub + 1))"
	echo "$host_if"
}

sim_netns_del() { ip netns del "$1" 2>/dev/null || true; ip link del "$2" 2>/dev/null || true; }

# sim_kubeconfig SRC DST INDEX: SRC's kubeconfig with the server at this host's address on the
# namespace INDEX's veth, the certificate checked against the name localhost.
sim_kubeconfig() {
	local i=$3 net=$(($3 / 64)) sub=$((($3 % 64) * 4))
	sed -e "s|server: https://[^:]*:[0-9]*|server: https://10.253.$net.$((sub + 1)):$sim_port|" \
		-e "s|^\(    server: .*\)$|\1\n    tls-server-name: localhost|" "$1" >"$2"
}

# sim_rx IF: bytes the host sent into a namespace through its veth (what its proxy received).
sim_rx() { cat "/sys/class/net/$1/statistics/tx_bytes"; }

# sim_cpu PID: the process's user + system seconds; sim_mem PID FIELD: VmRSS or VmHWM in KiB.
sim_cpu() { awk -v hz="$clk_tck" '{ sub(/.*\) /, ""); split($0, f, " "); printf "%.2f\n", (f[12] + f[13]) / hz }' "/proc/$1/stat"; }
sim_mem() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

# sim_metric NAME FILTER: the API server's metric NAME summed over series matching FILTER.
sim_metric() {
	curl -s --cacert "$sim_cp/pki/ca.crt" --cert "$sim_cp/pki/admin.crt" --key "$sim_cp/pki/admin.key" \
		"https://127.0.0.1:$sim_port/metrics" |
		awk -v m="$1" -v f="${2:-}" '($1 == m || index($1, m "{") == 1) && index($1, f) { s += $2 } END { printf "%.0f\n", s }'
}

# sim_apiserver_pid: the API server of the control plane.
sim_apiserver_pid() { cat "$sim_cp/kube-apiserver.pid"; }

# sim_fake_daemon: the daemon built on the Fakes (-tags fakekernel), once per run.
sim_fake_daemon() {
	local out=$1
	(cd "$repo" && CGO_ENABLED=0 "$go" build -trimpath -tags 'urfave_cli_no_docs fakekernel' -o "$out" ./cmd/ipvsproxy)
}
