#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ibv_devices and ibv_devinfo -v, unmodified, on rdgram-verbs: the devices of
# the config, each port ACTIVE with its MTU, link layer Ethernet and the GID
# table (link-local first, then the addresses) as RoCE v2.
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
command -v ibv_devinfo >/dev/null || { echo "SKIP: ibv_devinfo missing (ibverbs-utils)"; exit 77; }
cat >"$tmp/two.toml" <<EOT
[[port]]
name = "rdg0"
devargs = "net_ring0"
mac = "02:00:00:00:00:01"
addresses = ["10.0.0.1", "fd00::1"]
mtu = 1024
[[port]]
name = "rdgx"
devargs = "net_null0,no-rx=1"
mac = "02:00:00:00:00:0a"
addresses = ["192.168.7.1"]
mtu = 4096
EOT
timeout 30 "$RV" -c "$tmp/two.toml" ibv_devices >"$tmp/devices.out" 2>&1
echo "ibv_devices exit $?" >>"$tmp/devices.out"
expect "$tmp/devices.out" 'rdg0[[:space:]]+000000fffe000001' "ibv_devices lists rdg0 with its EUI-64 GUID" &&
  expect "$tmp/devices.out" 'rdgx[[:space:]]+000000fffe00000a' "ibv_devices lists rdgx" &&
  expect "$tmp/devices.out" 'ibv_devices exit 0' "ibv_devices exits 0" && echo "ok: ibv_devices"
timeout 30 "$RV" -c "$tmp/two.toml" ibv_devinfo -v >"$tmp/devinfo.out" 2>&1
echo "ibv_devinfo exit $?" >>"$tmp/devinfo.out"
ok=1
for re in 'hca_id:[[:space:]]+rdg0' 'hca_id:[[:space:]]+rdgx' 'transport:[[:space:]]+InfiniBand' \
  'state:[[:space:]]+PORT_ACTIVE \(4\)' 'active_mtu:[[:space:]]+1024 \(3\)' 'active_mtu:[[:space:]]+4096 \(5\)' \
  'link_layer:[[:space:]]+Ethernet' 'GID\[  0\]:[[:space:]]+fe80::ff:fe00:1, RoCE v2' \
  'GID\[  1\]:[[:space:]]+::ffff:10.0.0.1, RoCE v2' 'GID\[  2\]:[[:space:]]+fd00::1, RoCE v2' \
  'GID\[  1\]:[[:space:]]+::ffff:192.168.7.1, RoCE v2' 'max_ah:[[:space:]]+65536' 'ibv_devinfo exit 0'; do
  expect "$tmp/devinfo.out" "$re" "ibv_devinfo -v shows $re" || ok=0
done
[ $ok -eq 1 ] && echo "ok: ibv_devinfo -v"
finish
