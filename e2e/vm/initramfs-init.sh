#!/bin/sh
# initramfs-init.sh — PID 1 of the VM's initramfs (busybox sh). It loads the 9p and overlay modules,
# mounts this host's / (9p tag "hostroot", read-only) under a tmpfs overlay so the guest may write
# anywhere without touching the host, and hands over to the stage-2 script named on the kernel
# command line (e2e_stage2=PATH, a path on the host root), which runs the user's command.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

fail() {
	echo "initramfs: $*" >/dev/console
	echo o >/proc/sysrq-trigger
	sleep 5
	poweroff -f
}

for m in $(cat /modules/order); do
	insmod "/modules/$m" || fail "insmod $m failed"
done

stage2=
for arg in $(cat /proc/cmdline); do
	case $arg in
	e2e_stage2=*) stage2=${arg#e2e_stage2=} ;;
	esac
done
[ -n "$stage2" ] || fail "no e2e_stage2= on the kernel command line"

# cache=loose: the host root is read-only for the guest and does not change while the VM runs
# (binaries under test are built before boot), so caching metadata makes exec and go's file walks
# much cheaper over 9p.
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower ||
	fail "mount of host root over 9p failed"
mount -t tmpfs -o mode=0755 tmpfs /upper || fail "tmpfs for the overlay failed"
mkdir -p /upper/rw /upper/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/rw,workdir=/upper/work /newroot ||
	fail "overlay of the host root failed"

umount /proc /sys
umount /dev
exec switch_root /newroot "$stage2"
