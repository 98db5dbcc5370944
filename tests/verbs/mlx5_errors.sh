#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# mlx5_errors.py (the emulated ConnectX's completions and error CQEs, read
# by Debian's libmlx5 through pyverbs) under rdgram-verbs on one
# kind = "mlx5" port that sends to its own GIDs (net_null: nothing from
# outside); then the NIC's counters must name each error once.
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
/usr/bin/python3 -c 'import pyverbs' 2>/dev/null || { echo "SKIP: python3-pyverbs missing"; exit 77; }
[ -e /usr/lib/x86_64-linux-gnu/libmlx5.so.1 ] || [ -n "$(ldconfig -p 2>/dev/null | grep libmlx5.so.1)" ] ||
  { echo "SKIP: libmlx5.so.1 missing (ibverbs-providers)"; exit 77; }
cat >"$tmp/null.toml" <<EOT
[[port]]
name = "mlx5_0"
kind = "mlx5"
devargs = "net_null0,no-rx=1"
mac = "02:00:00:00:00:01"
addresses = ["10.0.0.1", "fd00::1"]
mtu = 1024
EOT
RDGRAM_VERBS_STATS=1 timeout 100 "$RV" -c "$tmp/null.toml" /usr/bin/python3 "$2" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
[ $rc -eq 0 ] || { echo "FAIL: mlx5_errors.py exit $rc"; exit 1; }
for c in tx_lkey_err tx_len_err rx_len_err; do
  expect "$tmp/out" "^  $c +1 " "the NIC counts one $c"
done
expect "$tmp/out" "^  flushed +1 " "the NIC counts one flushed WQE"
finish
