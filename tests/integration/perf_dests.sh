#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# rdgram-perf --test txonly --dests N: every message sent and no drop on
# net_null, every mbuf back in the pool, and the destinations really cycled:
# a net_pcap capture of k full cycles holds N distinct destination IPs (and
# MACs), each exactly k times, in round-robin and in random order, IPv4 and
# IPv6. --dests outside client txonly is refused with exit 2.
# Usage: perf_dests.sh RDGRAM_PERF CONFIG_DIR
set -u
perf=$1
cfgdir=$2
eal="-l 0 --no-huge --no-shconf --no-pci -m 512 --log-level=lib.eal:error"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -c "import struct,sys; open(sys.argv[1],'wb').write(struct.pack('<IHHiIII',0xa1b2c3d4,2,4,0,0,65535,1))" "$tmp/empty.pcap"
fail=0
n=1000

# net_null: counts, drops, mbufs.
for order in rr random; do
  "$perf" $eal --file-prefix "rdgram-dests$$" -- --mode client --test txonly -n 200000 -s 64 \
    --port net_null0 --status-interval 0 --dests $n --dest-order $order >"$tmp/out" 2>&1
  rc=$?
  cat "$tmp/out"
  [ $rc -eq 0 ] || { echo "FAIL: net_null $order: exit $rc"; fail=1; }
  grep -q "^ txonly: $n destinations, $order order, 200000 messages" "$tmp/out" \
    || { echo "FAIL: net_null $order: not every message sent"; fail=1; }
  grep -Eq "mbufs in the pool ([0-9]+) of \1$" "$tmp/out" \
    || { echo "FAIL: net_null $order: mbufs not back in the pool"; fail=1; }
  ! grep -q "counters:" "$tmp/out" || { echo "FAIL: net_null $order: drops counted"; fail=1; }
done

# net_pcap: the destinations on the wire.
k=3
for combo in "loopback.toml|rr" "loopback.toml|random" "loopback-ipv6.toml|random"; do
  IFS='|' read -r cfg order <<<"$combo"
  out=$tmp/$order-$cfg.pcap
  "$perf" $eal --file-prefix "rdgram-dests$$" -- -c "$cfgdir/$cfg" --mode client --test txonly \
    -n $((n * k)) -s 64 --status-interval 0 --dests $n --dest-order $order \
    --port "net_pcap0,rx_pcap=$tmp/empty.pcap,tx_pcap=$out" >"$tmp/out" 2>&1 \
    || { echo "FAIL: net_pcap $cfg $order"; cat "$tmp/out"; fail=1; continue; }
  /usr/bin/python3 - "$out" $n $k "$order" <<'PY' || fail=1
import collections, struct, sys
path, n, k, order = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
data = open(path, "rb").read()
off, ips, macs, seq = 24, collections.Counter(), set(), []
while off + 16 <= len(data):
    incl = struct.unpack_from("<I", data, off + 8)[0]
    f = data[off + 16:off + 16 + incl]
    off += 16 + incl
    et = struct.unpack_from(">H", f, 12)[0]
    ip = f[30:34] if et == 0x0800 else f[38:54]
    ips[ip] += 1
    macs.add(f[0:6])
    seq.append(ip)
bad = []
if sum(ips.values()) != n * k:
    bad.append("%d frames, want %d" % (sum(ips.values()), n * k))
if len(ips) != n or set(ips.values()) != {k}:
    bad.append("%d distinct destination IPs (want %d), counts %s" % (len(ips), n, sorted(set(ips.values()))))
if len(macs) != n:
    bad.append("%d distinct destination MACs, want %d" % (len(macs), n))
if seq[:n] != seq[n:2 * n]:
    bad.append("the order is not the same in every cycle")
ordered = all(int.from_bytes(seq[i], "big") < int.from_bytes(seq[i + 1], "big") for i in range(n - 1))
if (order == "rr") != ordered:
    bad.append("order %s, but the first cycle is %sascending" % (order, "" if ordered else "not "))
if bad:
    sys.exit("FAIL: %s %s: %s" % (path, order, "; ".join(bad)))
print("%s: %d frames, %d destinations x %d, order %s ok" % (path.rsplit("/", 1)[1], n * k, n, k, order))
PY
done

# Refused where it means nothing.
"$perf" $eal --file-prefix "rdgram-dests$$" -- --test bw --dests 10 >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 2 ] || { echo "FAIL: --dests with --test bw: exit $rc, want 2"; cat "$tmp/out"; fail=1; }
exit $fail
