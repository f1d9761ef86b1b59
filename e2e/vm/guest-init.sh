#!/bin/bash
# guest-init.sh — stage 2 of the VM's boot, PID 1 on the overlay of the host root, with every
# mount already made by the initramfs (initramfs-init.sh). It runs the command run.sh wrote into
# the results share, records its exit status there and powers the VM off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb

power_off() {
	sync
	echo 1 >/proc/sys/kernel/printk
	# The FIFO is made before the power-off starts: after it, exec of a binary from 9p fails (the
	# mkfifo made after it sometimes did, the read below then met EOF at once, PID 1 exited and the
	# console showed "Kernel panic - not syncing: Attempted to kill init! exitcode=0x00000100").
	mkfifo /run/power-off-wait 2>/dev/null
	echo o >/proc/sysrq-trigger
	# Wait with builtins only, for ever: PID 1 exiting would turn a clean power-off into a panic.
	while :; do
		read -r -t 30 <>/run/power-off-wait
	done
}

results=
for arg in $(</proc/cmdline); do
	case $arg in
	e2e_results=*) results=${arg#e2e_results=} ;;
	esac
done
# Without onlcr the guest's output reaches the host without carriage returns.
stty -onlcr </dev/console 2>/dev/null

read -r up _ </proc/uptime
echo "vm: guest ready after ${up}s (kernel $(</proc/sys/kernel/osrelease))"

bash "$results/command.sh" </dev/null
echo $? >"$results/exit-status"
power_off
