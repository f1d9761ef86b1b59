#!/bin/sh
# initramfs-init.sh — PID 1 of the VM's initramfs (busybox sh). It loads the 9p (or virtio-fs),
# overlay and virtio-net modules, mounts this host's / (tag "hostroot", read-only; over virtio-fs
# when the kernel command line says e2e_fs=virtiofs) under a tmpfs overlay so
# the guest may write anywhere without touching the host, prepares every mount the command needs,
# and hands over to the stage-2 script (e2e_stage2=PATH on the kernel command line, a path on the
# host root). The mounts are made here, with the static busybox already in memory, because each
# program started from the 9p root costs a noticeable fraction of a second under emulation.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

fail() {
	echo "initramfs: $*" >/dev/console
	echo o >/proc/sysrq-trigger
	sleep 30
}

for m in $(cat /modules/order); do
	insmod "/modules/$m" || fail "insmod $m failed"
done

stage2='' results='' modules='' net='' fs=9p
for arg in $(cat /proc/cmdline); do
	case $arg in
	e2e_stage2=*) stage2=${arg#e2e_stage2=} ;;
	e2e_results=*) results=${arg#e2e_results=} ;;
	e2e_modules=*) modules=${arg#e2e_modules=} ;;
	e2e_net=*) net=${arg#e2e_net=} ;;
	e2e_fs=*) fs=${arg#e2e_fs=} ;;
	esac
done
[ -n "$stage2" ] || fail "no e2e_stage2= on the kernel command line"
[ -n "$results" ] || fail "no e2e_results= on the kernel command line"

# cache=loose: the host root is read-only for the guest and does not change while the VM runs
# (binaries under test are built before boot), so caching makes exec and file walks over 9p
# much cheaper.
if [ "$fs" = virtiofs ]; then
	# A kernel without 9p (Debian's cloud flavour): run.sh serves both shares with virtiofsd.
	mount -t virtiofs -o ro hostroot /lower || fail "mount of host root over virtio-fs failed"
else
	mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower ||
		fail "mount of host root over 9p failed"
fi
mount -t tmpfs -o mode=0755 tmpfs /upper || fail "tmpfs for the overlay failed"
mkdir -p /upper/rw /upper/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/rw,workdir=/upper/work /newroot ||
	fail "overlay of the host root failed"

r=/newroot
mount -t proc proc $r/proc
mount -t sysfs sysfs $r/sys
mount -t devtmpfs devtmpfs $r/dev
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $r/dev/pts
mount -t tmpfs -o mode=1777 tmpfs $r/dev/shm
# devtmpfs lacks these; bash's process substitution needs /dev/fd.
ln -sfn /proc/self/fd $r/dev/fd
ln -sfn /proc/self/fd/0 $r/dev/stdin
ln -sfn /proc/self/fd/1 $r/dev/stdout
ln -sfn /proc/self/fd/2 $r/dev/stderr
mount -t tmpfs -o mode=0755 tmpfs $r/run
# /tmp stays the overlay's (host content, writes to tmpfs): a checkout under /tmp, as CI's may be,
# must be visible in the guest at the same path.
mount -t cgroup2 cgroup2 $r/sys/fs/cgroup 2>/dev/null
# The results share sits at the same path as on the host, so the caller finds files where it
# expects; cache=none so every write reaches the host at once.
mkdir -p "$r$results"
if [ "$fs" = virtiofs ]; then
	mount -t virtiofs results "$r$results" || fail "cannot mount the results share at $results"
else
	mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=512000 results "$r$results" ||
		fail "cannot mount the results share at $results"
fi

if [ -n "$modules" ]; then
	# kmod's modprobe looks in /lib/modules/$(uname -r); /lib is often a symlink to usr/lib.
	libdir=$(readlink -f $r/lib)
	mkdir -p "$libdir/modules"
	ln -sfn "$modules" "$libdir/modules/$(uname -r)"
fi

hostname ipvsproxy-vm
ip link set lo up
if [ -n "$net" ]; then
	# The restricted user-mode NIC: a documentation subnet where only guestfwd addresses answer.
	ip addr add "$net" dev eth0 || fail "no eth0 for e2e_net=$net"
	ip link set eth0 up
fi

umount /proc /sys /dev
exec switch_root /newroot "$stage2"
