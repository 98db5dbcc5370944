#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The verbs hardware suite (tests/hw/test_verbs_hw.cc) on a real provider:
# rxe0, Linux's rdma_rxe, in the lab guest (tests/lab/lab.sh). Nothing may
# be skipped: a skip inside the guest is a failure here. The multicast test
# runs once per address family. Afterwards rxe's own counters (rdma
# statistic) are printed.
# usage: verbs_hw.sh TEST_VERBS_HW
set -u
. "$(dirname "$0")/lab.sh"
exe=$(realpath "${1:?usage: verbs_hw.sh TEST_VERBS_HW}")
lab_init verbs_hw
lab_keep "$exe"
lab_guest_script <<EOF
RDGRAM_VERBS_DEVICE=rxe0 RDGRAM_MCAST_LOCAL=$LAB_GUEST_IP timeout 100 '$exe' >\$LAB_RUN/suite.out 2>&1
rc=\$?
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
out=$LAB_RUN/suite.out
[[ -f $out ]] || lab_fail "the suite did not run in the guest"
cat "$out"
grep -q '\[  SKIPPED \]\|^SKIP' "$out" && { echo "FAIL: a test was skipped on rxe0"; rc=1; }
[[ $(grep -c '\[  PASSED  \]' "$out") == 2 ]] || rc=1
exit $rc
