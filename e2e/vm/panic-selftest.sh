#!/usr/bin/env bash
# panic-selftest.sh — proves that a guest kernel panic in the VM stage is reported by name, with
# the oops' lines, retried once and counted, and that a second panic fails the stage. Two runs of
# test-in-vm.sh whose guest panics on purpose (sysrq): once (the retry passes) and always (fails).
# About three boots, so not part of `make test`; run it after changing run.sh or test-in-vm.sh.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failed=0
expect() { # expect DESCRIPTION GREP-ARGS...
	local what=$1
	shift
	if grep -q "$@" "$out"; then
		echo "ok: $what"
	else
		echo "FAIL: $what"
		failed=1
	fi
}

echo "panic-selftest: the guest panics on the first boot only"
IPVSPROXY_VM_PANIC_RETRIES=1 "$here/test-in-vm.sh" --self-test-panic once >"$out" 2>&1
rc=$?
((rc == 0)) && echo "ok: exit 0 after the retry" || { echo "FAIL: exit $rc after the retry"; failed=1; }
expect "the panic is named with its reason and where" -E '^test-in-vm: guest kernel panic on boot 1 .*panic-self-test-once RUN SelfTestPanic\): Kernel panic - not syncing: sysrq triggered crash'
expect "the oops' lines are shown" -E '^run:   .*sysrq_handle_crash'
expect "the retry is announced" -F 'booting the VM stage again (retry 1 of at most 1)'
expect "boots and panics are counted" -E 'boots 2, guest kernel panics 1$'
expect "the retry's result is the summary" -Fx '1 passed, 0 failed'

echo "panic-selftest: the guest panics on every boot"
IPVSPROXY_VM_PANIC_RETRIES=1 "$here/test-in-vm.sh" --self-test-panic always >"$out" 2>&1
rc=$?
((rc != 0)) && echo "ok: exit $rc" || { echo "FAIL: exit 0 although every boot panicked"; failed=1; }
expect "both panics are named" -E '^test-in-vm: guest kernel panic on boot 2 \(panics so far: 2'
expect "boots and panics are counted" -E 'boots 2, guest kernel panics 2$'
expect "the stage fails by name" -E '^test-in-vm: FAIL: guest kernel panic: Kernel panic - not syncing: sysrq triggered crash'
expect "the failure shows the oops' lines" -E '^test-in-vm:   .*sysrq_handle_crash'
if grep -qF 'produced no summary' "$out"; then echo "FAIL: a bare 'no summary'"; failed=1; else echo "ok: no bare 'no summary'"; fi
expect "the summary counts a failure" -Fx '0 passed, 1 failed'
((failed == 0)) && echo "panic-selftest: PASS" || { echo "panic-selftest: FAIL (last output: $out)"; trap - EXIT; }
exit "$failed"
