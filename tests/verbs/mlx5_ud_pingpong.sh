#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdma-core's ibv_ud_pingpong, unmodified, through Debian's unmodified
# libmlx5 on two kind = "mlx5" ports (docs/VERBS.md, "Device kinds") of
# two rdgram-verbs processes joined by a net_memif pair: libmlx5 writes the
# WQEs and doorbell records, rdgram's emulated ConnectX executes them and
# writes the CQE64s libmlx5 polls. IPv4 and IPv6 GIDs, polled and with
# completion events (-e: the CQ armed through its doorbell record and UAR).
# Each side must report every iteration done, every mbuf back in its pool,
# and the NIC's error counters must stay at zero.
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
command -v ibv_ud_pingpong >/dev/null || { echo "SKIP: ibv_ud_pingpong missing (ibverbs-utils)"; exit 77; }
[ -e /usr/lib/x86_64-linux-gnu/libmlx5.so.1 ] || [ -n "$(ldconfig -p 2>/dev/null | grep libmlx5.so.1)" ] ||
  { echo "SKIP: libmlx5.so.1 missing (ibverbs-providers)"; exit 77; }
memif_pair p
# The same pair, as mlx5 devices mlx5_0 and mlx5_1.
for s in a b; do
  sed -e 's/^name = "rdg\([01]\)"/name = "mlx5_\1"\nkind = "mlx5"/' "$tmp/p-$s.toml" >"$tmp/m-$s.toml"
done
export RDGRAM_VERBS_STATS=1
n=2000
for gid in 1 2; do
  for ev in "" "-e"; do
    what="ibv_ud_pingpong -g $gid $ev (IPv$([ $gid = 1 ] && echo 4 || echo 6)) through libmlx5"
    next_port
    run_pair "$tmp/m-a.toml" "$tmp/m-b.toml" 60 -- ibv_ud_pingpong -p $PORT -d mlx5_0 -g $gid -n $n $ev \
      -- ibv_ud_pingpong -p $PORT -d mlx5_1 -g $gid -n $n $ev 127.0.0.1
    pair_ok "$what" || continue
    expect "$tmp/srv.out" "^$n iters in" "$what: server iterations" &&
      expect "$tmp/cli.out" "^$n iters in" "$what: client iterations" || continue
    # Every send executed by the NIC, every datagram delivered; no error
    # counter (lkey, length, opcode, DS, AV, overrun, flush) moved.
    for f in srv cli; do
      expect "$tmp/$f.out" "tx_wqes +$((n + 0))[^0-9]" "$what: $f NIC executed $n send WQEs" || continue 2
      if grep -E '^  (tx_[a-z_]*err|tx_compact_av|tx_av_unknown|rx_[a-z_]*err|rx_no_qp|cq_overrun|flushed) ' \
        "$tmp/$f.out"; then
        echo "FAIL: $what: $f NIC error counters moved"; fails=$((fails + 1)); continue 2
      fi
    done
    if [ -n "$ev" ]; then
      expect "$tmp/cli.out" "^  events +[1-9]" "$what: completion events raised" || continue
    fi
    echo "   $(grep 'iters in' "$tmp/cli.out")"
  done
done
finish
