#!/usr/bin/env bash
# run.sh — boot the end-to-end VM and run one command in it as root.
#
#   e2e/vm/run.sh [options] -- COMMAND [ARG...]
#
# The guest sees this machine's / read-only under a writable tmpfs overlay (so every path, the repo
# included, is the same as here), the Debian kernel's modules under /lib/modules/$(uname -r)
# (6.12 unless IPVSPROXY_VM_KERNEL names another, see prepare.sh),
# and no network device unless --host-port asks for one. COMMAND runs in the current directory; its
# output streams to stdout; run.sh exits with its status (125 if the VM never reported one).
# The console is also logged to RESULTS/console.log; when the guest kernel panics, run.sh says so
# by name with the oops' first lines, writes them to RESULTS/guest-panic and keeps the whole
# console under $IPVSPROXY_VM_PANIC_DIR (default /var/tmp/ipvsproxy-vm-panics).
#
# Options:
#   --mem MIB          guest memory (env IPVSPROXY_VM_MEM, default 2560)
#   --timeout SEC      hard limit; qemu is killed after it (env IPVSPROXY_VM_TIMEOUT, default 1200)
#   --results DIR      writable share, mounted in the guest at the same path (default: a temp dir
#                      removed afterwards); the guest's exit status lands in DIR/exit-status
#   --host-port PORT[:HOST_PORT]  (guest port, host port if different) add ONE user-mode NIC (restrict=on, net 192.0.2.0/24, guest 192.0.2.15)
#                      and forward guest connections to 192.0.2.100:PORT to this machine's
#                      127.0.0.1:PORT; repeatable, still one NIC. The guest sees E2E_HOST_ADDR.
#   --tap IFNAME=ADDR/PREFIX  instead: ONE NIC on the existing tap device IFNAME (made by the caller,
#                      e.g. in a network namespace qemu runs in), guest eth0 ADDR, MAC from ADDR
#   -e NAME=VALUE      set an environment variable for COMMAND; repeatable
#   --kernel-log       show the kernel's boot messages
# Environment: IPVSPROXY_VM_CPU, the qemu CPU model (default Westmere-v1; e.g. max to compare);
# IPVSPROXY_VM_KERNEL, the kernel flavour (6.12, 6.1 or cloud; prepare.sh). The guest command sees
# it as IPVSPROXY_VM_KERNEL too.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}
mem=${IPVSPROXY_VM_MEM:-2560}
timeout=${IPVSPROXY_VM_TIMEOUT:-1200}
# A named model, not max: see docs/testing.md, "The VM's CPU model".
cpu=${IPVSPROXY_VM_CPU:-Westmere-v1}
panic_dir=${IPVSPROXY_VM_PANIC_DIR:-/var/tmp/ipvsproxy-vm-panics}
results='' kernel_log='' tap=''
host_ports=() envs=()

# Addresses of the restricted user network: all from 192.0.2.0/24 (RFC 5737), so nothing the
# guest sends there can mean a real host.
readonly user_net=192.0.2.0/24 guest_addr=192.0.2.15 host_fwd_addr=192.0.2.100

die() { printf 'run: %s\n' "$*" >&2; exit 125; }

while (($#)); do
	case $1 in
	--mem) mem=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--results) results=$2; shift 2 ;;
	--host-port) host_ports+=("$2"); shift 2 ;;
	--tap) tap=$2; shift 2 ;;
	-e) envs+=("$2"); shift 2 ;;
	--kernel-log) kernel_log=1; shift ;;
	--) shift; break ;;
	*) die "unknown option $1 (usage: run.sh [options] -- COMMAND...)" ;;
	esac
done
(($#)) || die "no command (usage: run.sh [options] -- COMMAND...)"

# prepare.sh is cheap when everything is cached (about 2 s) and rebuilds the initramfs when its
# script changed; callers that just ran it set IPVSPROXY_VM_PREPARED=1.
if [[ -z ${IPVSPROXY_VM_PREPARED:-} ]]; then
	"$here/prepare.sh" >/dev/null || die "prepare.sh failed"
fi
flavour=${IPVSPROXY_VM_KERNEL:-6.12}
env_file=$cache/current.env
[[ $flavour == 6.12 ]] || env_file=$cache/current-$flavour.env
[[ -f $env_file ]] || die "no $env_file: run e2e/vm/prepare.sh with IPVSPROXY_VM_KERNEL=$flavour"
ROOTFS=9p
# shellcheck source=/dev/null
. "$env_file"

# What to undo at exit, in order.
cleanups=()
trap 'for c in "${cleanups[@]}"; do eval "$c"; done' EXIT
if [[ -n $results ]]; then
	mkdir -p "$results"
	results=$(cd "$results" && pwd)
else
	results=$(mktemp -d "${TMPDIR:-/tmp}/ipvsproxy-vm.XXXXXX")
	cleanups+=('rm -rf "$results"')
fi
# Paths go on the kernel command line, which splits on spaces.
for p in "$results" "$here" "$MODULES"; do
	[[ $p != *[[:space:]]* ]] || die "path with white space not supported: $p"
done
rm -f "$results/exit-status" "$results/console.log" "$results/guest-panic"

# command.sh is what the guest runs: same directory, chosen environment, exact argv.
{
	echo "cd $(printf '%q' "$PWD") || exit 125"
	((${#host_ports[@]})) && echo "export E2E_HOST_ADDR=$host_fwd_addr"
	for e in "${envs[@]}"; do
		[[ $e == *=* ]] || die "-e wants NAME=VALUE, got $e"
		echo "export ${e%%=*}=$(printf '%q' "${e#*=}")"
	done
	echo "export IPVSPROXY_VM_KERNEL=$(printf '%q' "$flavour")"
	printf 'exec'
	printf ' %q' "$@"
	echo
} >"$results/command.sh"

# no_timer_check: under TCG on a loaded host the kernel's IO-APIC timer check fails and it
# panics ("IO-APIC + timer doesn't work") before init.
append="console=ttyS0 panic=-1 mitigations=off no_timer_check e2e_stage2=$here/guest-init.sh e2e_results=$results e2e_modules=$MODULES"
if [[ -n $kernel_log ]]; then append+=" loglevel=6"; else append+=" quiet loglevel=3"; fi

net_args=()
if ((${#host_ports[@]})); then
	netdev="user,id=net0,restrict=on,net=$user_net,dhcpstart=$guest_addr"
	for port in "${host_ports[@]}"; do
		[[ $port =~ ^([0-9]+)(:([0-9]+))?$ ]] || die "--host-port wants PORT or GUEST_PORT:HOST_PORT, got $port"
		guest_port=${BASH_REMATCH[1]} host_port=${BASH_REMATCH[3]:-${BASH_REMATCH[1]}}
		# cmd: spawns one socat per guest connection, so connections run concurrently.
		netdev+=",guestfwd=tcp:$host_fwd_addr:$guest_port-cmd:socat - TCP:127.0.0.1:$host_port"
	done
	# shellcheck disable=SC2054 # commas belong to qemu's option syntax
	net_args=(-netdev "$netdev" -device virtio-net-pci,netdev=net0)
	append+=" e2e_net=$guest_addr/24"
fi
if [[ -n $tap ]]; then
	((${#host_ports[@]} == 0)) || die "--tap and --host-port both want the guest's one NIC"
	[[ $tap =~ ^([a-zA-Z0-9_.-]+)=(([0-9]+)\.([0-9]+)\.([0-9]+)\.([0-9]+)/[0-9]+)$ ]] || die "--tap wants IFNAME=ADDR/PREFIX, got $tap"
	# Guests on one bridge need distinct MACs; qemu's default is the same for all.
	mac=$(printf '52:54:%02x:%02x:%02x:%02x' "${BASH_REMATCH[@]:3:4}")
	# shellcheck disable=SC2054 # commas belong to qemu's option syntax
	net_args=(-netdev "tap,id=net0,ifname=${BASH_REMATCH[1]},script=no,downscript=no" -device "virtio-net-pci,netdev=net0,mac=$mac")
	append+=" e2e_net=${BASH_REMATCH[2]}"
fi

fs_args=()
if [[ $ROOTFS == virtiofs ]]; then
	# A kernel built without 9p: qemu's virtiofsd serves / (read-only in the guest, cached: it
	# does not change while the VM runs) and the results share (uncached), over vhost-user, which
	# needs the guest's memory shared with it.
	vfs_dir=$(mktemp -d "${TMPDIR:-/tmp}/ipvsproxy-vfs.XXXXXX")
	vfs_pids=()
	stop_virtiofsd() {
		local p
		for p in "${vfs_pids[@]}"; do kill "$p" 2>/dev/null || true; done
		rm -rf "$vfs_dir"
	}
	cleanups+=(stop_virtiofsd)
	for share in hostroot=/:always results=$results:none; do
		tag=${share%%=*} rest=${share#*=}
		/usr/lib/qemu/virtiofsd --socket-path="$vfs_dir/$tag.sock" -o source="${rest%:*}" \
			-o cache="${rest##*:}" -o announce_submounts -o sandbox=chroot >"$vfs_dir/$tag.log" 2>&1 &
		vfs_pids+=($!)
	done
	for tag in hostroot results; do
		for _ in $(seq 50); do [[ -S $vfs_dir/$tag.sock ]] && break; sleep 0.1; done
		[[ -S $vfs_dir/$tag.sock ]] || die "virtiofsd for $tag did not start: $(cat "$vfs_dir/$tag.log")"
	done
	# shellcheck disable=SC2054 # commas belong to qemu's option syntax
	fs_args=(
		-object "memory-backend-memfd,id=mem,size=${mem}M,share=on" -numa node,memdev=mem
		-chardev "socket,id=vfs-hostroot,path=$vfs_dir/hostroot.sock" -device vhost-user-fs-pci,chardev=vfs-hostroot,tag=hostroot
		-chardev "socket,id=vfs-results,path=$vfs_dir/results.sock" -device vhost-user-fs-pci,chardev=vfs-results,tag=results
	)
	append+=" e2e_fs=virtiofs"
else
	# shellcheck disable=SC2054 # commas belong to qemu's option syntax
	fs_args=(
		# multidevs=remap: / spans several host file systems; keep their inode numbers apart.
		-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap
		-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
		-fsdev local,id=results,path="$results",security_model=none,multidevs=remap
		-device virtio-9p-pci,fsdev=results,mount_tag=results
	)
fi

# shellcheck disable=SC2054 # commas belong to qemu's option syntax
qemu=(
	qemu-system-x86_64
	-accel tcg -cpu "$cpu" -smp 1 -m "$mem"
	-nodefaults -no-user-config -no-reboot -display none -monitor none
	-chardev "stdio,id=console,signal=off,logfile=$results/console.log" -serial chardev:console
	-kernel "$KERNEL" -initrd "$INITRAMFS" -append "$append"
	"${fs_args[@]}"
	"${net_args[@]}"
)
start=$SECONDS
set +e
timeout -k 10 "$timeout" "${qemu[@]}" </dev/null
qemu_rc=$?
set -e
elapsed=$((SECONDS - start))

# oops_excerpt CONSOLE prints the first kernel report of the console (a panic, an oops, a BUG) in
# a few lines: its header, where it happened, the innermost calls and the panic line. Only lines
# with the kernel's timestamp count, so test output on the same console cannot match.
oops_excerpt() {
	tr -d '\r' <"$1" | awk '
		match($0, /\[ *[0-9]+\.[0-9]+\] /) { line = substr($0, RSTART) } !RSTART { next }
		!found && line ~ /\] (Kernel panic - not syncing|Oops: |BUG: |kernel BUG at|traps: PANIC|general protection fault|Unable to handle|watchdog: BUG)/ { found = 1 }
		!found || n >= 24 { next }
		line ~ /\] (Kernel panic - not syncing|Oops: |BUG: |kernel BUG at|traps: PANIC|general protection fault|Unable to handle|watchdog: BUG|CPU: |RIP: |Call Trace:)/ {
			if (!seen[line]++) { print line; n++ } next }
		line ~ /\]  [a-z_0-9.]+\+0x/ && calls < 8 { calls++; n++; print line }
	'
}

if [[ -f $results/exit-status ]]; then
	rc=$(<"$results/exit-status")
	echo "run: command exited $rc; VM ran ${elapsed}s" >&2
	# A kernel report the command survived (an oops that killed one process) still shows.
	oops=$(oops_excerpt "$results/console.log")
	if [[ -n $oops ]]; then
		echo "run: warning: the guest kernel reported an oops during the run:" >&2
		sed 's/^/run:   /' <<<"$oops" >&2
	fi
elif oops=$(oops_excerpt "$results/console.log") && [[ -n $oops ]]; then
	rc=125
	printf '%s\n' "$oops" >"$results/guest-panic"
	mkdir -p "$panic_dir"
	kept=$panic_dir/console-$(date +%Y%m%dT%H%M%S)-cpu-${cpu//[^A-Za-z0-9_.-]/_}-$$.log
	cp "$results/console.log" "$kept"
	what='guest kernel panic'
	[[ $oops == *'Kernel panic'* ]] || what='guest kernel oops (the VM then stopped or hung)'
	echo "run: $what after ${elapsed}s (cpu $cpu, qemu exit $qemu_rc); no exit status. First lines:" >&2
	sed 's/^/run:   /' "$results/guest-panic" >&2
	echo "run: the whole console is kept in $kept" >&2
else
	rc=125
	if ((qemu_rc == 124 || qemu_rc == 137)); then
		echo "run: VM killed after the ${timeout}s timeout; no exit status" >&2
	else
		echo "run: VM stopped (qemu exit $qemu_rc) without an exit status after ${elapsed}s" >&2
	fi
fi
exit "$rc"
