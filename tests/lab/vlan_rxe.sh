#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# 802.1Q on the wire: rdgram-perf (soft driver, net_af_packet on the lab's
# tap, [port] vlan = 78) against rdma-core's ibv_ud_pingpong and perftest's
# ib_send_lat -c UD on rxe0 through the guest's VLAN netdev eth0.78 (Linux's
# own 802.1Q: rxe0 is on eth0, as Linux wants it since 5.11, and uses the
# GIDs of eth0.78's addresses, whose frames the VLAN netdev tags and
# untags; guest-init.sh), rdgram-perf as server and as client, IPv4 and IPv6 GIDs; then an untagged rdgram port
# against the same rxe, which must not get through (rdgram-perf counts rxe's
# tagged frames as rx_vlan_tagged, rxe receives nothing). The tools' TCP
# exchange stays on the lab's untagged addresses; RoCE lives on the VLAN's
# own (10.78.0.0/24, fd78::/64). One guest boot. peer_cases.sh checks each
# case on both sides (counts, bytes, GIDs, QPNs, rxe's counters).
# usage: vlan_rxe.sh RDGRAM_PERF
set -u
LAB_NET=tap
. "$(dirname "$0")/lab.sh"
PEER_PERF=$(realpath "${1:?usage: vlan_rxe.sh RDGRAM_PERF}")
PEER_VLAN=78
PEER_SOFT_IP4=10.78.0.1 PEER_SOFT_IP6=fd78::1
PEER_GUEST_IP4=10.78.0.2 PEER_GUEST_IP6=fd78::2
PEER_UNTAGGED_IP4=10.78.0.9 PEER_UNTAGGED_IP6=fd78::9
LAB_VLAN="$PEER_VLAN,$PEER_GUEST_IP4/24,$PEER_GUEST_IP6/64"
. "$LAB_DIR/peer_cases.sh"
lab_init vlan_rxe
n=200 s=64
pp=(ibv_ud_pingpong -d rxe0 -n $n -s $s)
lat=(ib_send_lat -c UD -d rxe0 -n $n -s $s)
#         name                                     role   proto       fam test iters size guest tool
peer_case "VLAN ud_pingpong v4, rdgram-perf serves" server ud_pingpong v4 lat $n $s "${pp[@]}"
peer_case "VLAN ud_pingpong v6, rdgram-perf calls"  client ud_pingpong v6 lat $n $s "${pp[@]}"
peer_case "VLAN ib_send_lat v4, rdgram-perf calls"  client perftest v4 lat $n $s "${lat[@]}"
peer_case "VLAN ib_send_lat v6, rdgram-perf serves" server perftest v6 lat $n $s "${lat[@]}"
peer_case "untagged port vs rxe on the VLAN" client-untagged ud_pingpong v4 lat 5 $s ibv_ud_pingpong -d rxe0 -n 5 -s $s
peer_run
