#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# rdgram-perf selects the verbs and mlx5 drivers from its config. Where no
# RDMA device exists (this test's home) each example config must fail to
# open the device with exactly one clear line and exit 1, in server and in
# client mode: no crash, no hang, no soft-driver fallback; EFA (no config
# shipped) the same. Loopback mode and an unknown driver name are refused
# with exit 2. On a host that has
# RDMA devices the open would succeed and wait for a peer: SKIP (77).
# Usage: perf_rdma_driver.sh RDGRAM_PERF CONFIG_DIR
set -u
perf=$1
cfgdir=$2
if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
  echo "SKIP: RDMA devices present ($(ls /sys/class/infiniband | tr '\n' ' ')); run the hw suite instead"
  exit 77
fi
eal="-l 0 --no-huge --no-shconf -m 256 --no-pci --log-level=lib.eal:error"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# run NAME WANT_RC PATTERN ARGS...: one "rdgram-perf:" line on stderr,
# matching PATTERN, and exit WANT_RC.
run() {
  local name=$1 want=$2 pat=$3
  shift 3
  timeout 60 "$perf" $eal --file-prefix "rdgram-rdma$$" -- "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(grep -c '^rdgram-perf:' "$tmp/err")
  echo "$name: exit $rc; $(grep '^rdgram-perf:' "$tmp/err")"
  if [ $rc -ne "$want" ]; then
    echo "FAIL: $name: exit $rc, want $want"; cat "$tmp/out" "$tmp/err"; fail=1
  elif [ "$lines" -ne 1 ]; then
    echo "FAIL: $name: $lines rdgram-perf lines on stderr, want 1"; cat "$tmp/err"; fail=1
  elif ! grep -q "^rdgram-perf: .*$pat" "$tmp/err"; then
    echo "FAIL: $name: the line does not match '$pat'"; fail=1
  fi
  if grep -q 'Sent data messages\|lat_us\|t_avg' "$tmp/out"; then
    echo "FAIL: $name: printed results without a device"; fail=1
  fi
}

for cfg in verbs mlx5-roce mlx5-ib; do
  drv=$(sed -n 's/^driver = "\(.*\)".*/\1/p' "$cfgdir/$cfg.toml")
  for mode in server client; do
    run "$cfg/$mode" 1 "driver $drv: cannot open RDMA device" -c "$cfgdir/$cfg.toml" --mode $mode --timeout 5
  done
done
run "verbs/loopback" 2 'not loopback' -c "$cfgdir/verbs.toml" --mode loopback
# EFA takes the same path: no device here, or (a tree built without
# efadv) one line with meson's reason and exit 2.
printf '[perf]\ndriver = "efa"\n' >"$tmp/efa.toml"
for mode in server client; do
  if timeout 60 "$perf" $eal --file-prefix "rdgram-rdma$$" -- -c "$tmp/efa.toml" --mode $mode --timeout 5 2>&1 |
      grep -q 'driver efa was not built: '; then
    run "efa/$mode" 2 "driver efa was not built: " -c "$tmp/efa.toml" --mode $mode --timeout 5
  else
    run "efa/$mode" 1 "driver efa: cannot open RDMA device" -c "$tmp/efa.toml" --mode $mode --timeout 5
  fi
done
run "efa/loopback" 2 'not loopback' -c "$tmp/efa.toml" --mode loopback
printf '[perf]\ndriver = "rxe"\n' >"$tmp/bad.toml"
run "unknown driver" 2 "bad.toml:2:10: key 'perf.driver': expected one of \"soft\", \"verbs\", \"mlx5\", \"efa\"" \
  -c "$tmp/bad.toml"
# --oob: with a device it swaps QPN/GID/LID over TCP; here the device open
# fails first (exit 1). A bad address is a config error (file:line:col),
# and the in-process loopback has no peer to swap with (the soft driver
# takes --oob in server and client mode).
run "verbs/oob" 1 "driver verbs: cannot open RDMA device" -c "$cfgdir/verbs.toml" --mode client \
  --oob 127.0.0.1:18599 --timeout 5
printf '[perf]\ndriver = "verbs"\n[rdma]\noob = "nohostport"\n' >"$tmp/badoob.toml"
run "bad oob" 2 "badoob.toml:4:7: key 'rdma.oob'" -c "$tmp/badoob.toml"
run "oob in loopback" 2 "needs --mode server or --mode client" --oob 127.0.0.1:18599
exit $fail
