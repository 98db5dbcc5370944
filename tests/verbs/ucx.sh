#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# UCX (Debian's ucx-utils 1.13, unmodified) on rdgram-verbs: `ucx_info -d`
# lists the device with its ud_verbs transport, and ucx_perftest's tag_lat
# and tag_bw with UCX_TLS=ud_v run between two processes over a net_memif
# pair; both sides exit 0 and the client prints its "Final:" row.
#
# /dev/infiniband: UCX 1.13 lists an IB device only when
# /dev/infiniband/<ibv_device.dev_name> is a character device it may read
# and write (uct_ib_device_is_accessible, src/uct/ib/base/ib_md.c: stat,
# S_ISCHR, access(R_OK|W_OK)); it never opens it. This host has no
# /dev/infiniband; rdgram-verbs gives its program uverbsN in a private
# mount namespace (rdgram-verbs(1)), which needs root. Nothing here makes
# a node by hand: the run as typed must list the device.
#
# The GID: UCX 1.13's UD transport tells an IPv4 datagram from an IPv6 one
# by the completion's sl (mlx5 puts the RoCE packet type there; rxe, irdma
# and rdgram report 0), so with an IPv4 GID it reads the DGID from the
# wrong bytes of the GRH area and drops every datagram
# (uct_ud_iface_check_grh, src/uct/ib/ud/base/ud_iface.h; fixed in UCX by
# openucx/ucx#10209, 2024). As on rxe, the port's IPv6 GID is used:
# UCX_IB_GID_INDEX=2 (fe80::/64 is 0, 10.0.0.x is 1, fd00::x is 2).
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
command -v ucx_info >/dev/null && command -v ucx_perftest >/dev/null ||
  { echo "SKIP: ucx-utils (ucx_info, ucx_perftest) missing"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (rdgram-verbs' private mount namespace)"; exit 77; }
memif_pair u

# -- ucx_info -d --
out=$tmp/info.out
timeout 60 "$RV" -c "$tmp/u-a.toml" ucx_info -d >"$out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "FAIL: ucx_info -d exit $rc"; tail -n 20 "$out" | sed 's/^/    /'; fails=$((fails + 1))
elif grep -q 'no private /dev/infiniband' "$out"; then
  echo "SKIP: $(grep 'no private /dev/infiniband' "$out")"
  exit 77
elif expect "$out" '^# Memory domain: rdg0$' "ucx_info -d lists rdg0" &&
  expect "$out" '^#      Transport: ud_verbs$' "ucx_info -d lists ud_verbs" &&
  expect "$out" '^#         Device: rdg0:1$' "ucx_info -d: ud_verbs on rdg0:1"; then
  echo "ok: ucx_info -d lists rdg0 with ud_verbs on rdg0:1"
fi

# -- ucx_perftest: the server, then the client giving the server's host --
port=$((20000 + $$ % 20000))
export UCX_TLS=ud_v UCX_IB_GID_INDEX=2
for t in tag_lat tag_bw; do
  n=20000
  UCX_NET_DEVICES=rdg0:1 timeout 120 "$RV" -c "$tmp/u-a.toml" \
    ucx_perftest -p "$port" -t "$t" -n "$n" >"$tmp/srv.out" 2>&1 &
  spid=$!
  wait_listen "$port" || echo "the server never listened on $port"
  UCX_NET_DEVICES=rdg1:1 timeout 120 "$RV" -c "$tmp/u-b.toml" \
    ucx_perftest -p "$port" -t "$t" -n "$n" 127.0.0.1 >"$tmp/cli.out" 2>&1
  crc=$?
  wait "$spid"
  src=$?
  spid=
  what="ucx_perftest -t $t, UCX_TLS=ud_v, over net_memif"
  pair_ok "$what" || continue
  expect "$tmp/srv.out" 'Test: +tag match (latency|bandwidth)' "$what: the server's test header" || continue
  if ! expect "$tmp/cli.out" "^Final: +$n " "$what: the client's Final row for $n iterations"; then
    continue
  fi
  # Final: iterations, latency 50%ile/average/overall (us), bandwidth
  # average/overall (MB/s), message rate average/overall (msg/s).
  echo "   $(awk '/^Final:/ { printf "%s iterations: latency p50 %s us, avg %s us; %s msg/s overall", $2, $3, $4, $9 }' "$tmp/cli.out")"
done
finish
