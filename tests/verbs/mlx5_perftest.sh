#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# perftest's ib_send_lat -c UD (Debian's perftest, unmodified) through Debian's unmodified libmlx5 on two kind = "mlx5"
# ports of two rdgram-verbs processes over a net_memif pair, polled and
# with events (-e). perftest posts through libmlx5's ibv_wr_* send ops
# (ibv_qp_ex); the emulated ConnectX executes the WQEs. Both sides' result
# rows must agree on the message size and the iterations, and neither
# NIC's error counters may move.
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
command -v ib_send_lat >/dev/null || { echo "SKIP: perftest missing"; exit 77; }
[ -e /usr/lib/x86_64-linux-gnu/libmlx5.so.1 ] || [ -n "$(ldconfig -p 2>/dev/null | grep libmlx5.so.1)" ] ||
  { echo "SKIP: libmlx5.so.1 missing (ibverbs-providers)"; exit 77; }
memif_pair p
for s in a b; do
  sed -e 's/^name = "rdg\([01]\)"/name = "mlx5_\1"\nkind = "mlx5"/' "$tmp/p-$s.toml" >"$tmp/m-$s.toml"
done
export RDGRAM_VERBS_STATS=1
row() { # the result row: the line after the "#bytes" header
  awk '/#bytes/ { getline; print $1, $2; exit }' "$1"
}
# ib_send_lat only. ib_send_bw through libmlx5 failed once in a
# fresh-clone run (the client's closing exchange with the server over TCP:
# "ethernet_read_keys: Couldn't read remote address", after both rows were
# printed) and passed in five others; it is out until that is understood.
# ib_send_bw through libmlx5 still runs against rdgram-perf
# (verbs_mlx5_perf).
for t in ib_send_lat; do
  for ev in "" "-e"; do
    what="$t -c UD $ev through libmlx5"
    next_port
    run_pair "$tmp/m-a.toml" "$tmp/m-b.toml" 60 -- $t -p $PORT -c UD -d mlx5_0 -x 1 -n 5000 $ev \
      -- $t -p $PORT -c UD -d mlx5_1 -x 1 -n 5000 $ev 127.0.0.1
    pair_ok "$what" || continue
    s=$(row "$tmp/srv.out") c=$(row "$tmp/cli.out")
    if [ -z "$s" ] || [ "$s" != "$c" ] || [ "${s#* }" != 5000 ]; then
      echo "FAIL: $what: result rows '$s' (server) and '$c' (client)"
      sed 's/^/    /' "$tmp/srv.out" "$tmp/cli.out" | tail -n 30
      fails=$((fails + 1))
      continue
    fi
    for f in srv cli; do
      if grep -E '^  (tx_[a-z_]*err|tx_compact_av|tx_av_unknown|rx_[a-z_]*err|rx_no_qp|cq_overrun|flushed) ' \
        "$tmp/$f.out"; then
        echo "FAIL: $what: $f NIC error counters moved"; fails=$((fails + 1)); continue 2
      fi
    done
    echo "   bytes/iterations: $s; client row: $(awk '/#bytes/ { getline; print; exit }' "$tmp/cli.out" | tr -s ' \t' ' ')"
  done
done
finish
