#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX (Debian's ucx-utils 1.13, unmodified) on the emulated ConnectX:
# `ucx_info -d` lists each kind = "mlx5" port with the ud_mlx5 transport,
# and ucx_perftest's tag_lat and tag_bw with UCX_TLS=ud_mlx5 alone (so
# the run can only pass over ud_mlx5: UCX writes the WQEs, AVs and
# doorbells itself from mlx5dv_init_obj and reads the CQEs itself) run
# between two rdgram-verbs processes over a net_memif pair, with
# UCX_IB_GID_INDEX=1, the port's IPv4 GID (::ffff:10.0.0.x). Both sides
# exit 0, the client prints its "Final:" row for every iteration, the
# NICs executed WQEs and none of their error counters moved.
#
# Nothing is made by hand here: rdgram-verbs gives each program
# /dev/infiniband/uverbsN and the sysfs-like tree with the PCI ids UCX
# reads (15b3:1017) in a private mount namespace (rdgram-verbs(1)). That
# needs root (CAP_SYS_ADMIN and CAP_MKNOD); without it UCX lists no
# device, and the test skips.
#
# Unlike ud_verbs (tests/verbs/ucx.sh), ud_mlx5 tells IPv4 from IPv6 by
# the CQE's L3 type (flags_rqpn bits 27:24), which the emulated NIC
# writes, so the IPv4 GID works.
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
command -v ucx_info >/dev/null && command -v ucx_perftest >/dev/null ||
  { echo "SKIP: ucx-utils (ucx_info, ucx_perftest) missing"; exit 77; }
[ -e /usr/lib/x86_64-linux-gnu/libmlx5.so.1 ] || [ -n "$(ldconfig -p 2>/dev/null | grep libmlx5.so.1)" ] ||
  { echo "SKIP: libmlx5.so.1 missing (ibverbs-providers)"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (rdgram-verbs' private mount namespace)"; exit 77; }
memif_pair u
for s in a b; do
  sed -e 's/^name = "rdg\([01]\)"/name = "mlx5_\1"\nkind = "mlx5"/' "$tmp/u-$s.toml" >"$tmp/m-$s.toml"
done
export RDGRAM_VERBS_STATS=1

# -- ucx_info -d --
out=$tmp/info.out
timeout 60 "$RV" -c "$tmp/m-a.toml" ucx_info -d >"$out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "FAIL: ucx_info -d exit $rc"; tail -n 20 "$out" | sed 's/^/    /'; fails=$((fails + 1))
elif grep -q 'no private /dev/infiniband' "$out"; then
  echo "SKIP: $(grep 'no private /dev/infiniband' "$out")"
  exit 77
elif expect "$out" '^# Memory domain: mlx5_0$' "ucx_info -d lists mlx5_0" &&
  expect "$out" '^#      Transport: ud_mlx5$' "ucx_info -d lists ud_mlx5" &&
  expect "$out" '^#         Device: mlx5_0:1$' "ucx_info -d: a transport on mlx5_0:1"; then
  echo "ok: ucx_info -d lists mlx5_0 with ud_mlx5 on mlx5_0:1"
fi

# -- ucx_perftest: the server, then the client giving the server's host --
export UCX_TLS=ud_mlx5 UCX_IB_GID_INDEX=1
for t in tag_lat tag_bw; do
  case $t in tag_lat) n=2000 ;; *) n=20000 ;; esac
  next_port
  run_pair "$tmp/m-a.toml" "$tmp/m-b.toml" 120 -- env UCX_NET_DEVICES=mlx5_0:1 ucx_perftest -p "$PORT" -t "$t" -n "$n" \
    -- env UCX_NET_DEVICES=mlx5_1:1 ucx_perftest -p "$PORT" -t "$t" -n "$n" 127.0.0.1
  what="ucx_perftest -t $t, UCX_TLS=ud_mlx5, IPv4 GID, over net_memif"
  pair_ok "$what" || continue
  expect "$tmp/srv.out" 'Test: +tag match (latency|bandwidth)' "$what: the server's test header" || continue
  expect "$tmp/cli.out" "^Final: +$n " "$what: the client's Final row for $n iterations" || continue
  for f in srv cli; do
    if ! grep -Eq '^  tx_wqes +[1-9]' "$tmp/$f.out" || ! grep -Eq '^  rx_delivered +[1-9]' "$tmp/$f.out"; then
      echo "FAIL: $what: the $f NIC executed no WQE or delivered nothing"; fails=$((fails + 1)); continue 2
    fi
    if grep -E '^  (tx_[a-z_]*err|tx_compact_av|tx_av_unknown|rx_[a-z_]*err|rx_no_qp|rx_no_wqe|cq_overrun|flushed) ' \
      "$tmp/$f.out"; then
      echo "FAIL: $what: $f NIC error counters moved"; fails=$((fails + 1)); continue 2
    fi
  done
  # Final: iterations, latency 50%ile/average/overall (us), bandwidth
  # average/overall (MB/s), message rate average/overall (msg/s).
  echo "   $(awk '/^Final:/ { printf "%s iterations: latency p50 %s us, avg %s us; %s msg/s overall", $2, $3, $4, $9 }' "$tmp/cli.out")"
done
finish
