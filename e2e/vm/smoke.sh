#!/usr/bin/env bash
# smoke.sh — proves the VM has what the proxier needs from the kernel, in a network namespace of
# its own: the twos IPVS scheduler (on Debian 12's 6.1 kernels, built without it: its absence and
# the fallback wrr) and a dummy interface. Prints go-test-like lines so test-guest.sh counts them.
set -uo pipefail
ns=ipvsproxy-smoke-$$
ip netns add "$ns" || exit 1
# IPVS refuses an IPv4 real server (EINVAL) while the namespace has no local routing table yet,
# which appears with the first address: loopback up creates it.
ip -n "$ns" link set lo up
trap 'ip netns del "$ns"' EXIT
in_ns() { ip netns exec "$ns" "$@"; }

check() {
	local name=$1
	shift
	echo "=== RUN   $name"
	if out=$("$@" 2>&1); then
		echo "$out"
		echo "--- PASS: $name"
	else
		echo "$out"
		echo "--- FAIL: $name"
	fi
}

twos() {
	modprobe ip_vs_twos &&
		in_ns ipvsadm -A -t 192.0.2.10:80 -s twos &&
		in_ns ipvsadm -a -t 192.0.2.10:80 -r 192.0.2.11:8080 -m -w 1 &&
		in_ns ipvsadm -Ln | tee /dev/stderr | grep -q '192.0.2.10:80 twos'
}
dummy() {
	in_ns ip link add kube-ipvs0 type dummy &&
		in_ns ip addr add 192.0.2.10/32 dev kube-ipvs0 &&
		in_ns ip -br addr show kube-ipvs0 | tee /dev/stderr | grep -q '192.0.2.10/32'
}
# Debian 12's 6.1 kernels (IPVSPROXY_VM_KERNEL 6.1, cloud) lack CONFIG_IP_VS_TWOS.
without_twos() {
	! modprobe ip_vs_twos 2>/dev/null &&
		! in_ns ipvsadm -A -t 192.0.2.10:80 -s twos 2>/dev/null &&
		in_ns ipvsadm -A -t 192.0.2.10:80 -s wrr &&
		in_ns ipvsadm -Ln | tee /dev/stderr | grep -q '192.0.2.10:80 wrr'
}
case ${IPVSPROXY_VM_KERNEL:-6.12} in
6.1 | cloud) check SmokeIPVSWithoutTwosFallbackWrr without_twos ;;
*) check SmokeIPVSTwos twos ;;
esac
check SmokeDummyInterface dummy
