#!/usr/bin/env bash
# conntrack-bench-vm.sh — the conntrack clean-up with 1 M flows, beside kube-proxy v1.37.2's
# CleanStaleEntries (benchmarks/harness/cmd/conntrack-bench), on the end-to-end VM's kernel: a
# namespace on this host holds at most the host's nf_conntrack_max (262,144), which is not ours to
# raise; the VM's is. Each side runs in a fresh network namespace of the guest; nothing leaves it.
#
#   e2e/vm/conntrack-bench-vm.sh [FLOWS [PAIRS [REPEATS [SIDE]]]]   (default 1000000 1 1 both: under
#                                  emulation writing a million flows takes 7 minutes per process)
#
# Prints the table and leaves benchmarks/results/<date>-<host>-kernel-conntrack-<FLOWS>.{json,md};
# SIDE ours or kube-proxy runs that side alone, once, and leaves its JSON in ...-<FLOWS>-<SIDE>.json.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}
export PATH=/usr/local/go/bin:$PATH
flows=${1:-1000000} pairs=${2:-1} repeats=${3:-1} side=${4:-both}

"$here/prepare.sh"
mkdir -p "$cache/runs"
work=$(mktemp -d "$cache/runs/conntrack-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/results"
(cd "$repo/benchmarks/harness" && go build -o "$work/conntrack-bench" ./cmd/conntrack-bench)

cat >"$work/guest.sh" <<GUEST
#!/usr/bin/env bash
set -euo pipefail
modprobe nf_conntrack
modprobe nf_conntrack_netlink
# Room for the flows, and kube-proxy's bucket count for that size (max / 4).
sysctl -qw net.netfilter.nf_conntrack_max=$((flows + flows / 10))
echo $(((flows + flows / 10) / 4)) >/sys/module/nf_conntrack/parameters/hashsize
if [[ $side == both ]]; then
	"$work/conntrack-bench" -side both -flows $flows -pairs $pairs -repeats $repeats -json "$work/results/conntrack.json" | tee "$work/results/conntrack.md"
else
	IPVSPROXY_BENCH_NETNS=private unshare --net -- "$work/conntrack-bench" -side $side -flows $flows -repeats $repeats >"$work/results/conntrack.json"
fi
GUEST
chmod +x "$work/guest.sh"
IPVSPROXY_VM_MEM=${IPVSPROXY_VM_MEM:-4096} IPVSPROXY_VM_TIMEOUT=${IPVSPROXY_VM_TIMEOUT:-3600} IPVSPROXY_VM_PREPARED=1 "$here/run.sh" --results "$work/results" -- "$work/guest.sh"
out=$repo/benchmarks/results/$(date -u +%F)-$(hostname)-kernel-conntrack-$flows
if [[ $side != both ]]; then
	cp "$work/results/conntrack.json" "$out-$side.json"
	echo "wrote $out-$side.json"
	exit
fi
cp "$work/results/conntrack.json" "$out.json"
grep '^|' "$work/results/conntrack.md" >"$out.md"
echo "wrote $out.json and $out.md"
