#!/bin/bash
# guest-init.sh — stage 2 of the VM's boot, PID 1 on the overlay of the host root. It builds the
# usual mounts, points /lib/modules/$(uname -r) at the cached Debian module tree, optionally brings
# up the one restricted user-mode NIC, runs the command run.sh wrote into the results share, records
# its exit status there and powers the VM off. Nothing here may assume more than the host root.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
# devtmpfs lacks these; bash's process substitution needs /dev/fd.
ln -sfn /proc/self/fd /dev/fd
ln -sfn /proc/self/fd/0 /dev/stdin
ln -sfn /proc/self/fd/1 /dev/stdout
ln -sfn /proc/self/fd/2 /dev/stderr
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# Without onlcr the guest's output reaches the host without carriage returns.
stty -onlcr </dev/console 2>/dev/null

power_off() {
	sync
	dmesg -n 1
	echo o >/proc/sysrq-trigger
	# Wait with builtins only: once power-off starts, exec of a binary from 9p fails, and PID 1
	# exiting would turn a clean power-off into a panic.
	mkfifo /run/power-off-wait 2>/dev/null
	read -r -t 30 <>/run/power-off-wait
}

results= modules= net=
for arg in $(</proc/cmdline); do
	case $arg in
	e2e_results=*) results=${arg#e2e_results=} ;;
	e2e_modules=*) modules=${arg#e2e_modules=} ;;
	e2e_net=*) net=${arg#e2e_net=} ;;
	esac
done
if [[ -z $results ]]; then
	echo "vm: no e2e_results= on the kernel command line" >&2
	power_off
fi
# The results share is mounted at the same path as on the host, so a command may write files
# there and the caller finds them where it expects.
mkdir -p "$results"
if ! mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=512000 results "$results"; then
	echo "vm: cannot mount the results share at $results" >&2
	power_off
fi

kver=$(uname -r)
if [[ -n $modules ]]; then
	# /lib is usually a symlink to usr/lib on the host; create the link where it resolves.
	mkdir -p "$(readlink -f /lib)/modules"
	ln -sfn "$modules" "$(readlink -f /lib)/modules/$kver"
fi

hostname ipvsproxy-vm
ip link set lo up

if [[ -n $net ]]; then
	# The restricted user-mode NIC: a documentation subnet where only guestfwd addresses answer.
	modprobe virtio_net
	for _ in $(seq 50); do [[ -e /sys/class/net/eth0 ]] && break; sleep 0.1; done
	ip addr add "$net" dev eth0
	ip link set eth0 up
fi

read -r up _ </proc/uptime
echo "vm: guest ready after ${up}s (kernel $kver)"

bash "$results/command.sh" </dev/null
echo $? >"$results/exit-status"
umount "$results"
power_off
