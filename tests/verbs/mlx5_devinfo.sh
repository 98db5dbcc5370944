#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The mlx5 device kind (docs/VERBS.md, "Device kinds"): a [[port]] with
# kind = "mlx5" is a verbs device whose context Debian's unmodified
# libmlx5.so.1 makes, over rdgram's emulated mlx5_ib. Judged by unmodified
# ibv_devices, ibv_devinfo -v and pyverbs' Mlx5Context:
# - the mlx5 device: vendor 0x02c9, part 4119 (ConnectX-5), the firmware
#   version as libmlx5 formats it, PORT_ACTIVE, Ethernet, RoCE v2 GIDs
#   from the port's addresses; the soft device beside it unchanged;
# - pyverbs' Mlx5Context(...).query_mlx5_device() (mlx5dv_query_device);
# - a provider that cannot be loaded: one line, the soft device listed;
# - a bad kind: one line with file:line:column and the key, exit 2.
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
command -v ibv_devinfo >/dev/null || { echo "SKIP: ibv_devinfo missing (ibverbs-utils)"; exit 77; }
[ -e /usr/lib/x86_64-linux-gnu/libmlx5.so.1 ] || [ -n "$(ldconfig -p 2>/dev/null | grep libmlx5.so.1)" ] ||
  { echo "SKIP: libmlx5.so.1 missing (ibverbs-providers)"; exit 77; }
cat >"$tmp/two.toml" <<EOT
[[port]]
name = "rdg0"
devargs = "net_ring0"
mac = "02:00:00:00:00:01"
addresses = ["10.0.0.1", "fd00::1"]
mtu = 1024
[[port]]
name = "mlx5_0"
kind = "mlx5"
devargs = "net_null0,no-rx=1"
mac = "02:00:00:00:00:0a"
addresses = ["192.168.7.1", "fd00::7"]
mtu = 2048
EOT
timeout 30 "$RV" -c "$tmp/two.toml" ibv_devices >"$tmp/devices.out" 2>&1
echo "ibv_devices exit $?" >>"$tmp/devices.out"
expect "$tmp/devices.out" 'rdg0[[:space:]]+000000fffe000001' "ibv_devices lists the soft rdg0" &&
  expect "$tmp/devices.out" 'mlx5_0[[:space:]]+000000fffe00000a' "ibv_devices lists the mlx5 device" &&
  expect "$tmp/devices.out" 'ibv_devices exit 0' "ibv_devices exits 0" && echo "ok: ibv_devices"

timeout 30 "$RV" -c "$tmp/two.toml" ibv_devinfo -v -d mlx5_0 >"$tmp/mlx5.out" 2>&1
echo "ibv_devinfo exit $?" >>"$tmp/mlx5.out"
ok=1
# fw_ver "16.0.0000" is libmlx5's formatting of the kernel's raw fw_ver
# (mlx5_query_device_ex): the context is libmlx5's.
for re in 'hca_id:[[:space:]]+mlx5_0' 'fw_ver:[[:space:]]+16\.0\.0000' 'vendor_id:[[:space:]]+0x02c9' \
  'vendor_part_id:[[:space:]]+4119' 'max_sge:[[:space:]]+30' 'state:[[:space:]]+PORT_ACTIVE \(4\)' \
  'active_mtu:[[:space:]]+2048 \(4\)' 'link_layer:[[:space:]]+Ethernet' 'gid_tbl_len:[[:space:]]+256' \
  'GID\[  0\]:[[:space:]]+fe80::ff:fe00:a, RoCE v2' 'GID\[  1\]:[[:space:]]+::ffff:192\.168\.7\.1, RoCE v2' \
  'GID\[  2\]:[[:space:]]+fd00::7, RoCE v2' 'ibv_devinfo exit 0'; do
  expect "$tmp/mlx5.out" "$re" "ibv_devinfo -v (mlx5) shows $re" || ok=0
done
# DEVX is not offered: libmlx5's own fallbacks, one line each.
expect "$tmp/mlx5.out" 'alloc_ucontext with DEVX .* \(EINVAL\)' "the DEVX ucontext is refused in one line" || ok=0
if grep -q 'GID\[  3\]' "$tmp/mlx5.out"; then
  echo "FAIL: the mlx5 device lists a GID past the port's three"; fails=$((fails + 1)); ok=0
fi
[ $ok -eq 1 ] && echo "ok: ibv_devinfo -v on the mlx5 device"

timeout 30 "$RV" -c "$tmp/two.toml" ibv_devinfo -v -d rdg0 >"$tmp/soft.out" 2>&1
echo "ibv_devinfo exit $?" >>"$tmp/soft.out"
ok=1
for re in 'hca_id:[[:space:]]+rdg0' 'fw_ver:[[:space:]]+rdgram 0\.1' 'vendor_id:[[:space:]]+0xffffff' \
  'active_mtu:[[:space:]]+1024 \(3\)' 'GID\[  1\]:[[:space:]]+::ffff:10\.0\.0\.1, RoCE v2' 'ibv_devinfo exit 0'; do
  expect "$tmp/soft.out" "$re" "ibv_devinfo -v (soft) shows $re" || ok=0
done
[ $ok -eq 1 ] && echo "ok: the soft device beside it unchanged"

if /usr/bin/python3 -c 'import pyverbs.providers.mlx5.mlx5dv' 2>/dev/null; then
  cat >"$tmp/dv.py" <<'EOT'
from pyverbs.providers.mlx5.mlx5dv import Mlx5Context, Mlx5DVContextAttr
ctx = Mlx5Context(Mlx5DVContextAttr(), name='mlx5_0')
print(ctx.query_mlx5_device())
a = ctx.query_device()
print('vendor', hex(a.vendor_id), a.vendor_part_id)
ctx.close()
EOT
  timeout 30 "$RV" -c "$tmp/two.toml" /usr/bin/python3 "$tmp/dv.py" >"$tmp/dv.out" 2>&1
  echo "python exit $?" >>"$tmp/dv.out"
  expect "$tmp/dv.out" 'Flags[[:space:]]+: CQE v1' "query_mlx5_device: CQE version 1" &&
    expect "$tmp/dv.out" 'Max dynamic BF registers: 512' "query_mlx5_device: the ucontext's num_dyn_bfregs" &&
    expect "$tmp/dv.out" 'vendor 0x2c9 4119' "Mlx5Context's query_device" &&
    expect "$tmp/dv.out" 'python exit 0' "pyverbs exits 0" && echo "ok: pyverbs Mlx5Context.query_mlx5_device"
else
  echo "note: python3-pyverbs missing: Mlx5Context not run"
fi

RDGRAM_VERBS_MLX5_PROVIDER=/nonexistent/libmlx5.so.1 timeout 30 "$RV" -c "$tmp/two.toml" ibv_devices \
  >"$tmp/missing.out" 2>&1
echo "ibv_devices exit $?" >>"$tmp/missing.out"
expect "$tmp/missing.out" 'port mlx5_0: kind mlx5: cannot load the provider /nonexistent/libmlx5\.so\.1 .*the port is left out' \
  "a missing provider: one line" &&
  expect "$tmp/missing.out" 'rdg0[[:space:]]+000000fffe000001' "a missing provider: the soft device still listed" &&
  expect "$tmp/missing.out" 'ibv_devices exit 0' "a missing provider: ibv_devices exits 0" &&
  echo "ok: a missing provider"
if [ -n "${2:-}" ]; then
  RDGRAM_VERBS_MLX5_PROVIDER=$2 timeout 30 "$RV" -c "$tmp/two.toml" ibv_devices >"$tmp/abi.out" 2>&1
  echo "ibv_devices exit $?" >>"$tmp/abi.out"
  expect "$tmp/abi.out" 'cannot load the provider .*IBVERBS_PRIVATE_33.*the port is left out' \
    "a provider of another private ABI: one line" &&
    expect "$tmp/abi.out" 'rdg0[[:space:]]+000000fffe000001' "another ABI: the soft device still listed" &&
    expect "$tmp/abi.out" 'ibv_devices exit 0' "another ABI: ibv_devices exits 0" && echo "ok: a provider of another ABI"
fi

sed 's/kind = "mlx5"/kind = "mlx4"/' "$tmp/two.toml" >"$tmp/bad.toml"
timeout 30 "$RV" -c "$tmp/bad.toml" ibv_devices >"$tmp/bad.out" 2>&1
echo "exit $?" >>"$tmp/bad.out"
expect "$tmp/bad.out" 'bad\.toml:[0-9]+:[0-9]+: key .port\[1\]\.kind.: expected one of "soft", "mlx5"' \
  "a bad kind: file:line:column and the key" && expect "$tmp/bad.out" '^exit 2$' "a bad kind: exit 2" &&
  echo "ok: a bad kind"
finish
