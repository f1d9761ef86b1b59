#!/bin/bash
# crash-guest.sh — for the self-test of the VM scripts only (test-in-vm.sh --self-test-panic):
# makes the guest kernel panic through sysrq, as a real kernel bug would. With PANIC_SELF_TEST=once
# it panics only while the mark in the current directory (the results share) is absent, so the
# boot after the first passes.
echo "=== RUN   SelfTestPanic"
if [[ ${PANIC_SELF_TEST:-} == once && -e panic-self-test.done ]]; then
	echo "--- PASS: SelfTestPanic (the earlier boot panicked; this one does not)"
	exit 0
fi
touch panic-self-test.done && sync
echo c >/proc/sysrq-trigger
sleep 30
echo "--- FAIL: SelfTestPanic (the guest did not panic)"
exit 1
