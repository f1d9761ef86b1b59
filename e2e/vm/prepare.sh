#!/usr/bin/env bash
# prepare.sh — fetch and cache what the end-to-end VM boots: a Debian 12 kernel that has IPVS,
# its modules (decompressed, depmod'ed) and a tiny initramfs that mounts this machine's / under a
# tmpfs overlay (over virtio-9p, or virtio-fs for a kernel built without 9p). Idempotent: a
# second run only checks and prints "cached".
#
# Why a VM at all: the host kernel has no IPVS and no dummy driver (see e2e/vm/README.md).
#
# Environment:
#   IPVSPROXY_E2E_CACHE   cache directory (default /var/cache/ipvsproxy-e2e)
#   IPVSPROXY_VM_KERNEL   which kernel (docs/compatibility.md, "Kernels"):
#                           6.12   the newest linux-image-6.12.*+deb12-amd64-unsigned (default)
#                           6.1    the newest linux-image-6.1.0-*-amd64-unsigned: Debian 12's own
#                           cloud  the newest linux-image-6.1.0-*-cloud-amd64-unsigned: what
#                                  Debian 12's cloud images boot (no 9p: the root goes over virtio-fs)
#   IPVSPROXY_E2E_KERNEL  exact Debian package to use instead of the newest of the flavour
# On success it writes $IPVSPROXY_E2E_CACHE/current.env (6.12) or current-FLAVOUR.env, which
# run.sh sources.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${IPVSPROXY_E2E_CACHE:-/var/cache/ipvsproxy-e2e}
say() { printf 'prepare: %s\n' "$*"; }
die() { printf 'prepare: error: %s\n' "$*" >&2; exit 1; }

flavour=${IPVSPROXY_VM_KERNEL:-6.12}
# Per flavour: the package name pattern, the env file, where the kernel is kept, and how the guest
# mounts the host root. The default's env file and directory are where they always were, so
# scripts that know only current.env keep working; the other flavours live under kernels/, where
# the clean-up of old 6.12 kernels never looks.
case $flavour in
6.12) pattern='^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' env_file=$cache/current.env kernels=$cache rootfs=9p ;;
6.1) pattern='^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$' env_file=$cache/current-6.1.env kernels=$cache/kernels rootfs=9p ;;
cloud) pattern='^linux-image-6\.1\.0-[0-9]+-cloud-amd64-unsigned$' env_file=$cache/current-cloud.env kernels=$cache/kernels rootfs=virtiofs ;;
*) die "IPVSPROXY_VM_KERNEL=$flavour: want 6.12, 6.1 or cloud" ;;
esac

# Modules the initramfs loads itself (before the host root is mounted, and the NIC); kmod's modprobe inside the
# guest loads everything else from the full tree. virtio_pci first: no module depends on the PCI
# transport by symbol, and 6.12 has it built in, but Debian's 6.1 kernels build it as a module;
# without it no virtio device appears and the root's mount finds no share tagged hostroot.
if [[ $rootfs == virtiofs ]]; then
	initramfs_modules=(virtio_pci virtiofs overlay virtio_net)
else
	initramfs_modules=(virtio_pci 9pnet_virtio 9p overlay virtio_net)
fi

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

# newest_kernel_package prints the newest package of the flavour known to apt.
newest_kernel_package() {
	apt-cache search --names-only "$pattern" 2>/dev/null |
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
		if [[ -f $env_file ]]; then
			pkg=$(. "$env_file" && echo "$PACKAGE")
			say "apt knows no $flavour kernel package; using cached $pkg"
			return
		fi
		apt_update
		pkg=$(newest_kernel_package)
	fi
	[[ -n $pkg ]] || die "apt knows no package matching $pattern"
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
	# Debian's 6.12 kernels are zstd-compressed, its 6.1 kernels xz-compressed.
	local magic tool
	for magic in '\x28\xb5\x2f\xfd:zstd' '\xfd\x37\x7a\x58\x5a\x00:xz'; do
		tool=${magic##*:}
		for off in $(LC_ALL=C grep -aboUP "${magic%:*}" "$vmlinuz" | cut -d: -f1); do
			# The decompressor complains about the bytes after the stream; the stream itself is complete.
			tail -c +$((off + 1)) "$vmlinuz" | "$tool" -dcq 2>/dev/null >"$out.tmp" || true
			if [[ $(head -c4 "$out.tmp" | od -An -tx1 | tr -d ' ') == 7f454c46 ]]; then
				mv "$out.tmp" "$out"
				say "vmlinux extracted ($tool): $out"
				return
			fi
		done
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
	mkdir -p "$cache" "$kernels"
	exec 9>"$cache/.lock"
	flock 9
	install_host_packages
	pick_kernel_package
	dir=$kernels/$pkg
	mkdir -p "$dir"
	fetch_kernel
	kver=$(ls "$dir/root/lib/modules")
	extract_vmlinux
	build_initramfs
	local kernel=$dir/root/boot/vmlinuz-$kver
	[[ -s $dir/vmlinux ]] && kernel=$dir/vmlinux
	cat >"$env_file.tmp" <<ENVEOF
FLAVOUR=$flavour
PACKAGE=$pkg
KVER=$kver
KERNEL=$kernel
INITRAMFS=$dir/initramfs.cpio.gz
MODULES=$dir/root/lib/modules/$kver
ROOTFS=$rootfs
ENVEOF
	mv "$env_file.tmp" "$env_file"
	# Older kernels of this flavour left by earlier runs are half a gigabyte each; only the current
	# one is booted.
	local old
	for old in "$kernels"/linux-image-*; do
		[[ -d $old && $old != "$dir" ]] || continue
		[[ $(basename "$old") =~ $pattern ]] || continue
		say "remove old kernel $old"
		rm -rf -- "$old"
	done
	say "ready: $pkg (kernel $kver, root over $rootfs) in $((SECONDS - start))s; $env_file"
}

main "$@"
