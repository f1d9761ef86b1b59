#!/bin/sh
# Checks a root file system tarball made by build-rootfs.sh: the ipvsproxy
# binary is static and runs, and every tool it calls runs inside the tree with
# only the tree's own libraries.
#
# usage: check-rootfs.sh ROOTFS.tar [VERSION-ARGS...]
#   VERSION-ARGS: what to run the binary with to prove it starts (default:
#   "version"); the binary must exit 0.
# env: MODULES_DIR  a lib/modules directory holding one kernel's modules
#                   (after depmod); if set, modprobe in the tree must resolve
#                   the modules ipvsproxy loads from it, mounted read-only at
#                   /lib/modules as the DaemonSet mounts the host's.
# Runs commands with chroot, so it needs root, or unprivileged user
# namespaces (then it runs under `unshare -r`).
set -eu

[ $# -ge 1 ] || { echo "usage: check-rootfs.sh ROOTFS.tar [VERSION-ARGS...]" >&2; exit 2; }
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

failed=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failed=1; }

# The binary is an ELF executable...
if [ "$(head -c 4 "$root$BIN" | od -An -c | tr -d ' ')" = '177ELF' ]; then
	pass "$BIN is an ELF file"
else
	fail "$BIN is not an ELF file"
fi
# ...and static: it runs in an otherwise empty root, where a dynamic binary
# fails for want of its interpreter (/lib64/ld-linux-x86-64.so.2).
lone=$work/lone
mkdir -p "$lone"
cp "$root$BIN" "$lone/ipvsproxy"
if out=$($chroot_cmd "$lone" /ipvsproxy "$@" 2>&1); then
	pass "$BIN $* runs alone in an empty root (static): $out"
else
	fail "$BIN $* does not run alone in an empty root (dynamic, or it failed): $out"
fi
# `kubectl exec ds/ipvsproxy -- ipvsproxy inspect` works in an image without
# a shell or any tool: inspect reads the kernel over netlink only. Run it
# alone in the empty root, in a fresh network namespace (nothing of the
# host's is read): it must print a JSON report, and --check must exit 2 (no
# daemon there) with a sentence saying so.
if out=$($netns_cmd chroot "$lone" /ipvsproxy inspect -o json 2>&1) &&
	echo "$out" | grep -q '"apiVersion": "ipvsproxy.io/inspect/v1"'; then
	pass "ipvsproxy inspect -o json runs alone in an empty root (no shell, no tools)"
else
	fail "ipvsproxy inspect -o json in an empty root: $out"
fi
rc=0
out=$($netns_cmd chroot "$lone" /ipvsproxy inspect --check 2>&1) || rc=$?
case $rc:$out in
2:*"daemon is not reachable"*) pass "ipvsproxy inspect --check without a daemon exits 2 and says why" ;;
*) fail "ipvsproxy inspect --check without a daemon: exit $rc: $out" ;;
esac
if out=$($chroot_cmd "$root" "$BIN" "$@" 2>&1); then
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
	if out=$($chroot_cmd "$root" "$tool" --version 2>&1); then
		pass "$tool --version: $(echo "$out" | head -n 1)"
	else
		fail "$tool --version: $out"
	fi
done
# Host modules are usually compressed (Debian: xz; others: zstd); a kmod
# built without the matching support cannot load them.
features=$($chroot_cmd "$root" /sbin/modprobe --version 2>&1 | tail -n 1)
case $features in
*+XZ*+ZSTD*|*+ZSTD*+XZ*) pass "modprobe reads xz and zstd modules ($features)" ;;
*) fail "modprobe lacks xz or zstd support: $features" ;;
esac
if [ -n "${MODULES_DIR:-}" ]; then
	kver=$(ls "$MODULES_DIR" | head -n 1)
	for module in ip_vs ip_vs_twos ip_vs_wrr ip_vs_rr nf_conntrack dummy; do
		if out=$($netns_cmd -m sh -c 'mount --bind -o ro "$1" "$2/lib/modules" &&
			chroot "$2" /sbin/modprobe --show-depends -S "$3" "$4"' sh "$MODULES_DIR" "$root" "$kver" "$module" 2>&1); then
			pass "modprobe resolves $module of $kver: $(echo "$out" | wc -l) modules"
		else
			fail "modprobe cannot resolve $module of $kver: $out"
		fi
	done
fi
# The default iptables is the nft back end, matching Debian's own default.
case $($chroot_cmd "$root" /usr/sbin/iptables-restore --version 2>&1) in
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
for backend in nft legacy; do
	if out=$($netns_cmd sh -c '
		if command -v ipset >/dev/null; then ipset create KUBE-TEST-SET hash:ip,port || exit 1; fi
		chroot "$1" /usr/sbin/iptables-'"$backend"'-restore --noflush <"$2" &&
		chroot "$1" /usr/sbin/iptables-'"$backend"'-save -t nat' sh "$root" "$rules" 2>&1) &&
		echo "$out" | grep -q -- '-j MASQUERADE --random-fully'; then
		pass "iptables-$backend-restore applies MARK, MASQUERADE, mark, comment, addrtype, conntrack$(command -v ipset >/dev/null && echo ', set') rules"
	else
		fail "iptables-$backend-restore of the test rules: $out"
	fi
done

# Nothing a container must not carry: no shell would be fine to have, but a
# setuid file would be a privilege path nobody asked for.
setuid=$(find "$root" -perm -4000 -type f 2>/dev/null | sed "s|^$root||")
if [ -z "$setuid" ]; then
	pass "no setuid files"
else
	fail "setuid files: $setuid"
fi

[ $failed -eq 0 ] && echo "check-rootfs: all checks passed" || echo "check-rootfs: FAILED" >&2
exit $failed
