#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The lab's own failures, each said in one line with a non-zero exit and
# nothing left behind (no QEMU, no namespace, no run directory):
#   1. a guest that does not boot (an initramfs that is not one);
#   2. a module that does not load (one more, absent);
#   3. a guest script that fails;
#   4. a guest script that hangs (stopped in the guest after
#      LAB_GUEST_TIMEOUT; a guest that never gets that far is stopped from
#      the host after LAB_BOOT_TIMEOUT).
# usage: selftest.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lab.sh"
lab_init selftest # for the checks (skips as the lab does) and the initramfs
lab_cleanup
trap - EXIT
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "this is not an initramfs" >"$tmp/bad-initrd"
fail=0
names=() pids=()
# case_ NAME WANT [VAR=VALUE...]: runs a one-guest lab in a background
# subshell with those settings; it must fail and say WANT in its FAIL line.
# The four guests boot at the same time (each has its own namespace, run
# directory and files in $tmp): they only boot and stop, and one after
# another they took 45 s of the CI run on two CPUs.
case_() {
	local name=$1 want=$2
	shift 2
	echo "$want" >"$tmp/$name.want"
	(
		for kv in "$@"; do export "${kv?}"; done
		. "$here/lab.sh"
		lab_init "st_$name"
		echo "$LAB_NS" >"$tmp/$name.ns"
		echo "$LAB_RUN" >"$tmp/$name.run"
		lab_guest_script <<<"${GUEST:-true}"
		lab_start
		lab_wait
	) >"$tmp/$name.out" 2>&1 &
	names+=("$name")
	pids+=($!)
}
# check NAME: what case_ NAME left, once every guest has stopped.
check() {
	local name=$1 want rc line
	want=$(cat "$tmp/$name.want")
	rc=$(cat "$tmp/$name.rc")
	line=$(grep -m1 '^FAIL:' "$tmp/$name.out")
	echo "$name: exit $rc: $line"
	[[ $rc != 0 ]] || { echo "FAIL: $name: exit 0"; fail=1; }
	[[ $line == *"$want"* ]] || { echo "FAIL: $name: the line does not say '$want'"; cat "$tmp/$name.out"; fail=1; }
	[[ -s $tmp/$name.ns && -s $tmp/$name.run ]] || { echo "FAIL: $name: the lab did not start"; cat "$tmp/$name.out"; fail=1; return; }
	ip netns list | grep -qw "$(cat "$tmp/$name.ns")" && { echo "FAIL: $name: namespace left behind"; fail=1; }
	[[ -e $(cat "$tmp/$name.run") ]] && { echo "FAIL: $name: run directory left behind"; fail=1; }
	pgrep -f "qemu-system-x86_64.*$(basename "$(cat "$tmp/$name.run")")" >/dev/null &&
		{ echo "FAIL: $name: QEMU left running"; fail=1; }
}
case_ no_boot "did not boot" LAB_INITRD_OVERRIDE="$tmp/bad-initrd"
case_ bad_module "module absent.ko did not load" LAB_INSMOD=/lib/modules/absent.ko
case_ script_fails "guest.sh exited 3" GUEST="exit 3"
case_ hangs "did not finish within 5 s" LAB_GUEST_TIMEOUT=5 GUEST="sleep 600"
# Each wait gives that subshell's exit status (each guest is bounded by
# LAB_BOOT_TIMEOUT from the host).
for i in "${!names[@]}"; do
	wait "${pids[$i]}"
	echo $? >"$tmp/${names[$i]}.rc"
done
for n in "${names[@]}"; do
	check "$n"
done
[[ $fail == 0 ]] && echo "PASS: every lab failure said in one line, nothing left behind"
exit $fail
