#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# drivers/mlx5's hardware suite (test_mlx5_hw, tests/hw/) on the emulated
# ConnectX: run under rdgram-verbs on a kind = "mlx5" port, the driver
# finds an mlx5 device (mlx5dv_is_supported), writes its WQEs straight
# into the QP's ring (inline with an immediate, one data segment, a
# gather of two) and parses the CQE64s; the emulated NIC, which shares no
# code with it, executes and writes them. The suite must pass, not skip:
# LoopbackThroughOwnQp runs; IbAvIdenticalToProvider skips by its own
# rule on a RoCE port (the AV always comes from the provider there).
#
# One process, two EALs: the suite's (Debian's shared DPDK) and the one
# inside rdgram's libibverbs.so.1 (static, its symbols hidden, on its own
# thread with its own --file-prefix and --no-shconf).
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
HW=$2
[ -e /usr/lib/x86_64-linux-gnu/libmlx5.so.1 ] || [ -n "$(ldconfig -p 2>/dev/null | grep libmlx5.so.1)" ] ||
  { echo "SKIP: libmlx5.so.1 missing (ibverbs-providers)"; exit 77; }
memif_pair h
sed -e 's/^name = "rdg0"/name = "mlx5_0"\nkind = "mlx5"/' "$tmp/h-a.toml" >"$tmp/m.toml"
out=$tmp/hw.out
RDGRAM_VERBS_STATS=1 RDGRAM_MLX5_DEVICE=mlx5_0 timeout 100 "$RV" -c "$tmp/m.toml" "$HW" >"$out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "FAIL: test_mlx5_hw exit $rc"; tail -n 30 "$out" | sed 's/^/    /'; fails=$((fails + 1))
elif expect "$out" '^mlx5 device: mlx5_0$' "the suite found the emulated device" &&
  expect "$out" '^\[       OK \] Mlx5Hw.LoopbackThroughOwnQp' "LoopbackThroughOwnQp passed" &&
  expect "$out" '^  tx_wqes +[3-9]' "the NIC executed the driver's WQEs" &&
  expect "$out" '^  rx_delivered +[3-9]' "the NIC delivered them"; then
  if grep -E '^  (tx_[a-z_]*err|tx_compact_av|tx_av_unknown|rx_[a-z_]*err|rx_no_qp|rx_no_wqe|cq_overrun) ' "$out"; then
    echo "FAIL: NIC error counters moved"; fails=$((fails + 1))
  else
    echo "ok: test_mlx5_hw on the emulated ConnectX: $(grep -E '^\[ +(PASSED|SKIPPED) +\] [0-9]' "$out" | tr -s ' ' | paste -sd ';')"
  fi
fi
finish
