#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdgram-perf --oob-proto ud_pingpong (soft driver, net_af_packet on the
# lab's tap) against rdma-core's ibv_ud_pingpong on rxe0 in the guest:
# rdgram-perf as server and as client, IPv4 and IPv6 GIDs (the IPv6 case
# with rdgram-perf serving also exchanges over IPv6 TCP); then rdgram-perf
# on the verbs driver in the guest, on rxe0 with the tool. One guest boot.
# usage: ud_pingpong.sh RDGRAM_PERF
set -u
# The tap: the TCP exchange goes through the host's kernel, and each case
# starts its own rdgram-perf on the tap (vhost-user has neither).
LAB_NET=tap
. "$(dirname "$0")/lab.sh"
PEER_PERF=$(realpath "${1:?usage: ud_pingpong.sh RDGRAM_PERF}")
. "$LAB_DIR/peer_cases.sh"
lab_init ud_pingpong
n=500 s=64
tool=(ibv_ud_pingpong -d rxe0 -n $n -s $s)
#         name                        role   proto       fam test iters size guest tool
peer_case "ud_pingpong v4, rdgram-perf serves" server ud_pingpong v4 lat $n $s "${tool[@]}"
peer_case "ud_pingpong v4, rdgram-perf calls"  client ud_pingpong v4 lat $n $s "${tool[@]}"
peer_case "ud_pingpong v6, rdgram-perf serves" server ud_pingpong v6 lat $n $s "${tool[@]}"
peer_case "ud_pingpong v6, rdgram-perf calls"  client ud_pingpong v6 lat $n $s "${tool[@]}"
# rdgram-perf on the verbs driver, in the guest, on rxe0 with the tool.
peer_case "ud_pingpong, rdgram-perf verbs calls" verbs-client ud_pingpong v4 lat 200 $s ibv_ud_pingpong -d rxe0 -n 200 -s $s
peer_run
