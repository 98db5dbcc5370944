#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ibv_ud_pingpong, unmodified, under rdgram-verbs in two network namespaces
# joined by a veth pair, each on net_af_packet: RoCEv2 UD through real
# kernel interfaces, IPv4 and IPv6 GIDs, polled and with events (-e). The tools' own TCP exchange uses
# kernel addresses on the same veths (192.168.77.0/24); the RoCE GIDs are
# rdgram's (10.0.0.0/24, fd00::/64), which the kernels do not hold. Needs
# root; skips (77) otherwise. Everything it makes is removed on exit.
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces"; exit 77; }
command -v ibv_ud_pingpong >/dev/null || { echo "SKIP: ibv_ud_pingpong missing (ibverbs-utils)"; exit 77; }
id=$$
NS_A=rdgva$id NS_B=rdgvb$id
extra_cleanup='ip netns del $NS_A 2>/dev/null; ip netns del $NS_B 2>/dev/null'
ip netns add "$NS_A" && ip netns add "$NS_B" || { echo "SKIP: cannot create namespaces"; exit 77; }
# ifindexes far apart: DPDK 22.11's net_af_packet joins the PACKET_FANOUT
# group (pid ^ ifindex) & 0xffff, which two processes must not share.
ip -n "$NS_A" link add va index 2048 type veth peer name vb netns "$NS_B" index 3072 ||
  { echo "SKIP: cannot create a veth pair"; exit 77; }
ip -n "$NS_A" link set lo up && ip -n "$NS_B" link set lo up
ip -n "$NS_A" link set va address 02:00:00:00:00:01 up
ip -n "$NS_B" link set vb address 02:00:00:00:00:02 up
ip -n "$NS_A" addr add 192.168.77.1/24 dev va
ip -n "$NS_B" addr add 192.168.77.2/24 dev vb
for side in a b; do
  n=$([ $side = a ] && echo 1 || echo 2)
  cat >"$tmp/$side.toml" <<EOT
[[port]]
name = "rdg0"
devargs = "net_af_packet0,iface=v$side"
mac = "02:00:00:00:00:0$n"
addresses = ["10.0.0.$n", "fd00::$n"]
mtu = 1024
EOT
done
for gid in 1 2; do
  for ev in "" "-e"; do
    what="ibv_ud_pingpong -g $gid $ev (IPv$([ $gid = 1 ] && echo 4 || echo 6)) over net_af_packet on a veth pair"
    # With events each round trip waits for the kernel to deliver the
    # veth's frame to a sleeping receiver: about 2 ms here, so fewer.
    n=$([ -n "$ev" ] && echo 500 || echo 2000)
    next_port
    run_pair "$tmp/a.toml" "$tmp/b.toml" 30 -- ibv_ud_pingpong -p $PORT -d rdg0 -g $gid -n $n $ev \
      -- ibv_ud_pingpong -p $PORT -d rdg0 -g $gid -n $n $ev 192.168.77.1
    pair_ok "$what" || continue
    expect "$tmp/srv.out" "^$n iters in" "$what: server iterations" &&
      expect "$tmp/cli.out" "^$n iters in" "$what: client iterations" &&
      echo "   $(grep 'iters in' "$tmp/cli.out")"
  done
done
finish
