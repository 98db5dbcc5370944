#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdgram-perf --oob-proto perftest (soft driver, net_af_packet on the lab's
# tap) against perftest's ib_send_lat and ib_send_bw -c UD on rxe0 in the
# guest: rdgram-perf as server and as client, IPv4 and IPv6 GIDs; then
# rdgram-perf on the verbs driver in the guest, on rxe0 with the tool. One
# guest boot. perftest 6.06 exchanges over IPv4 TCP only.
# usage: perftest.sh RDGRAM_PERF
set -u
# The tap: the TCP exchange goes through the host's kernel, and each case
# starts its own rdgram-perf on the tap (vhost-user has neither).
LAB_NET=tap
. "$(dirname "$0")/lab.sh"
PEER_PERF=$(realpath "${1:?usage: perftest.sh RDGRAM_PERF}")
. "$LAB_DIR/peer_cases.sh"
lab_init perftest
n=500 s=64
lat=(ib_send_lat -c UD -d rxe0 -n $n -s $s)
bw=(ib_send_bw -c UD -d rxe0 -n $n -s $s)
#         name                           role   proto    fam test iters size guest tool
peer_case "ib_send_lat v4, rdgram-perf serves" server perftest v4 lat $n $s "${lat[@]}"
peer_case "ib_send_lat v4, rdgram-perf calls"  client perftest v4 lat $n $s "${lat[@]}"
peer_case "ib_send_lat v6, rdgram-perf serves" server perftest v6 lat $n $s "${lat[@]}"
peer_case "ib_send_lat v6, rdgram-perf calls"  client perftest v6 lat $n $s "${lat[@]}"
peer_case "ib_send_bw v4, rdgram-perf serves"  server perftest v4 bw $n $s "${bw[@]}"
peer_case "ib_send_bw v4, rdgram-perf calls"   client perftest v4 bw $n $s "${bw[@]}"
peer_case "ib_send_bw v6, rdgram-perf serves"  server perftest v6 bw $n $s "${bw[@]}"
peer_case "ib_send_bw v6, rdgram-perf calls"   client perftest v6 bw $n $s "${bw[@]}"
# rdgram-perf on the verbs driver, in the guest, on rxe0 with the tool
# (fewer iterations: both ends share the guest's two emulated CPUs).
m=200
vlat=(ib_send_lat -c UD -d rxe0 -n $m -s $s)
vbw=(ib_send_bw -c UD -d rxe0 -n $m -s $s)
peer_case "ib_send_lat, rdgram-perf verbs serves" verbs-server perftest v4 lat $m $s "${vlat[@]}"
peer_case "ib_send_bw, rdgram-perf verbs serves"  verbs-server perftest v4 bw $m $s "${vbw[@]}"
peer_case "ib_send_bw, rdgram-perf verbs calls"   verbs-client perftest v4 bw $m $s "${vbw[@]}"
peer_run
