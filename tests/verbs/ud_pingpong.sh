#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdma-core's ibv_ud_pingpong, unmodified, between two processes under
# rdgram-verbs over a net_memif pair: IPv4 and IPv6 GIDs, polled and with
# completion events (-e). Each side must report every iteration done.
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
command -v ibv_ud_pingpong >/dev/null || { echo "SKIP: ibv_ud_pingpong missing (ibverbs-utils)"; exit 77; }
memif_pair p
n=2000
for gid in 1 2; do
  for ev in "" "-e"; do
    what="ibv_ud_pingpong -g $gid $ev (IPv$([ $gid = 1 ] && echo 4 || echo 6)) over net_memif"
    next_port
    run_pair "$tmp/p-a.toml" "$tmp/p-b.toml" 30 -- ibv_ud_pingpong -p $PORT -d rdg0 -g $gid -n $n $ev \
      -- ibv_ud_pingpong -p $PORT -d rdg1 -g $gid -n $n $ev 127.0.0.1
    pair_ok "$what" || continue
    expect "$tmp/srv.out" "^$n iters in" "$what: server iterations" &&
      expect "$tmp/cli.out" "^$n iters in" "$what: client iterations" &&
      echo "   $(grep 'iters in' "$tmp/cli.out")"
  done
done
finish
