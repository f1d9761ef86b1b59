#!/usr/bin/env bash
# prepare.sh — fetch and cache what the end-to-end VM boots: a Debian 6.12 kernel that has IPVS,
# its modules (decompressed, depmod'ed) and a tiny initramfs that mounts this machine's / over
# virtio-9p under a tmpfs overlay. Idempotent: a second run only checks and prints "cached".
#
# Why a VM at all: the host kernel has no IPVS and no dummy driver (see e2e/vm/README.md).
#
# Environment:
#   IPVSPROXY_E2E_CACHE   cache directory (default /var/cache/ipvsproxy-e2e)
#   IPVSPROXY_E2E_KERNEL  exact Debian package to use instead of the newest
#                         linux-image-6.12.*+deb12-amd64-unsigned
# On success it writes $IPVSPROXY_E2E_CACHE/current.env, which run.sh sources.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}
say() { printf 'prepare: %s\n' "$*"; }
die() { printf 'prepare: error: %s\n' "$*" >&2; exit 1; }

# Modules the initramfs loads itself (before the host root is mounted, and the NIC); kmod's modprobe inside the
# guest loads everything else from the full tree.
initramfs_modules=(9pnet_virtio 9p overlay virtio_net)

# Host packages the VM and the scripts use. busybox-static because the initramfs needs a static
# shell; kmod because busybox's modprobe cannot load Debian's modules, the real one can.
host_packages=(qemu-system-x86 kmod busybox-static cpio xz-utils zstd socat ipvsadm iproute2)

apt_updated=
apt_update() {
	if [[ -z $apt_updated ]]; then
		say "apt-get update"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
		apt_updated=1
	fi
}

install_host_packages() {
	local missing=() p
	for p in "${host_packages[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	if ((${#missing[@]} == 0)); then
		say "host packages present: ${host_packages[*]}"
		return
	fi
	apt_update
	say "apt-get install ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# newest_kernel_package prints the newest linux-image-6.12.N+deb12-amd64-unsigned known to apt.
newest_kernel_package() {
	apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' 2>/dev/null |
		awk '{print $1}' | sort -V | tail -n1
}

pick_kernel_package() {
	if [[ -n ${IPVSPROXY_E2E_KERNEL:-} ]]; then
		pkg=$IPVSPROXY_E2E_KERNEL
		return
	fi
	pkg=$(newest_kernel_package)
	if [[ -z $pkg ]]; then
		# Without apt lists, a cached kernel is good enough; only a cold cache needs the network.
		if [[ -f $cache/current.env ]]; then
			pkg=$(. "$cache/current.env" && echo "$PACKAGE")
			say "apt knows no 6.12 kernel package; using cached $pkg"
			return
		fi
		apt_update
		pkg=$(newest_kernel_package)
	fi
	[[ -n $pkg ]] || die "apt knows no linux-image-6.12.*+deb12-amd64-unsigned package"
}

# fetch_kernel extracts the package and decompresses its modules into $dir/root.
fetch_kernel() {
	if [[ -f $dir/root.done ]]; then
		say "kernel cached: $dir"
		return
	fi
	rm -rf "$dir/root" "$dir/deb"
	mkdir -p "$dir/deb"
	say "apt-get download $pkg"
	# As root, apt would warn that its _apt sandbox user cannot write the cache dir; run the
	# download as root outright. apt's own exit status decides (set -e): no output filter.
	(cd "$dir/deb" && apt-get download -qq -o APT::Sandbox::User=root "$pkg")
	local deb
	deb=$(find "$dir/deb" -name '*.deb' | head -n1)
	[[ -n $deb ]] || die "apt-get download $pkg produced no .deb"
	say "extract $(basename "$deb")"
	dpkg-deb -x "$deb" "$dir/root"
	kver=$(ls "$dir/root/lib/modules")
	# Debian ships modules xz-compressed; busybox's insmod in the initramfs needs plain .ko.
	say "decompress $(find "$dir/root/lib/modules/$kver" -name '*.ko.xz' | wc -l) modules"
	find "$dir/root/lib/modules/$kver" -name '*.ko.xz' -print0 | xargs -0 -r -P"$(nproc)" -n64 xz -d
	say "depmod $kver"
	depmod -b "$dir/root" "$kver"
	rm -rf "$dir/deb"
	touch "$dir/root.done"
}

# extract_vmlinux unpacks the ELF kernel from the zstd-compressed bzImage, as the kernel's
# scripts/extract-vmlinux does. qemu boots an ELF kernel through PVH, skipping the firmware's
# real-mode loader and the in-guest decompression: about 5 s less per boot under emulation.
# On any failure run.sh boots the bzImage instead.
extract_vmlinux() {
	local vmlinuz=$dir/root/boot/vmlinuz-$kver out=$dir/vmlinux off
	if [[ -s $out ]]; then
		say "vmlinux cached: $out"
		return
	fi
	for off in $(LC_ALL=C grep -aboUP '\x28\xb5\x2f\xfd' "$vmlinuz" | cut -d: -f1); do
		# zstd complains about the bytes after the frame; the frame itself is complete.
		tail -c +$((off + 1)) "$vmlinuz" | zstd -dcq 2>/dev/null >"$out.tmp" || true
		if [[ $(head -c4 "$out.tmp" | od -An -tx1 | tr -d ' ') == 7f454c46 ]]; then
			mv "$out.tmp" "$out"
			say "vmlinux extracted: $out"
			return
		fi
	done
	rm -f "$out.tmp"
	say "no ELF kernel inside $vmlinuz; booting the bzImage"
}

# build_initramfs packs busybox, the init script and the 9p/overlay modules. Rebuilt when the
# init script or the module list changes.
build_initramfs() {
	local stamp want
	want=$( (cat "$here/initramfs-init.sh"; echo "${initramfs_modules[*]}"; sha256sum /bin/busybox) | sha256sum | cut -c1-16)
	stamp=$(cat "$dir/initramfs.stamp" 2>/dev/null || true)
	if [[ $stamp == "$want" && -f $dir/initramfs.cpio.gz ]]; then
		say "initramfs cached: $dir/initramfs.cpio.gz"
		return
	fi
	local ldd_out
	ldd_out=$(ldd /bin/busybox 2>&1 || true)
	[[ $ldd_out == *'not a dynamic'* ]] ||
		die "/bin/busybox is not static (install busybox-static)"
	local work
	work=$(mktemp -d)
	mkdir -p "$work"/{bin,dev,proc,sys,lower,upper,newroot,modules}
	cp /bin/busybox "$work/bin/busybox"
	ln -s busybox "$work/bin/sh"
	cp "$here/initramfs-init.sh" "$work/init"
	chmod 0755 "$work/init"
	local m line seen=" "
	: >"$work/modules/order"
	for m in "${initramfs_modules[@]}"; do
		while read -r line; do
			# Lines are "insmod /path/x.ko [params]" or "builtin x".
			[[ $line == insmod\ * ]] || continue
			line=${line#insmod }
			line=${line%% *}
			local base
			base=$(basename "$line")
			[[ $seen == *" $base "* ]] && continue
			seen+="$base "
			cp "$line" "$work/modules/$base"
			echo "$base" >>"$work/modules/order"
		done < <(modprobe -d "$dir/root" -S "$kver" --show-depends "$m")
	done
	say "initramfs modules: $(tr '\n' ' ' <"$work/modules/order")"
	(cd "$work" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$dir/initramfs.cpio.gz.tmp"
	mv "$dir/initramfs.cpio.gz.tmp" "$dir/initramfs.cpio.gz"
	echo "$want" >"$dir/initramfs.stamp"
	rm -rf "$work"
	say "initramfs built: $dir/initramfs.cpio.gz"
}

main() {
	local start=$SECONDS
	mkdir -p "$cache"
	exec 9>"$cache/.lock"
	flock 9
	install_host_packages
	pick_kernel_package
	dir=$cache/$pkg
	mkdir -p "$dir"
	fetch_kernel
	kver=$(ls "$dir/root/lib/modules")
	extract_vmlinux
	build_initramfs
	local kernel=$dir/root/boot/vmlinuz-$kver
	[[ -s $dir/vmlinux ]] && kernel=$dir/vmlinux
	cat >"$cache/current.env.tmp" <<EOF
PACKAGE=$pkg
KVER=$kver
KERNEL=$kernel
INITRAMFS=$dir/initramfs.cpio.gz
MODULES=$dir/root/lib/modules/$kver
EOF
	mv "$cache/current.env.tmp" "$cache/current.env"
	# Older kernels left by earlier runs are half a gigabyte each; only the current one is booted.
	local old
	for old in "$cache"/linux-image-*; do
		[[ -d $old && $old != "$dir" ]] || continue
		say "remove old kernel $old"
		rm -rf -- "$old"
	done
	say "ready: $pkg (kernel $kver) in $((SECONDS - start))s; $cache/current.env"
}

main "$@"
