#!/bin/sh
# Checks a root file system tarball made by build-rootfs.sh: the ipvsproxy
# binary is static and runs, and every tool it calls runs inside the tree with
# only the tree's own libraries.
#
# usage: check-rootfs.sh [--arch ARCH] ROOTFS.tar [VERSION-ARGS...]
#   --arch: the tree's Debian architecture (build-rootfs.sh --arch; default
#   this machine's). Another architecture's programs run under qemu's user
#   mode emulator (Debian's qemu-user-static), copied into the tree, so every
#   check below runs for it too.
#   VERSION-ARGS: what to run the binary with to prove it starts (default:
#   "version"); the binary must exit 0.
# env: MODULES_DIR  a lib/modules directory holding one kernel's modules
#                   (after depmod); if set, modprobe in the tree must resolve
#                   the modules ipvsproxy loads from it, mounted read-only at
#                   /lib/modules as the DaemonSet mounts the host's.
# Runs commands with chroot, so it needs root, or unprivileged user
# namespaces (then it runs under `unshare -r`).
set -eu

arch=$(dpkg --print-architecture)
if [ "${1:-}" = --arch ]; then
	arch=$2
	shift 2
fi
[ $# -ge 1 ] || { echo "usage: check-rootfs.sh [--arch ARCH] ROOTFS.tar [VERSION-ARGS...]" >&2; exit 2; }
tarball=$1
shift
[ $# -gt 0 ] || set -- version
BIN=/usr/local/bin/ipvsproxy

if [ "$(id -u)" -eq 0 ]; then
	chroot_cmd="chroot" netns_cmd="unshare -n"
elif unshare -rn true 2>/dev/null; then
	chroot_cmd="unshare -r chroot" netns_cmd="unshare -rn"
else
	echo "check-rootfs: SKIP: needs root or user namespaces for chroot" >&2
	exit 77
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"
tar -C "$root" -xf "$tarball"

# The ELF machine a binary of the architecture names (e_machine, at byte 18).
case $arch in
amd64) machine=62 qemu= ldso=/lib64/ld-linux-x86-64.so.2 multiarch=x86_64-linux-gnu ;;
arm64) machine=183 qemu=qemu-aarch64-static ldso=/lib/ld-linux-aarch64.so.1 multiarch=aarch64-linux-gnu ;;
*) echo "check-rootfs: architecture $arch: amd64 or arm64" >&2; exit 2 ;;
esac
# emu is what runs a program of the tree: nothing for this machine's
# architecture, else the static emulator copied into the tree at /.qemu.
emu=
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
	path=$(command -v "${qemu:-none}") || { echo "check-rootfs: $qemu not found: apt-get install qemu-user-static" >&2; exit 1; }
	cp "$path" "$root/.qemu"
	emu=/.qemu
fi

failed=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failed=1; }

# The binary is an ELF executable of the architecture...
if [ "$(head -c 4 "$root$BIN" | od -An -c | tr -d ' ')" = '177ELF' ] &&
	[ "$(od -An -j 18 -N 2 -t u2 "$root$BIN" | tr -d ' ')" = "$machine" ]; then
	pass "$BIN is an ELF file for $arch"
else
	fail "$BIN is not an ELF file for $arch"
fi
# ...and static: it runs in an otherwise empty root, where a dynamic binary
# fails for want of its interpreter (/lib64/ld-linux-x86-64.so.2).
lone=$work/lone
mkdir -p "$lone"
cp "$root$BIN" "$lone/ipvsproxy"
[ -z "$emu" ] || cp "$root$emu" "$lone$emu"
if out=$($chroot_cmd "$lone" $emu /ipvsproxy "$@" 2>&1); then
	pass "$BIN $* runs alone in an empty root (static): $out"
else
	fail "$BIN $* does not run alone in an empty root (dynamic, or it failed): $out"
fi
# `kubectl exec ds/ipvsproxy -- ipvsproxy inspect` works in an image without
# a shell or any tool: inspect reads the kernel over netlink only. Run it
# alone in the empty root, in a fresh network namespace (nothing of the
# host's is read): it must print a JSON report, and --check must exit 2 (no
# daemon there) with a sentence saying so.
if out=$($netns_cmd chroot "$lone" $emu /ipvsproxy inspect -o json 2>&1) &&
	echo "$out" | grep -q '"apiVersion": "ipvsproxy.io/inspect/v1"'; then
	pass "ipvsproxy inspect -o json runs alone in an empty root (no shell, no tools)"
else
	fail "ipvsproxy inspect -o json in an empty root: $out"
fi
rc=0
out=$($netns_cmd chroot "$lone" $emu /ipvsproxy inspect --check 2>&1) || rc=$?
case $rc:$out in
2:*"daemon is not reachable"*) pass "ipvsproxy inspect --check without a daemon exits 2 and says why" ;;
*) fail "ipvsproxy inspect --check without a daemon: exit $rc: $out" ;;
esac
if out=$($chroot_cmd "$root" $emu "$BIN" "$@" 2>&1); then
	pass "$BIN $* runs in the root file system"
else
	fail "$BIN $* in the root file system: $out"
fi

# The tools ipvsproxy runs: the default back end (nft, as Debian's
# alternatives choose), both explicit back ends, and kmod's modprobe.
for tool in \
	/usr/sbin/iptables-restore /usr/sbin/iptables-save /usr/sbin/iptables \
	/usr/sbin/ip6tables-restore /usr/sbin/ip6tables-save /usr/sbin/ip6tables \
	/usr/sbin/iptables-nft-restore /usr/sbin/iptables-nft-save \
	/usr/sbin/iptables-legacy-restore /usr/sbin/iptables-legacy-save \
	/usr/sbin/iptables-nft /usr/sbin/iptables-legacy \
	/usr/sbin/ip6tables-nft /usr/sbin/ip6tables-nft-save /usr/sbin/ip6tables-nft-restore \
	/usr/sbin/ip6tables-legacy /usr/sbin/ip6tables-legacy-save /usr/sbin/ip6tables-legacy-restore \
	/sbin/modprobe; do
	case $emu:$tool in
	/*:*/ip6tables|/*:*/iptables|/*:*/ip6tables-nft|/*:*/iptables-nft)
		# Their --version opens an nf_tables netlink socket, which qemu's user mode does not
		# emulate ("Protocol not supported"): that their libraries load in the tree is checked.
		if out=$($chroot_cmd "$root" $emu $ldso --list "$tool" 2>&1) && ! echo "$out" | grep -q 'not found'; then
			pass "$tool loads its libraries from the tree ($(echo "$out" | wc -l) objects; --version needs netfilter, not emulated)"
		else
			fail "$tool's libraries: $out"
		fi
		continue ;;
	esac
	if out=$($chroot_cmd "$root" $emu "$tool" --version 2>&1); then
		pass "$tool --version: $(echo "$out" | head -n 1)"
	else
		fail "$tool --version: $out"
	fi
done
# Host modules are usually compressed (Debian: xz; others: zstd); a kmod
# built without the matching support cannot load them.
features=$($chroot_cmd "$root" $emu /sbin/modprobe --version 2>&1 | tail -n 1)
case $features in
*+XZ*+ZSTD*|*+ZSTD*+XZ*) pass "modprobe reads xz and zstd modules ($features)" ;;
*) fail "modprobe lacks xz or zstd support: $features" ;;
esac
if [ -n "${MODULES_DIR:-}" ]; then
	kver=$(ls "$MODULES_DIR" | head -n 1)
	for module in ip_vs ip_vs_twos ip_vs_wrr ip_vs_rr nf_conntrack dummy; do
		if out=$($netns_cmd -m sh -c 'mount --bind -o ro "$1" "$2/lib/modules" &&
			chroot "$2" $5 /sbin/modprobe --show-depends -S "$3" "$4"' sh "$MODULES_DIR" "$root" "$kver" "$module" "$emu" 2>&1); then
			pass "modprobe resolves $module of $kver: $(echo "$out" | wc -l) modules"
		else
			fail "modprobe cannot resolve $module of $kver: $out"
		fi
	done
fi
# The default iptables is the nft back end, matching Debian's own default.
case $($chroot_cmd "$root" $emu /usr/sbin/iptables-restore --version 2>&1) in
*nf_tables*) pass "iptables-restore defaults to nf_tables" ;;
*) fail "iptables-restore does not default to nf_tables" ;;
esac

# The extensions ipvsproxy's rules use load from the tree (xtables modules
# are shared objects a missing package would leave out): apply such a rule
# set with both back ends, in a fresh network namespace so that no host rule
# is touched. The set match is included when the host has the ipset tool to
# create the set it names.
rules=$work/rules
{
	echo '*nat'
	echo ':KUBE-TEST-MARK - [0:0]'
	echo ':KUBE-TEST-POST - [0:0]'
	echo '-A KUBE-TEST-MARK -j MARK --or-mark 0x4000'
	echo '-A KUBE-TEST-POST -m mark --mark 0x4000/0x4000 -m comment --comment "check-rootfs" -j MASQUERADE --random-fully'
	echo '-A KUBE-TEST-POST -m addrtype --src-type LOCAL -m conntrack --ctstate DNAT -j RETURN'
	if command -v ipset >/dev/null; then
		echo '-A KUBE-TEST-POST -m set --match-set KUBE-TEST-SET dst,dst -j KUBE-TEST-MARK'
	fi
	echo 'COMMIT'
} >"$rules"
# Under qemu's user mode neither back end reaches the kernel (no netfilter netlink, no
# iptables socket options): there the extensions the rules load must be in the tree and
# load their libraries.
[ -z "$emu" ] || for ext in MARK mark comment MASQUERADE addrtype conntrack set; do
	so=/usr/lib/$multiarch/xtables/libxt_$ext.so
	if out=$($chroot_cmd "$root" $emu $ldso --list "$so" 2>&1) && ! echo "$out" | grep -q 'not found'; then
		pass "the xtables extension $ext is in the tree and loads its libraries"
	else
		fail "the xtables extension $ext ($so): $out"
	fi
done
[ -n "$emu" ] || for backend in nft legacy; do
	if out=$($netns_cmd sh -c '
		if command -v ipset >/dev/null; then ipset create KUBE-TEST-SET hash:ip,port || exit 1; fi
		chroot "$1" $3 /usr/sbin/iptables-'"$backend"'-restore --noflush <"$2" &&
		chroot "$1" $3 /usr/sbin/iptables-'"$backend"'-save -t nat' sh "$root" "$rules" "$emu" 2>&1) &&
		echo "$out" | grep -q -- '-j MASQUERADE --random-fully'; then
		pass "iptables-$backend-restore applies MARK, MASQUERADE, mark, comment, addrtype, conntrack$(command -v ipset >/dev/null && echo ', set') rules"
	else
		fail "iptables-$backend-restore of the test rules: $out"
	fi
done

# Nothing a container must not carry: no shell would be fine to have, but a
# setuid file would be a privilege path nobody asked for.
setuid=$(find "$root" -perm -4000 -type f ! -path "$root/.qemu" 2>/dev/null | sed "s|^$root||")
if [ -z "$setuid" ]; then
	pass "no setuid files"
else
	fail "setuid files: $setuid"
fi

[ $failed -eq 0 ] && echo "check-rootfs: all checks passed" || echo "check-rootfs: FAILED" >&2
exit $failed
