#!/usr/bin/env bash
# bench-daemon-guest.sh — the daemon tier's guest half, run as root in the VM by bench-daemon.sh
# (never on a host: it builds network namespaces and starts proxies). The API server already
# holds N Services × 10 endpoints (namespace bench) and the probe Service; each side in
# BENCH_SIDES runs, one after the other, in its own fresh node namespace, and writes one JSON
# line of figures to $BENCH_OUT.
#
# Sides: ipvsproxy (and ipvsproxy-baseline, ipvsproxy-env, below), kube-proxy-nftables,
# kube-proxy-iptables and kube-proxy-ipvs (kube-proxy's own binary in each mode; "kube-proxy"
# is its IPVS mode, as in results before the other modes were sides).
#
# Environment (set by bench-daemon.sh): E2E_BIN (e2ectl, kube-proxy), IPVSPROXY, ECHOSERVER,
# LOADGEN, NFTSERVICE, PROMHIST (benchmarks/harness's tools, built static),
# ADMIN_KUBECONFIG, PROXIER_KUBECONFIG, BENCH_N, BENCH_SIDES,
# BENCH_OUT, BENCH_LOGS, BENCH_RESYNC (1: wait for one periodic sync: ipvsproxy's full re-check,
# the next of kube-proxy's), BENCH_TIMEOUT (seconds a side may take to become ready; BENCH_TIMEOUTS
# "SIDE=SECONDS ..." sets it per side), BENCH_ROUND (makes the added endpoints distinct),
# BENCH_IPVSPROXY_ENV (NAME=VALUE words for the environment of the side ipvsproxy-env, e.g.
# GOMEMLIMIT=64MiB),
# IPVSPROXY_BASELINE (the binary of the side ipvsproxy-baseline: ipvsproxy before a change).
# BENCH_IPVSPROXY_VARIANTS ("NAME=ENV WORDS;NAME=..."): the side ipvsproxy-NAME runs
# ipvsproxy with those words in its environment (every flag has its IPVSPROXY_ variable), e.g.
# "rr=IPVSPROXY_IPVS_SCHEDULER=rr;again=" for the side ipvsproxy-rr and the side ipvsproxy-again,
# the defaults once more: variants, and one side twice, measured in the same boot. The side
# ipvsproxy-again needs no variant: the defaults once more, later in the boot.
# BENCH_WATCHLIST=false turns client-go's streaming watch-list off in both (LIST then WATCH).
# BENCH_CPU=1 takes ipvsproxy's CPU profile, 30 s at a time, from its start until it is ready
# (cpu-SIDE-N-K.pprof in BENCH_LOGS; pprof -proto merges them): where a slow start goes.
# BENCH_POLL_S: how often the start is polled (ready, first connection); default 0.2 s up to
# 1,000 Services, 1 s above. Under emulation each poll's `ip netns exec curl` costs the one vCPU
# the side needs, so the pollers poll seldom at scale and the rest of the harness (clock, sleep,
# the memory log) uses bash builtins, no process per sample.
# BENCH_CHANGES=K (0 to 20, default 0): after the full re-check, K more endpoint changes, one to
# each of bench/svc-1..K, each after a pseudo-random pause of 0 to 30 s (one sync period), so that
# they land anywhere in the period, a full re-check in progress among them; each timed from API
# write to kernel (endpoint_changes_s).
# BENCH_SERIES=S (default 0): S more endpoint changes, one to each of bench/svc-1..S, written by one
# e2ectl process after pauses uniform in [BENCH_SERIES_PAUSE, default "2s 10s"], so that S = 50
# changes sweep about ten 30-s sync periods and land at every point of them; each side's own
# network_programming_duration_seconds over them (promhist: count, p50, p90, p99) is the figure.
# BENCH_BIG=E (default 0): after the rest, one more Service of E endpoints in slices of 100
# (bench/big), written as fast as the API server takes them; the time until the kernel holds
# all E, the peak RSS and CPU meanwhile, and the latency of one endpoint added to bench/svc-0
# when half the slices are written (BENCH_BIG_TIMEOUT, default 1800 s, bounds the wait).
# BENCH_DATAPLANE_ONLY: sides that run the data plane only, none of the periodic sync, the
# series and the Service of many endpoints (default kube-proxy-iptables: the data plane's linear
# reference, not a side of the control plane's comparison).
# BENCH_DATAPLANE=1: the data plane's topology and measurements (bench-dataplane-guest.sh, which
# lists its own variables) once each side is ready, and a no-proxy baseline before the first.
# BENCH_CHURN=R (changes a second; ENDPOINTCHURN is e2e/endpointchurn): each side runs with its own
# default sync periods (none of the period flags), and after the figures above, on the sides whose
# kernel state is IPVS (endpointchurn reads IPVS), endpoint changes go on at R a second over random
# Services until the side ended three full
# re-checks and two minutes passed (BENCH_CHURN_SMOKE=1: 20 s, no re-check needed); the summary is
# the side's "churn" figure, the raw samples churn-SIDE-N.tsv in BENCH_LOGS.
# A side not ready within the timeout still reports its peak RSS so far, with "ok":false.
set -uo pipefail
[[ $(id -u) == 0 && -n ${E2E_HOST_ADDR:-} ]] || { echo "bench-daemon-guest.sh runs inside the VM" >&2; exit 2; }

readonly node=bench node_addr=198.51.100.10 gw_addr=198.51.100.1
readonly pod_addr=203.0.113.10 pod_gw=203.0.113.1 pod_port=8080
readonly sync_period=30s min_sync_period=1s
# The client pod of the data plane (10.245.0.0/24) is in it: its traffic to a cluster IP is a
# pod's, not masqueraded.
readonly cluster_cidr=10.244.0.0/15
timeout=${BENCH_TIMEOUT:-900}
poll=${BENCH_POLL_S:-$( ((BENCH_N > 1000)) && echo 1 || echo 0.2)}
readonly clk_tck=$(getconf CLK_TCK 2>/dev/null || echo 100)
kc() { "$E2E_BIN/e2ectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }
now() { echo "$EPOCHREALTIME"; }
# snooze SECONDS: sleep without a process, a read that times out on a pipe nobody writes to.
exec {snooze_fd}<> <(:)
snooze() { read -r -t "$1" -u "$snooze_fd" || :; }
log() { echo "bench[$BENCH_N $side]: $*" >&2; }

# One modprobe for all (each process started from the 9p root costs time under emulation); one
# by one only when that fails, for the names this kernel lacks.
modules=(ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh dummy ip_set ip_set_hash_ip ip_set_hash_ipport ip_set_hash_ipportip
	ip_set_hash_ipportnet ip_set_hash_net ip_set_bitmap_port xt_set xt_comment xt_mark xt_conntrack xt_addrtype
	iptable_nat iptable_filter iptable_mangle nf_conntrack nf_conntrack_netlink
	nf_tables nft_compat nft_chain_nat nft_ct nft_nat nft_masq nft_numgen nft_fib_ipv4 nft_fib_inet nft_reject_inet
	xt_statistic xt_MASQUERADE xt_nat xt_multiport xt_physdev)
modprobe -a "${modules[@]}" 2>/dev/null || for m in "${modules[@]}"; do modprobe "$m" 2>/dev/null || true; done
# The node namespaces reach the API server (192.0.2.100 through the VM's eth0) by masquerade.
sysctl -qw net.ipv4.ip_forward=1
iptables -t nat -A POSTROUTING -s "$node_addr/32" -o eth0 -j MASQUERADE

eval "$(kc service-info bench-probe/probe | grep '^CLUSTER_IP=')"
probe_ip=$CLUSTER_IP
eval "$(kc service-info bench/svc-0 | grep '^CLUSTER_IP=')"
change_ip=$CLUSTER_IP
[[ -n $probe_ip && -n $change_ip ]] || { echo "no cluster IPs for the probe Service or bench/svc-0" >&2; exit 1; }
changes=${BENCH_CHANGES:-0}
[[ $changes =~ ^[0-9]+$ ]] && ((changes <= 20)) || { echo "BENCH_CHANGES must be 0 to 20" >&2; exit 2; }
series_n=${BENCH_SERIES:-0}
[[ $series_n =~ ^[0-9]+$ ]] && ((series_n == 0 || series_n < BENCH_N)) || { echo "BENCH_SERIES must be 0 to N-1 (one Service each)" >&2; exit 2; }
read -r series_pause_min series_pause_max <<<"${BENCH_SERIES_PAUSE:-2s 10s}"
big=${BENCH_BIG:-0}
[[ $big =~ ^[0-9]+$ ]] || { echo "BENCH_BIG must be a number of endpoints" >&2; exit 2; }
series_ips=()
for ((i = 1; i <= changes; i++)); do
	eval "$(kc service-info "bench/svc-$i" | grep '^CLUSTER_IP=')"
	[[ -n $CLUSTER_IP ]] || { echo "no cluster IP for bench/svc-$i" >&2; exit 1; }
	series_ips[i]=$CLUSTER_IP
done

if [[ ${BENCH_DATAPLANE:-} == 1 ]]; then
	# shellcheck source=bench-dataplane-guest.sh
	. "$(dirname "${BASH_SOURCE[0]}")/bench-dataplane-guest.sh"
	dp_lookup_services || exit 1
	# Room for the held connections and what the rounds add beside them (the kernel's default
	# for a guest of this size is 65,536); the hash table keeps the kernel's size.
	sysctl -qw net.netfilter.nf_conntrack_max=262144
fi

# variant_env NAME: the environment words of BENCH_IPVSPROXY_VARIANTS' variant NAME; fails
# when there is none.
variant_env() {
	local v vs
	IFS=';' read -r -a vs <<<"${BENCH_IPVSPROXY_VARIANTS:-}"
	for v in "${vs[@]}"; do
		v=${v#"${v%%[![:space:]]*}"}
		[[ $v == *=* && ${v%%=*} == "$1" ]] && { echo "${v#*=}"; return 0; }
	done
	return 1
}
for side in ${BENCH_SIDES:-}; do
	case $side in
	ipvsproxy | ipvsproxy-again | ipvsproxy-baseline | ipvsproxy-env | kube-proxy | kube-proxy-nftables | kube-proxy-iptables | kube-proxy-ipvs) ;;
	ipvsproxy-*) variant_env "${side#ipvsproxy-}" >/dev/null || { echo "side $side: no variant ${side#ipvsproxy-} in BENCH_IPVSPROXY_VARIANTS" >&2; exit 2; } ;;
	*) echo "unknown side $side" >&2; exit 2 ;;
	esac
done
side=

# timeout_of SIDE: BENCH_TIMEOUTS' word for the side, else BENCH_TIMEOUT.
timeout_of() {
	local w
	for w in ${BENCH_TIMEOUTS:-}; do
		[[ ${w%%=*} == "$1" ]] && { echo "${w#*=}"; return; }
	done
	echo "${BENCH_TIMEOUT:-900}"
}

# node_up: a fresh node namespace (its own IPVS, iptables, ipsets) with a veth to the VM's root
# and a pod namespace behind it running the probe Service's listener.
node_up() {
	ip netns add "$node"
	ip link add bench-root type veth peer name eth0 netns "$node"
	ip addr add "$gw_addr/24" dev bench-root
	ip link set bench-root up
	ip -n "$node" addr add "$node_addr/24" dev eth0
	ip -n "$node" link set eth0 up
	ip -n "$node" link set lo up
	ip -n "$node" route add default via "$gw_addr"
	ip netns exec "$node" sysctl -qw net.ipv4.ip_forward=1
	ip netns add bench-pod
	ip -n "$node" link add vpod type veth peer name eth0 netns bench-pod
	ip -n "$node" addr add "$pod_gw/24" dev vpod
	ip -n "$node" link set vpod up
	ip -n bench-pod addr add "$pod_addr/24" dev eth0
	ip -n bench-pod link set eth0 up
	ip -n bench-pod link set lo up
	ip -n bench-pod route add default via "$pod_gw"
	ip netns exec bench-pod "$ECHOSERVER" -http ":$pod_port" -udp "$([[ ${BENCH_DATAPLANE:-} == 1 ]] && echo :8081)" >"$BENCH_LOGS/echoserver.log" 2>&1 &
	echo $! >/run/bench-echoserver.pid
}

node_down() {
	[[ -f /run/bench-echoserver.pid ]] && kill "$(</run/bench-echoserver.pid)" 2>/dev/null
	rm -f /run/bench-echoserver.pid
	ip netns del bench-pod 2>/dev/null
	ip link del bench-root 2>/dev/null
	ip netns del "$node" 2>/dev/null
	# The kernel tears a namespace's IPVS table and conntrack down in the background; let it
	# finish before the next side's clock starts.
	sleep 5
}

# metrics prints the side's /metrics; metric NAME [LABEL-FILTER] sums a metric's series.
metrics() { ip netns exec "$node" curl -s --max-time 10 http://127.0.0.1:10249/metrics; }
metric() {
	metrics | awk -v m="$1" -v f="${2:-}" '($1 == m || index($1, m "{") == 1) && index($1, f) { s += $2; found = 1 } END { if (found) printf "%.6f\n", s }'
}

# first_at FILE CMD...: runs CMD every $poll seconds until it succeeds, then writes the time to FILE.
first_at() {
	local file=$1
	shift
	until "$@" >/dev/null 2>&1; do snooze "$poll"; done
	# Written aside and renamed: the waiting loop reads the file as soon as it exists, and an
	# empty read made one side's ready time the negative of its start.
	now >"$file.tmp" && mv "$file.tmp" "$file"
}

is_ready() {
	case $side in
	ipvsproxy*) [[ $(ip netns exec "$node" curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:10256/readyz) == 200 ]] ;;
	# kube-proxy's /healthz answers 200 while it starts; its first sync is the sign.
	kube-proxy*) [[ $(metric kubeproxy_sync_proxy_rules_last_timestamp_seconds 'ip_family="IPv4"') =~ ^[1-9] ]] ;;
	esac
}
probe_connects() { ip netns exec "$node" curl -s --max-time 2 -o /dev/null "http://$probe_ip/"; }

# kernel_check: how the side's kernel state is read: ipvs (ipvsadm), nft (nftservice, over
# netlink: the nft binary lists every chain before printing one), or metric (kube-proxy's
# iptables mode: none here; its own network-programming count says when it wrote a change).
kernel_check() {
	case $side in
	kube-proxy-nftables) echo nft ;;
	kube-proxy-iptables) echo metric ;;
	*) echo ipvs ;;
	esac
}

# nft_chain VIP: the Service's chain in the nftables mode's table, looked up once per VIP.
declare -A nft_chains=()
nft_chain() {
	[[ -n ${nft_chains[$1]:-} ]] || nft_chains[$1]=$(ip netns exec "$node" "$NFTSERVICE" chain -vip "$1" -proto tcp -port 80 2>/dev/null)
	[[ -n ${nft_chains[$1]} ]] && echo "${nft_chains[$1]}"
}

# has_real_server ADDR [VIP]: the kernel sends the Service at VIP:80 (default bench/svc-0's) to
# ADDR:8080.
has_real_server() {
	local vip=${2:-$change_ip} chain
	case $(kernel_check) in
	ipvs) ip netns exec "$node" ipvsadm -Ln -t "$vip:80" 2>/dev/null | grep -q -- "-> $1:8080" ;;
	nft) chain=$(nft_chain "$vip") && ip netns exec "$node" "$NFTSERVICE" endpoints -chain "$chain" 2>/dev/null | grep -qx "$1:8080" ;;
	*) return 2 ;;
	esac
}

# endpoints_in_kernel VIP: how many endpoints the kernel has for VIP:80.
endpoints_in_kernel() {
	local chain
	case $(kernel_check) in
	ipvs) ip netns exec "$node" ipvsadm -Ln -t "$1:80" 2>/dev/null | grep -c -- '-> [0-9]' ;;
	nft) chain=$(nft_chain "$1") && ip netns exec "$node" "$NFTSERVICE" endpoints -chain "$chain" -count 2>/dev/null || echo 0 ;;
	*) echo 0 ;;
	esac
}

# change_series ADDR: the BENCH_CHANGES endpoint changes, ADDR added to bench/svc-1..K; prints their
# API-write-to-kernel seconds as a JSON list ("null" for one that never reached the kernel).
change_series() {
	local i t_w t_k deadline out=
	[[ $(kernel_check) == metric ]] && { echo null; return; }
	RANDOM=$((BENCH_ROUND + 1))
	for ((i = 1; i <= changes; i++)); do
		snooze "$((RANDOM % 30)).$((RANDOM % 10))"
		t_w=$(kc add-bench-endpoint "bench/svc-$i" "$1")
		deadline=$((SECONDS + 300)) t_k=
		until has_real_server "$1" "${series_ips[i]}"; do
			((SECONDS < deadline)) || break
			sleep 0.1
		done
		((SECONDS < deadline)) && t_k=$(now)
		out+=${out:+,}$(awk -v w="$t_w" -v k="$t_k" 'BEGIN { if (k == "") print "null"; else printf "%.2f", k - w }')
	done
	echo "[$out]"
}

start_side() {
	# Under churn each side runs with its own defaults, as an operator runs it.
	local periods=(--ipvs-sync-period "$sync_period" --ipvs-min-sync-period "$min_sync_period")
	[[ -n ${BENCH_CHURN:-} ]] && periods=()
	case $side in
	ipvsproxy*)
		local bin=$IPVSPROXY env= profiling=${BENCH_HEAP:-}${BENCH_CPU:-}
		case $side in
		ipvsproxy | ipvsproxy-again) ;;
		ipvsproxy-baseline) bin=$IPVSPROXY_BASELINE ;;
		ipvsproxy-env) env=${BENCH_IPVSPROXY_ENV:-} ;;
		*) env=$(variant_env "${side#ipvsproxy-}") ;;
		esac
		# Profiling (pprof, and the heap sampling it needs) only when a profile is asked for: the
		# DaemonSet runs without it, and so is measured. A variant can ask for it alone
		# (IPVSPROXY_PROFILING=true): its heap goal is then sampled as with IPVSPROXY_BENCH_HEAP.
		side_profiling=$profiling
		[[ " $env " == *" IPVSPROXY_PROFILING=true "* ]] && side_profiling=1
		# --ipvs-resync-shares is left at its default, 1 (everything re-checked every period, as
		# kube-proxy does), so that the side ipvsproxy-env can set IPVSPROXY_IPVS_RESYNC_SHARES.
		# shellcheck disable=SC2086 # BENCH_IPVSPROXY_ENV is NAME=VALUE words (GOMEMLIMIT, GOGC)
		[[ ${BENCH_WATCHLIST:-} == false ]] && env+=" KUBE_FEATURE_WatchListClient=false"
		ip netns exec "$node" env $env "$bin" run --kubeconfig "$PROXIER_KUBECONFIG" --hostname-override "$node" \
			--lock-file "/run/bench-ipvsproxy.lock" --cluster-cidr "$cluster_cidr" "${periods[@]}" \
			${profiling:+--profiling} --metrics-bind-address 127.0.0.1:10249 >"$BENCH_LOGS/$side-$BENCH_N.log" 2>&1 &
		;;
	kube-proxy*)
		local gates=() mode=ipvs periods
		[[ ${BENCH_WATCHLIST:-} == false ]] && gates=(--feature-gates=WatchListClient=false)
		[[ $side == kube-proxy-* ]] && mode=${side#kube-proxy-}
		# The same periods in every mode: the IPVS mode reads its own flags, the others the
		# iptables ones.
		periods=(--iptables-sync-period "$sync_period" --iptables-min-sync-period "$min_sync_period")
		[[ $mode == ipvs ]] && periods=(--ipvs-sync-period "$sync_period" --ipvs-min-sync-period "$min_sync_period")
		[[ -n ${BENCH_CHURN:-} ]] && periods=()
		# conntrack-max-per-core=0 and the timeouts at 0: leave the host's conntrack sysctls alone
		# (a network namespace may not set nf_conntrack_max); ipvsproxy sets none either.
		ip netns exec "$node" "$E2E_BIN/kube-proxy" --proxy-mode="$mode" --kubeconfig "$ADMIN_KUBECONFIG" \
			--hostname-override "$node" --cluster-cidr "$cluster_cidr" "${periods[@]}" \
			--conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 \
			--metrics-bind-address 127.0.0.1:10249 --healthz-bind-address 127.0.0.1:10256 \
			"${gates[@]}" >"$BENCH_LOGS/$side-$BENCH_N.log" 2>&1 &
		;;
	esac
	pid=$!
}

# cpu_profiles: ipvsproxy's CPU profile in pieces of 30 s until run_side stops it with the pollers (a
# piece cut short is lost); retried each second until the metrics server listens.
cpu_profiles() {
	local k=0
	while kill -0 "$pid" 2>/dev/null; do
		if ip netns exec "$node" curl -sf --max-time 45 -o "$BENCH_LOGS/cpu-$side-$BENCH_N-$k.pprof" \
			"http://127.0.0.1:10249/debug/pprof/profile?seconds=30"; then
			k=$((k + 1))
		else
			snooze 1
		fi
	done
}

# heap_samples: with BENCH_HEAP, ipvsproxy's heap goal every 10 s (seconds since T0, NextGC and
# HeapAlloc in KiB) beside the memory log, and the heap profile taken when the goal was highest:
# the goal is (1 + GOGC/100) × what the last collection found live, so that profile shows what
# the heap held at the run's peak, which the one taken at the end does not.
heap_samples() {
	local t0_us=${t0/./} t goal alloc top=0 tmp=$BENCH_LOGS/heap-$side-$BENCH_N.tmp
	echo "# seconds	NextGC_KiB	HeapAlloc_KiB"
	while kill -0 "$pid" 2>/dev/null; do
		if ip netns exec "$node" curl -sf --max-time 30 -o "$tmp" "http://127.0.0.1:10249/debug/pprof/heap?debug=1"; then
			goal=$(awk '$2 == "NextGC" { print int($4 / 1024) }' "$tmp")
			alloc=$(awk '$2 == "HeapAlloc" { print int($4 / 1024) }' "$tmp")
			t=$(( (${EPOCHREALTIME/./} - t0_us) / 100000 ))
			if [[ -n $goal ]]; then
				printf '%d.%d\t%s\t%s\n' $((t / 10)) $((t % 10)) "$goal" "$alloc"
				if ((goal > top)); then
					top=$goal
					mv "$tmp" "$BENCH_LOGS/heap-peak-$side-$BENCH_N.txt"
				fi
			fi
		fi
		snooze 10
	done
	rm -f "$tmp"
}

# side_profiling: the side that start_side started serves pprof.
side_profiling=
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

# sample_rss PID T0: a line per half second while PID lives: seconds since T0, VmRSS, RssAnon,
# RssFile (KiB). Builtins only: the clock in microseconds, the status file read line by line.
sample_rss() {
	local t0_us=${2/./} k v r a f t
	echo "# seconds	VmRSS_KiB	RssAnon_KiB	RssFile_KiB"
	while [[ -r /proc/$1/status ]]; do
		r='' a='' f=''
		while read -r k v _; do
			case $k in VmRSS:) r=$v ;; RssAnon:) a=$v ;; RssFile:) f=$v ;; esac
		done <"/proc/$1/status" 2>/dev/null
		t=$(( (${EPOCHREALTIME/./} - t0_us) / 100000 ))
		[[ -n $r ]] && printf '%d.%d\t%s\t%s\t%s\n' $((t / 10)) $((t % 10)) "$r" "$a" "$f"
		snooze 0.5
	done
}

# cpu_ticks PID: the process's user + system clock ticks; guest_busy_ticks: the vCPU's ticks
# neither idle nor waiting for I/O since boot. Both builtins, read at the start and once the side
# is ready, to tell how much of the one vCPU the side itself had.
cpu_ticks() { local f; read -r -a f <"/proc/$1/stat" && echo $((f[13] + f[14])); }
guest_busy_ticks() {
	local name user nice system idle iowait irq softirq steal
	read -r name user nice system idle iowait irq softirq steal _ </proc/stat
	echo $((user + nice + system + irq + softirq + steal))
}

# mark STEP TIME: the step as a comment line of the memory log, in seconds since the start.
mark() { awk -v s="$1" -v t="$2" -v t0="$t0" 'BEGIN { printf "# %s %.1f\n", s, t - t0 }' >>"$rss_log"; }

# programmed_services: how many Services the side has in the kernel: IPVS TCP virtual servers,
# service-ips elements, or KUBE-SERVICES' cluster-IP rules.
programmed_services() {
	case $side in
	kube-proxy-nftables) ip netns exec "$node" "$NFTSERVICE" services 2>/dev/null || echo 0 ;;
	kube-proxy-iptables) ip netns exec "$node" iptables -w -t nat -S KUBE-SERVICES 2>/dev/null | grep -c 'cluster IP"' ;;
	*) ip netns exec "$node" ipvsadm -Ln | grep -c '^TCP' ;;
	esac
}

# np_count: how many changes the side's network_programming_duration_seconds has counted.
np_count() {
	local c
	c=$(metric kubeproxy_network_programming_duration_seconds_count)
	echo "${c:-0}"
}

# wait_np_count ABOVE SECONDS: until the side has counted more than ABOVE changes, at most SECONDS.
wait_np_count() {
	local deadline=$((SECONDS + $2)) c
	while c=$(np_count) && ((${c%.*} <= ${1%.*})) && ((SECONDS < deadline)); do
		sleep 1
	done
	((${c%.*} > ${1%.*}))
}

# endpoint_series: BENCH_SERIES changes at pseudo-random points of the sync period (one e2ectl
# process writes them all); prints the side's histogram over them as promhist's JSON, with the
# mean (exact: the histogram's sum over its count).
endpoint_series() {
	local before=$BENCH_LOGS/series-before-$side-$BENCH_N.txt after=$BENCH_LOGS/series-after-$side-$BENCH_N.txt c0 addr=10.244.254.$((200 + BENCH_ROUND))
	metrics >"$before"
	c0=$(np_count)
	kc endpoint-series bench/svc --first 1 --count "$series_n" --addr "$addr" --seed "$((BENCH_ROUND + 1))" \
		--pause-min "$series_pause_min" --pause-max "$series_pause_max" >"$BENCH_LOGS/series-writes-$side-$BENCH_N.txt" ||
		log "the endpoint series stopped early"
	# Each change is observed when the sync that wrote it ends; the last may wait for a whole sync.
	wait_np_count "$((${c0%.*} + series_n - 1))" 600 || log "the side counted fewer than $series_n changes"
	metrics >"$after"
	"$PROMHIST" -metric kubeproxy_network_programming_duration_seconds -label ip_family=IPv4 "$before" "$after" |
		jq -c --arg pause "$series_pause_min-$series_pause_max" --argjson written "$(wc -l <"$BENCH_LOGS/series-writes-$side-$BENCH_N.txt")" \
			'{written: $written, pause: $pause} + . + {mean: (if .count > 0 then ((.sum / .count) * 1000 | round) / 1000 else null end)} | del(.buckets)'
}

# big_service: bench/big's E endpoints written while the side runs; prints the "big" JSON object.
big_service() {
	local env=$BENCH_LOGS/big-$side-$BENCH_N.env before=$BENCH_LOGS/big-before-$side-$BENCH_N.txt after=$BENCH_LOGS/big-after-$side-$BENCH_N.txt
	local touch_addr=10.244.253.$((200 + BENCH_ROUND)) vip="" writer cpu0 cpu1 t_done="" t_touch="" n=0 k=0 c0 hwm np
	local CLUSTER_IP SLICES FIRST_WRITE LAST_WRITE TOUCH_WRITE
	if [[ $(kernel_check) == metric ]]; then
		echo '{"skipped":"no kernel check for this side"}'
		return
	fi
	# The peak from here on: VmHWM reset to the present RSS.
	echo 5 >"/proc/$pid/clear_refs"
	cpu0=$(cpu_ticks "$pid")
	metrics >"$before"
	c0=$(np_count)
	mark big-service "$(now)"
	kc big-service bench/big --endpoints "$big" --per-slice 100 --workers 4 --touch "bench/svc-0=$touch_addr" \
		--touch-after "$((big / 200))" >"$env" 2>"$BENCH_LOGS/big-$side-$BENCH_N.log" &
	writer=$!
	local deadline=$((SECONDS + ${BENCH_BIG_TIMEOUT:-1800}))
	while ((SECONDS < deadline)); do
		[[ -n $vip ]] || vip=$(sed -n 's/^CLUSTER_IP=//p' "$env")
		if [[ -z $t_touch ]] && has_real_server "$touch_addr"; then t_touch=$(now); fi
		# Counting 100,000 endpoints costs the vCPU a second or more: every fifth poll.
		if [[ -n $vip && -z $t_done ]] && ((k % 5 == 0)); then
			n=$(endpoints_in_kernel "$vip")
			((n >= big)) && t_done=$(now)
		fi
		[[ -n $t_done && -n $t_touch ]] && break
		k=$((k + 1))
		snooze 1
	done
	mark big-service-programmed "$(now)"
	kill "$writer" 2>/dev/null
	wait "$writer" 2>/dev/null
	eval "$(grep -E '^(CLUSTER_IP|SLICES|FIRST_WRITE|LAST_WRITE|TOUCH_WRITE)=' "$env")"
	[[ -n $t_touch ]] && wait_np_count "$c0" 120
	metrics >"$after"
	np=$("$PROMHIST" -metric kubeproxy_network_programming_duration_seconds -label ip_family=IPv4 "$before" "$after" |
		jq -c '. + {mean: (if .count > 0 then ((.sum / .count) * 1000 | round) / 1000 else null end)} | del(.buckets)')
	hwm=$(status_kb "$pid" VmHWM) cpu1=$(cpu_ticks "$pid")
	log "bench/big: $n of $big endpoints in the kernel${t_done:+ $(awk -v a="${FIRST_WRITE:-0}" -v b="$t_done" 'BEGIN { printf "%.0f", b - a }') s after the first write}"
	kc delete-big-service bench/big 2>/dev/null || log "bench/big was not deleted"
	jq -nc --argjson e "$big" --argjson slices "${SLICES:-null}" --argjson first "${FIRST_WRITE:-null}" --argjson last "${LAST_WRITE:-null}" \
		--argjson done "${t_done:-null}" --argjson n "$n" --argjson tw "${TOUCH_WRITE:-null}" --argjson tk "${t_touch:-null}" \
		--argjson np "${np:-null}" --argjson hwm "${hwm:-0}" --argjson cpu "$(((cpu1 - cpu0)))" --argjson hz "$clk_tck" \
		--argjson timeout "${BENCH_BIG_TIMEOUT:-1800}" '
		def r: (. * 100 | round) / 100;
		{endpoints: $e, slices: $slices, writes_s: (if $first and $last then ($last - $first) | r else null end),
		 programmed_s: (if $done and $first then ($done - $first) | r else null end),
		 after_last_write_s: (if $done and $last then ($done - $last) | r else null end),
		 in_kernel: $n, not_programmed_after_s: (if $done then null else $timeout end),
		 touch_s: (if $tk and $tw then ($tk - $tw) | r else null end), touch_network_programming: $np,
		 peak_rss_mib: ($hwm / 1024 | r), cpu_s: ($cpu / $hz | r)}'
}

run_side() {
	local t0 t_ready t_connect t_write t_kernel hwm rss anon file np_sum0 np_cnt0 np_sum np_cnt rss_log sampler heap_sampler
	local cold resync="" vs heap="" ok=1 pollers=() timed_out=0 cpu busy0 busy1 start_cpu t_started series="" read_split="" churn=""
	local timeout seen_by kind="" series_json="" big_json="" more="" extras=1 w
	timeout=$(timeout_of "$side")
	for w in ${BENCH_DATAPLANE_ONLY-kube-proxy-iptables}; do
		[[ $w == "$side" && ${BENCH_DATAPLANE:-} == 1 ]] && extras=0
	done
	node_up
	if [[ ${BENCH_DATAPLANE:-} == 1 ]]; then dp_topology_up || ok=0; fi
	rm -f /run/bench-ready /run/bench-connect
	[[ ${BENCH_DATAPLANE:-} == 1 ]] && settle
	busy0=$(guest_busy_ticks)
	t0=$(now)
	start_side
	# The process's memory over its run, every half second (seconds since start, VmRSS, RssAnon,
	# RssFile in KiB), with the run's steps as comment lines: when the peak came, not only how high.
	rss_log=$BENCH_LOGS/rss-$side-$BENCH_N.tsv
	: >"$rss_log"
	sample_rss "$pid" "$t0" >>"$rss_log" &
	sampler=$!
	heap_sampler=
	if [[ $side == ipvsproxy* && -n ${side_profiling:-} ]]; then
		heap_samples >"$BENCH_LOGS/heap-goal-$side-$BENCH_N.tsv" &
		heap_sampler=$!
	fi
	first_at /run/bench-ready is_ready &
	pollers+=($!)
	first_at /run/bench-connect probe_connects &
	pollers+=($!)
	if [[ $side == ipvsproxy* && -n ${BENCH_CPU:-} ]]; then
		cpu_profiles &
		pollers+=($!)
	fi
	local deadline=$((SECONDS + timeout))
	while ((ok)) && [[ ! -f /run/bench-ready || ! -f /run/bench-connect ]]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "exited early; its log:"
			tail -n 30 "$BENCH_LOGS/$side-$BENCH_N.log" >&2
			ok=0
			break
		fi
		if ((SECONDS > deadline)); then
			log "not ready and connected within ${timeout}s"
			ok=0 timed_out=1
			break
		fi
		snooze 1
	done
	kill "${pollers[@]}" 2>/dev/null
	wait "${pollers[@]}" 2>/dev/null
	if ((ok)); then
		# How much of the vCPU the side had while it started: its own CPU time and the guest's
		# busy time from its start until this loop saw it ready and connected (within a second).
		start_cpu=$(cpu_ticks "$pid") busy1=$(guest_busy_ticks) t_started=$(now)
		t_ready=$(<"/run/bench-ready") t_connect=$(<"/run/bench-connect")
		mark ready "$t_ready"
		mark connected "$t_connect"
		vs=$(programmed_services)
		log "ready after $(awk -v a="$t0" -v b="$t_ready" 'BEGIN { printf "%.1f", b - a }')s; $vs Services in the kernel"
		# The cold sync's figures before anything else moves them: ipvsproxy's and kube-proxy's
		# nftables and iptables modes count their first sync as a full one; each IPVS-mode sync is.
		case $side in
		ipvsproxy*) cold=$(metric kubeproxy_sync_full_proxy_rules_duration_seconds_sum) ;;
		kube-proxy | kube-proxy-ipvs) cold=$(metric kubeproxy_sync_proxy_rules_duration_seconds_sum 'ip_family="IPv4"') ;;
		*) cold=$(metric kubeproxy_sync_full_proxy_rules_duration_seconds_sum 'ip_family="IPv4"') ;;
		esac
		# One endpoint change, API write to kernel.
		np_sum0=$(metric kubeproxy_network_programming_duration_seconds_sum) np_cnt0=$(np_count)
		local addr=10.244.255.$((200 + BENCH_ROUND))
		t_write=$(kc add-bench-endpoint bench/svc-0 "$addr")
		mark endpoint-written "$t_write"
		deadline=$((SECONDS + 300))
		seen_by=$(kernel_check)
		if [[ $seen_by == metric ]]; then
			# No kernel check: the side's own count of programmed changes says when.
			wait_np_count "$np_cnt0" 300 || { log "the side never counted the change to bench/svc-0"; ok=0; }
		else
			until has_real_server "$addr"; do
				((SECONDS < deadline)) || { log "the new endpoint $addr never reached the kernel"; ok=0; break; }
				sleep 0.1
			done
		fi
		t_kernel=$(now)
		mark endpoint-in-kernel "$t_kernel"
		# Both record the latency when the sync that wrote it ends, after its kernel writes.
		wait_np_count "$np_cnt0" 300
		np_cnt=$(np_count) np_sum=$(metric kubeproxy_network_programming_duration_seconds_sum)
		if [[ ${BENCH_RESYNC:-1} == 1 && ($side == kube-proxy-nftables || $side == kube-proxy-iptables) ]]; then
			# Their sync period is only the retry interval after a failed sync: they sync on
			# changes, and in full once an hour (pkg/proxy/util.FullSyncPeriod), so there is no
			# periodic sync to wait for.
			kind="none (a full sync once an hour)"
		elif [[ ${BENCH_RESYNC:-1} == 1 ]] && ((extras)); then
			# One periodic sync: ipvsproxy's full re-check (it counts full syncs); every kube-proxy
			# IPVS sync is a full one, so the next sync after the change is its periodic resync.
			local name=kubeproxy_sync_full_proxy_rules_duration_seconds filter=""
			kind="full re-check"
			case $side in
			kube-proxy | kube-proxy-ipvs) name=kubeproxy_sync_proxy_rules_duration_seconds filter='ip_family="IPv4"' kind=full ;;
			esac
			local c0 s0 c s
			c0=$(metric "${name}_count" "$filter") s0=$(metric "${name}_sum" "$filter")
			# How ipvsproxy's re-check read the real servers: virtual servers from /proc/net/ip_vs
			# and one dump each (the table read's bound decides the split).
			local tbl0="" dmp0=""
			if [[ $side == ipvsproxy* ]]; then
				tbl0=$(metric ipvsproxy_full_read_virtual_servers_total 'read="table"') dmp0=$(metric ipvsproxy_full_read_virtual_servers_total 'read="dump"')
			fi
			deadline=$((SECONDS + 120 + timeout))
			c=$c0
			mark waiting-for-full-recheck "$(now)"
			while [[ ${c%.*} == "${c0%.*}" ]] && ((SECONDS < deadline)); do
				sleep 2
				c=$(metric "${name}_count" "$filter")
			done
			s=$(metric "${name}_sum" "$filter")
			mark full-recheck-counted "$(now)"
			[[ ${c%.*} != "${c0%.*}" ]] && resync=$(awk -v a="$s0" -v b="$s" -v n0="$c0" -v n="$c" 'BEGIN { printf "%.3f", (b - a) / (n - n0) }')
			if [[ -n $tbl0 && -n $dmp0 ]]; then
				read_split=$(awk -v t0="$tbl0" -v d0="$dmp0" -v t1="$(metric ipvsproxy_full_read_virtual_servers_total 'read="table"')" \
					-v d1="$(metric ipvsproxy_full_read_virtual_servers_total 'read="dump"')" -v n0="$c0" -v n="$c" \
					'BEGIN { printf ",\"recheck_read_from_table\":%d,\"recheck_read_dumped\":%d,\"rechecks_counted\":%d", t1 - t0, d1 - d0, n - n0 }')
			fi
		fi
		if ((changes > 0)); then
			mark change-series "$(now)"
			series=$(change_series "$addr")
			log "endpoint changes, API write to kernel: $series s"
		fi
		if ((series_n > 0 && extras)); then
			mark endpoint-series "$(now)"
			series_json=$(endpoint_series)
			log "endpoint series: $series_json"
		fi
		if [[ ${BENCH_DATAPLANE:-} == 1 ]]; then
			mark data-plane "$(now)"
			dp_side || log "the data plane was not measured"
			mark data-plane-done "$(now)"
		fi
		if [[ -n ${BENCH_CHURN:-} && $(kernel_check) == ipvs ]] && ((extras)); then
			mark churn "$(now)"
			local bounds=(-min-rechecks 3 -min-duration 120s -max-duration 420s)
			[[ -n ${BENCH_CHURN_SMOKE:-} ]] && bounds=(-min-rechecks 0 -min-duration 20s -max-duration 20s)
			churn=$(ip netns exec "$node" "$ENDPOINTCHURN" -kubeconfig "$ADMIN_KUBECONFIG" -services "$BENCH_N" \
				-rate "$BENCH_CHURN" -seed "$((BENCH_ROUND + 1))" -pid "$pid" "${bounds[@]}" \
				-out "$BENCH_LOGS/churn-$side-$BENCH_N.tsv" 2>>"$BENCH_LOGS/churn-$side-$BENCH_N.log") || {
				log "the churn failed: $(tail -n 3 "$BENCH_LOGS/churn-$side-$BENCH_N.log")"
				churn=
			}
			mark churn-ended "$(now)"
			log "churn: $churn"
		fi
		if [[ $side == ipvsproxy* && -n ${BENCH_HEAP:-} ]]; then
			ip netns exec "$node" curl -s --max-time 60 -o "$BENCH_LOGS/heap-$side-$BENCH_N.pprof" "http://127.0.0.1:10249/debug/pprof/heap?gc=1" && heap=1
			# The runtime's own account (heap in use, released, stacks, GC goal) at the end.
			ip netns exec "$node" curl -s --max-time 60 -o "$BENCH_LOGS/heap-$side-$BENCH_N.txt" "http://127.0.0.1:10249/debug/pprof/heap?debug=1"
		fi
	fi
	# VmHWM counts the binary's text pages it touched as well as its heap: RssFile and RssAnon
	# (at the end, not at the peak) tell them apart.
	hwm=$(status_kb "$pid" VmHWM) rss=$(status_kb "$pid" VmRSS) anon=$(status_kb "$pid" RssAnon) file=$(status_kb "$pid" RssFile)
	# The process's CPU time over the run until here (user + system): what a lower GOGC costs.
	cpu=$(cpu_ticks "$pid") && cpu=$(awk -v t="$cpu" -v hz="$clk_tck" 'BEGIN { printf "%.1f", t / hz }')
	if ((ok && big > 0 && extras)); then
		big_json=$(big_service)
		log "bench/big: $big_json"
	fi
	kill "$sampler" $heap_sampler 2>/dev/null
	wait "$sampler" $heap_sampler 2>/dev/null
	echo "# VmHWM before bench/big $hwm" >>"$rss_log"
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	[[ ${BENCH_DATAPLANE:-} == 1 ]] && dp_topology_down
	node_down
	if ((!ok)); then
		local ready=null connect=null
		[[ -f /run/bench-ready ]] && ready=$(awk -v a="$t0" -v b="$(</run/bench-ready)" 'BEGIN { printf "%.2f", b - a }')
		[[ -f /run/bench-connect ]] && connect=$(awk -v a="$t0" -v b="$(</run/bench-connect)" 'BEGIN { printf "%.2f", b - a }')
		printf '{"side":"%s","services":%d,"ok":false,"timed_out_after_s":%s,"peak_rss_mib":%s,"ready_s":%s,"connect_s":%s,"cpu_s":%s}\n' "$side" "$BENCH_N" \
			"$( ((timed_out)) && echo "$timeout" || echo null)" "$(awk -v k="${hwm:-0}" 'BEGIN { printf "%.1f", k / 1024 }')" "$ready" "$connect" "${cpu:-null}" >>"$BENCH_OUT"
		tail -n1 "$BENCH_OUT" >&2
		return 1
	fi
	more=",\"programmed_services\":$vs,\"endpoint_change_seen_by\":\"$seen_by\""
	[[ $(kernel_check) == ipvs ]] && more+=",\"tcp_virtual_servers\":$vs"
	[[ -n $kind ]] && more+=",\"periodic_sync_kind\":\"$kind\""
	[[ -n $series_json ]] && more+=",\"endpoint_series\":$series_json"
	[[ -n $big_json ]] && more+=",\"big\":$big_json"
	[[ -n $churn ]] && more+=",\"churn\":$churn"
	awk -v side="$side" -v n="$BENCH_N" -v t0="$t0" -v tr="$t_ready" -v tc="$t_connect" -v tw="$t_write" -v tk="$t_kernel" \
		-v hwm="$hwm" -v rss="$rss" -v anon="$anon" -v file="$file" -v cold="$cold" -v resync="$resync" \
		-v cpu="${cpu:-null}" -v hz="$clk_tck" -v ts="$t_started" -v scpu="$start_cpu" -v b0="$busy0" -v b1="$busy1" -v s0="${np_sum0:-0}" -v c0="${np_cnt0:-0}" -v s1="${np_sum:-0}" -v c1="${np_cnt:-0}" -v series="${series:-}" -v readsplit="${read_split:-}" -v more="$more" 'BEGIN {
		np = (c1 > c0) ? sprintf("%.3f", (s1 - s0) / (c1 - c0)) : "null"
		printf "{\"side\":\"%s\",\"services\":%d,\"ok\":true,\"peak_rss_mib\":%.1f,\"rss_end_mib\":%.1f,\"rss_anon_end_mib\":%.1f,\"rss_file_end_mib\":%.1f,", side, n, hwm / 1024, rss / 1024, anon / 1024, file / 1024
		printf "\"ready_s\":%.2f,\"connect_s\":%.2f,\"endpoint_change_s\":%.2f,\"network_programming_s\":%s,", tr - t0, tc - t0, tk - tw, np
		printf "\"cold_sync_s\":%s,\"full_resync_s\":%s,\"cpu_s\":%s,", cold == "" ? "null" : cold, resync == "" ? "null" : resync, cpu
		printf "\"start_wall_s\":%.1f,\"start_cpu_s\":%.1f,\"start_guest_busy_s\":%.1f", ts - t0, scpu / hz, (b1 - b0) / hz
		printf "%s%s%s}\n", series == "" ? "" : ",\"endpoint_changes_s\":" series, readsplit, more
	}' >>"$BENCH_OUT"
	tail -n1 "$BENCH_OUT" >&2
}

rc=0
if [[ ${BENCH_DATAPLANE:-} == 1 ]]; then
	dp_baseline || rc=1
fi
for side in ${BENCH_SIDES:-ipvsproxy kube-proxy-nftables kube-proxy-ipvs}; do
	run_side || rc=1
	BENCH_ROUND=$((BENCH_ROUND + 1))
done
exit "$rc"
