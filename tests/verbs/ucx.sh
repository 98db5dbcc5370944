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
# /dev/infiniband, and the test must not create one in the real /dev. So
# each program runs in a private mount namespace (unshare -m, private
# propagation) whose /dev is an overlay: the real /dev below, and above it a
# tmpfs holding infiniband/uverbsN made with mknod as the kernel's uverbs
# nodes are (char 231:192+N). Nothing outside the namespace sees it, and it
# goes when the program exits. An open(2) of it would fail (ENXIO: no
# kernel driver), which is the truth; UCX does not open it. (/dev/shm and
# /dev/pts are bound again on top: an overlay does not carry submounts.)
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
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (a private mount namespace)"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: unshare (util-linux) missing"; exit 77; }
memif_pair u

# The namespace maker: runs "$@" with /dev/infiniband/uverbs0..3 in a
# private /dev (see above).
cat >"$tmp/with-uverbs" <<'EOT'
#!/usr/bin/env bash
set -e
d=$(mktemp -d "$RDGRAM_UVERBS_TMP/ns.XXXXXX") # under the test's $tmp: removed at its exit
mount -t tmpfs -o mode=755 rdgram-uverbs "$d"
mkdir -p "$d/up/infiniband" "$d/work" "$d/dev"
for n in 0 1 2 3; do mknod -m 666 "$d/up/infiniband/uverbs$n" c 231 $((192 + n)); done
mount --rbind /dev "$d/dev"
mount -t overlay rdgram-uverbs -o lowerdir=/dev,upperdir="$d/up",workdir="$d/work" /dev
for m in shm pts mqueue hugepages; do
  if mountpoint -q "$d/dev/$m"; then mount --rbind "$d/dev/$m" "/dev/$m"; fi
done
unset RDGRAM_UVERBS_TMP
exec "$@"
EOT
chmod +x "$tmp/with-uverbs"
inns() { RDGRAM_UVERBS_TMP=$tmp unshare -m --propagation private "$tmp/with-uverbs" "$@"; }
if ! inns test -c /dev/infiniband/uverbs0; then
  echo "SKIP: no private mount namespace with an overlay /dev here"
  exit 77
fi

# -- ucx_info -d --
out=$tmp/info.out
inns timeout 60 "$RV" -c "$tmp/u-a.toml" ucx_info -d >"$out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "FAIL: ucx_info -d exit $rc"; tail -n 20 "$out" | sed 's/^/    /'; fails=$((fails + 1))
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
  UCX_NET_DEVICES=rdg0:1 inns timeout 120 "$RV" -c "$tmp/u-a.toml" \
    ucx_perftest -p "$port" -t "$t" -n "$n" >"$tmp/srv.out" 2>&1 &
  spid=$!
  wait_listen "$port" || echo "the server never listened on $port"
  UCX_NET_DEVICES=rdg1:1 inns timeout 120 "$RV" -c "$tmp/u-b.toml" \
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
