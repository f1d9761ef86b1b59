#!/bin/bash
# kernel-limits-guest.sh — in the VM (kernel-limits.sh boots it), before anything loads IPVS or
# the dummy driver: `ipvsproxy run` on a kernel without ip_vs, without the dummy driver and without
# the twos scheduler. Each module is made unloadable as a distribution that lacks it would leave
# it: an `install MODULE /bin/false` line in /etc/modprobe.d (the guest's overlay; gone at power-
# off), which the kernel's own module loader obeys. Checked: without ip_vs and without dummy the
# daemon exits 1 at start-up with a message naming the module; without twos it falls back to wrr,
# says so in its log and in ipvsproxy_scheduler_fallback. The daemon runs in a namespace of its
# own with --ip-families IPv4 and an API server address nobody answers (192.0.2.1, RFC 5737): all
# of this happens before it needs the API. Prints PASS/FAIL lines and `N passed, N failed`.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$repo/bin/ipvsproxy
passed=0 failed=0
ns=limits
conf=/etc/modprobe.d/ipvsproxy-kernel-limits.conf
work=$(mktemp -d)

check() { # NAME OK DETAIL
	if [[ $2 == 1 ]]; then
		echo "PASS $1"
		passed=$((passed + 1))
	else
		echo "FAIL $1: $3"
		failed=$((failed + 1))
	fi
}

# unloadable MODULE...: only these modules refuse to load.
unloadable() {
	: >"$conf"
	for m in "$@"; do echo "install $m /bin/false" >>"$conf"; done
}

loaded() { [[ -d /sys/module/$1 ]]; }

cat >"$work/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://192.0.2.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: none}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
KC
ip netns add "$ns" && ip -n "$ns" link set lo up
daemon=(ip netns exec "$ns" "$bin" run --kubeconfig "$work/kubeconfig" --hostname-override limits
	--ip-families IPv4 --lock-file /run/ipvsproxy-limits.lock --metrics-bind-address 127.0.0.1:10249)
echo "kernel-limits: kernel $(uname -r) (${IPVSPROXY_VM_KERNEL:-6.12})"

# 1. No IPVS: a start-up error that names it, before anything is written.
for m in ip_vs dummy; do
	loaded "$m" && { check "module $m not loaded before the checks" 0 "it is: the checks below would prove nothing"; }
done
unloadable ip_vs
out=$(timeout 60 "${daemon[@]}" 2>&1); rc=$?
check "no ip_vs: run exits 1 naming the module" "$([[ $rc == 1 && $out == *'the kernel has no IPVS (module ip_vs, CONFIG_IP_VS)'* ]] && echo 1)" \
	"exit $rc: $(tail -n 2 <<<"$out")"
check "no ip_vs: nothing made (no kube-ipvs0 in the namespace)" "$(ip -n "$ns" link show kube-ipvs0 >/dev/null 2>&1 || echo 1)" "kube-ipvs0 exists"
echo "  $(grep -o 'the kernel has no IPVS.*' <<<"$out" | head -c 300)"

# 2. No dummy driver: IPVS loads, the start-up stops before the first sync with a message naming it.
unloadable dummy
out=$(timeout 60 "${daemon[@]}" 2>&1); rc=$?
check "no dummy: run exits 1 naming the driver" "$([[ $rc == 1 && $out == *'the kernel has no dummy network driver (module dummy, CONFIG_DUMMY)'* ]] && echo 1)" \
	"exit $rc: $(tail -n 2 <<<"$out")"
echo "  $(grep -o 'the kernel has no dummy.*' <<<"$out" | head -c 300)"
check "no dummy: ip_vs loaded meanwhile (the check was the dummy's, not IPVS's)" "$(loaded ip_vs && echo 1)" "ip_vs is not loaded"

# 3. No twos: the default scheduler falls back to wrr, said in the log and the metric; the daemon
#    keeps running (waiting for the API server, which nobody answers).
unloadable ip_vs_twos
loaded ip_vs_twos && check "module ip_vs_twos not loaded before the check" 0 "it is"
"${daemon[@]}" >"$work/twos.log" 2>&1 &
pid=$!
metrics=
for _ in $(seq 60); do
	metrics=$(ip netns exec "$ns" curl -s --max-time 2 http://127.0.0.1:10249/metrics | grep '^ipvsproxy_scheduler_fallback')
	[[ -n $metrics ]] && break
	sleep 1
done
alive=0
kill -0 "$pid" 2>/dev/null && alive=1
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
line=$(grep -o 'The kernel has no twos IPVS scheduler.*' "$work/twos.log" | head -n 1)
check "no twos: the daemon falls back to wrr and says so" "$([[ $line == *'fallback="wrr"'* ]] && echo 1)" "log: $(tail -n 3 "$work/twos.log")"
check "no twos: ipvsproxy_scheduler_fallback{scheduler=\"twos\"} 1" "$([[ $metrics == *'scheduler="twos"} 1'* ]] && echo 1)" "metrics: $metrics"
check "no twos: the daemon keeps running" "$alive" "it exited: $(tail -n 3 "$work/twos.log")"
echo "  $line"

rm -f "$conf"
ip netns del "$ns"
rm -rf "$work"
echo "$passed passed, $failed failed"
((failed == 0))
