#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The gtest suites that need what only the lab guest has, in one boot:
#   - the verbs hardware suite (tests/hw/test_verbs_hw.cc) on a real
#     provider: rxe0, Linux's rdma_rxe. The multicast test runs once per
#     address family. Afterwards rxe's own counters (rdma statistic) are
#     printed.
#   - with TEST_SOFT_TAP: the soft driver's steering on DPDK's net_tap
#     (tests/integration/test_soft_tap.cc), whose steer = "flow" cases need
#     the TC flower, skbedit and multiq the guest's kernel has (the host's
#     may not): rte_flow rules, IPv4 and IPv6, put every datagram on its
#     QP's queue with no hand-off.
# Nothing may be skipped: a skip inside the guest is a failure here.
# usage: verbs_hw.sh TEST_VERBS_HW [TEST_SOFT_TAP]
set -u
. "$(dirname "$0")/lab.sh"
exe=$(realpath "${1:?usage: verbs_hw.sh TEST_VERBS_HW [TEST_SOFT_TAP]}")
tap=${2:+$(realpath "$2")}
lab_init verbs_hw
lab_keep "$exe" ${tap:+"$tap"}
lab_guest_script <<EOF
rc=0
if [[ -n '$tap' ]]; then
	timeout 60 '$tap' --gtest_filter='Steer/*' >\$LAB_RUN/tap.out 2>&1 || rc=1
fi
RDGRAM_VERBS_DEVICE=rxe0 RDGRAM_MCAST_LOCAL=$LAB_GUEST_IP timeout 100 '$exe' >\$LAB_RUN/suite.out 2>&1 || rc=1
# The multicast test again with an IPv6 group (ff15::7701 from fd77::2):
# rdma_cm refuses it on RoCEv2, verbs_mcast joins it without.
echo "=== multicast over IPv6" >>\$LAB_RUN/suite.out
RDGRAM_VERBS_DEVICE=rxe0 RDGRAM_MCAST_LOCAL=$LAB_GUEST_IP6 timeout 40 '$exe' --gtest_filter='*Multicast*' >>\$LAB_RUN/suite.out 2>&1 || rc=1
rdma statistic show link rxe0/1 >>\$LAB_RUN/suite.out
exit \$rc
EOF
lab_start
lab_wait
rc=$?
# noskip NAME OUT PASSED_LINES: the suite ran whole, passed, skipped nothing.
noskip() {
	[[ -f $2 ]] || { echo "FAIL: $1 did not run in the guest"; rc=1; return; }
	echo "=== $1"
	cat "$2"
	grep -q '\[  SKIPPED \]\|^SKIP' "$2" && { echo "FAIL: $1: a test was skipped in the guest"; rc=1; }
	[[ $(grep -c '\[  PASSED  \]' "$2") == "$3" ]] || { echo "FAIL: $1 did not pass"; rc=1; }
}
noskip test_verbs_hw "$LAB_RUN/suite.out" 2
if [[ -n $tap ]]; then
	noskip test_soft_tap "$LAB_RUN/tap.out" 1
	# The flow cases: the rules installed, and not one datagram handed off.
	for c in flow flow6; do
		sed -n "/RUN .*\/$c\$/,/OK .*\/$c /p" "$LAB_RUN/tap.out" | grep -q '^steering: rte_flow (2 rule(s)' ||
			{ echo "FAIL: soft_tap $c: no rte_flow steering"; rc=1; }
		sed -n "/RUN .*\/$c\$/,/OK .*\/$c /p" "$LAB_RUN/tap.out" | grep -q '^hand-offs: 0 of 128 ' ||
			{ echo "FAIL: soft_tap $c: datagrams handed off between queues"; rc=1; }
	done
fi
[[ $rc == 0 ]] && echo "PASS: the verbs suite on rxe0${tap:+; rte_flow steering of the soft driver on net_tap, IPv4 and IPv6}"
exit $rc
