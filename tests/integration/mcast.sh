#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# rdgram-mcast: one publisher and two subscribers (--mode both: one process,
# net_ring ports, the process floods the publisher's frames to both
# subscriber ports as a switch would) on an IPv4 and an IPv6 group, with
# injected gaps and duplicates. Each subscriber must report exactly the
# injected missing and duplicate counts, the right message count, latency
# percentiles and a histogram CSV holding every sample; the driver must have
# queued, and the "switch" must have decoded, one IGMPv2 report + leave and
# one MLDv2 join + leave record per subscriber. The shipped config runs.
# Bad options and configs: one line, exit 2.
# Usage: mcast.sh RDGRAM_MCAST CONFIG_DIR
set -u
mc=$1
cfgdir=$2
eal="-l 0,1 --no-huge --no-shconf -m 512 --no-pci --log-level=lib.eal:error --log-level=pmd:error"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
n=4000

# check OUT SUB RECEIVED MISSING DUP
check() {
  local out=$1 s=$2 rx=$3 miss=$4 dup=$5 line lat
  line=$(grep "^$s: received=" "$out")
  [ "$line" = "$s: received=$rx missing=$miss dup=$dup reordered=0 too_old=0 malformed=0 foreign=0 rx_drops=0" ] \
    || { echo "FAIL: $s: got '$line', want received=$rx missing=$miss dup=$dup"; fail=1; }
  lat=$(grep "^$s: latency_ns" "$out")
  echo "$lat" | grep -Eq "samples=[1-9][0-9]* p50=[1-9][0-9]* p99=[1-9][0-9]* p99.9=[1-9][0-9]* max=[1-9][0-9]*" \
    || { echo "FAIL: $s: latency percentiles missing: '$lat'"; fail=1; }
  grep -q "^$s: driver sent igmp_report=1 igmp_leave=1 mld_report=1 mld_leave=1 tx_failed=0$" "$out" \
    || { echo "FAIL: $s: driver IGMP/MLD counters: $(grep "^$s: driver" "$out")"; fail=1; }
  grep -q "^$s: switch saw igmp_report=1 igmp_leave=1 mld_join=1 mld_leave=1 other=0$" "$out" \
    || { echo "FAIL: $s: frames on the wire: $(grep "^$s: switch" "$out")"; fail=1; }
}

# 1. Two gaps (seq 1000 and 2500) on both groups: 4 missing, no duplicate.
"$mc" $eal --file-prefix "rdgram-mc$$" -- -g 239.1.1.1 -g ff15::1:1 -n $n --rate 20000 \
  --skip-seq 1000 --skip-seq 2500 --status-interval 0.1 --hist-csv "$tmp/h.csv" >"$tmp/out1" 2>"$tmp/err1"
rc=$?
cat "$tmp/out1"; grep '^ \[' "$tmp/err1" | tail -3
[ $rc -eq 0 ] || { echo "FAIL: run 1 exit $rc"; cat "$tmp/err1"; fail=1; }
for s in sub0 sub1; do check "$tmp/out1" $s $(( (n - 2) * 2 )) 4 0; done
grep -q "^pub: last_seq=$n groups=2 tx_pkts=$(( (n - 2) * 2 )) tx_drops=0 refused=0 skipped=2" "$tmp/out1" \
  || { echo "FAIL: publisher line"; fail=1; }
grep -Eq '^ \[ +[0-9.]+ s\] sub0: .*missing [0-9]+, dup 0, p50 [0-9.]+ p99 [0-9.]+ p99.9 [0-9.]+ max [0-9.]+ us' "$tmp/err1" \
  || { echo "FAIL: no live status line with percentiles"; fail=1; }
for k in 0 1; do
  /usr/bin/python3 - "$tmp/h-sub$k.csv" $(( (n - 2) * 2 )) <<'PY' || fail=1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
total = sum(int(r["count"]) for r in rows)
if total != int(sys.argv[2]):
    sys.exit("FAIL: %s holds %d samples, want %s" % (sys.argv[1], total, sys.argv[2]))
if abs(float(rows[-1]["cumulative_fraction"]) - 1) > 1e-6:
    sys.exit("FAIL: cumulative fraction does not end at 1")
print("CSV ok: %s, %d samples" % (sys.argv[1], total))
PY
done

# 2. A duplicate (seq 10) and a gap (seq 20), one group: dup=1, missing=1
# (received counts deliveries: 499 numbers, one twice).
"$mc" $eal --file-prefix "rdgram-mc$$" -- -g 239.1.1.1 -n 500 --rate 20000 --dup-seq 10 --skip-seq 20 \
  --status-interval 0 >"$tmp/out2" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: run 2 exit $rc"; cat "$tmp/out2"; fail=1; }
for s in sub0 sub1; do
  line=$(grep "^$s: received=" "$tmp/out2")
  [ "$line" = "$s: received=500 missing=1 dup=1 reordered=0 too_old=0 malformed=0 foreign=0 rx_drops=0" ] \
    || { echo "FAIL: run 2 $s: '$line'"; fail=1; }
  echo "run 2: $line"
done

# 3. The shipped config runs (shortened; its skip_seq 5000 stays inside).
sed -e 's/^count = .*/count = 8000/' -e 's|^hist_csv = .*|hist_csv = "'"$tmp"'/c.csv"|' \
  "$cfgdir/rdgram-mcast.toml" >"$tmp/cfg.toml"
"$mc" $eal --file-prefix "rdgram-mc$$" -- -c "$tmp/cfg.toml" >"$tmp/out3" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "^sub0: received=15998 missing=2 dup=0" "$tmp/out3" && grep -q "^sub1: received=15998 missing=2 dup=0" "$tmp/out3" \
  || { echo "FAIL: config/rdgram-mcast.toml run: exit $rc"; cat "$tmp/out3"; fail=1; }

# 4. pub and sub as two processes over net_pcap: the publisher's capture is
# the subscriber's input (the "latency" is then the replay delay, not
# checked). The subscriber's own capture holds its IGMP/MLD frames, which
# tshark must decode with correct checksums.
python3 -c "import struct; open('$tmp/empty.pcap','wb').write(struct.pack('<IHHiIII',0xa1b2c3d4,2,4,0,0,65535,1))"
"$mc" $eal --file-prefix "rdgram-mcp$$" -- --mode pub --address 10.9.0.1 --address fd00:9::1 -n 1000 \
  --port "net_pcap_mc0,rx_pcap=$tmp/empty.pcap,tx_pcap=$tmp/pub.pcap" --skip-seq 77 --status-interval 0 \
  >"$tmp/out4" 2>&1 || { echo "FAIL: pub process"; cat "$tmp/out4"; fail=1; }
"$mc" $eal --file-prefix "rdgram-mcs$$" -- --mode sub --address 10.9.0.2 --address fd00:9::2 \
  --port "net_pcap_mc1,rx_pcap=$tmp/pub.pcap,tx_pcap=$tmp/sub.pcap" --idle-timeout 0.3 --status-interval 0 \
  >"$tmp/out5" 2>&1 || { echo "FAIL: sub process"; cat "$tmp/out5"; fail=1; }
grep -q "^sub0: received=1998 missing=2 dup=0 reordered=0" "$tmp/out5" \
  || { echo "FAIL: pub -> pcap -> sub: $(grep '^sub0: received' "$tmp/out5")"; fail=1; }
grep -q "^sub0: driver sent igmp_report=1 igmp_leave=1 mld_report=1 mld_leave=1" "$tmp/out5" \
  || { echo "FAIL: sub process membership counters"; fail=1; }
echo "pub/sub processes: $(grep '^sub0: received' "$tmp/out5")"
if command -v tshark >/dev/null; then
  got=$(tshark -r "$tmp/sub.pcap" -o ip.check_checksum:TRUE -T fields \
    -e igmp.type -e igmp.checksum.status -e igmp.maddr -e icmpv6.type -e icmpv6.checksum.status \
    -e icmpv6.mldr.mar.record_type -e icmpv6.mldr.mar.multicast_address 2>/dev/null | tr -s '\t' ' ' | sed 's/ *$//')
  want="0x16 1 239.1.1.1
 143 1 4 ff15::1:1
0x17 1 239.1.1.1
 143 1 3 ff15::1:1"
  [ "$got" = "$want" ] || { echo "FAIL: IGMP/MLD frames as tshark decodes them:"; echo "$got"; fail=1; }
  echo "tshark: IGMPv2 report+leave, MLDv2 join+leave records, checksums good"
else
  echo "SKIP (frame decode): tshark not installed"
fi

# 4b. pub and sub live, as two processes on a veth pair (net_af_packet),
# the publisher paced (200 messages per second per group): the subscriber
# must keep receiving between the bursts and stop only once idle. (A
# subscriber that took its first burst for the end passed the pcap case
# above, where everything arrives at once.) Needs root for the namespace.
if [ "$(id -u)" -eq 0 ] && ip netns add "rdgmc$$" 2>/dev/null; then
  ip -n "rdgmc$$" link add mcva type veth peer name mcvb
  ip -n "rdgmc$$" link set mcva up
  ip -n "rdgmc$$" link set mcvb up
  afp="qpairs=1,blocksz=4096,framesz=2048,framecnt=512"
  ip netns exec "rdgmc$$" "$mc" $eal --file-prefix "rdgram-mcl$$" --vdev "net_af_packet0,iface=mcvb,$afp" -- \
    --mode sub --address 10.9.0.2 --address fd00:9::2 --port net_af_packet0 --idle-timeout 1 --duration 30 \
    --status-interval 0 >"$tmp/out6" 2>&1 &
  lsub=$!
  sleep 2
  ip netns exec "rdgmc$$" "$mc" $eal --file-prefix "rdgram-mcm$$" --vdev "net_af_packet0,iface=mcva,$afp" -- \
    --mode pub --address 10.9.0.1 --address fd00:9::1 -n 300 --rate 200 --port net_af_packet0 \
    --status-interval 0 >"$tmp/out7" 2>&1 || { echo "FAIL: live pub process"; cat "$tmp/out7"; fail=1; }
  wait "$lsub"
  ip netns del "rdgmc$$"
  grep -q "^sub0: received=600 missing=0 dup=0 reordered=0" "$tmp/out6" \
    || { echo "FAIL: live pub -> veth -> sub: $(grep '^sub0: received' "$tmp/out6")"; fail=1; }
  echo "live pub/sub processes: $(grep '^sub0: received' "$tmp/out6")"
else
  echo "SKIP (live pub/sub over a veth): needs root and ip netns"
fi

# 4. Refusals: one line on stderr, exit 2.
printf '[mcast]\nrate = "fast"\n' >"$tmp/bad1.toml"
printf '[mcast]\nbogus = 1\n' >"$tmp/bad2.toml"
printf '[mcast]\ngroups = ["10.0.0.1"]\n' >"$tmp/bad3.toml"
for bad in "-g 10.0.0.1" "-g 239.1.1.1 -s 8" "--mode pub" "--mode sub --port net_null0" "--count 0" \
    "--hist-plot $tmp/x.pdf" "--mode pub --port net_null0 --address 10.0.0.1 --hist-csv $tmp/x.csv" \
    "--skip-seq 0" "--skip-seq x" "--rate -5" "--bogus" "-c $tmp/bad1.toml" "-c $tmp/bad2.toml" \
    "-c $tmp/bad3.toml" "-c $tmp/missing.toml" "-g ff15::1 --mode sub --port net_null0 --address 10.0.0.1" \
    "--driver verbs --port net_null0" "--driver verbs --qkey 5" "--device mlx5_0" "--local 10.0.0.1" \
    "--driver rxe"; do
  "$mc" $eal --file-prefix "rdgram-mc$$" -- $bad >"$tmp/bad" 2>&1
  rc=$?
  lines=$(grep -c 'rdgram-mcast' "$tmp/bad")
  [ $rc -eq 2 ] && [ "$lines" -eq 1 ] || { echo "FAIL: '$bad' exit $rc (want 2), $lines lines"; cat "$tmp/bad"; fail=1; }
  echo "refused ($rc): $bad: $(grep rdgram-mcast "$tmp/bad")"
done
"$mc" --help >"$tmp/help" 2>&1 || { echo "FAIL: --help exit"; fail=1; }
for o in --mode --group --subscribers --rate --count --duration --size --status-interval --skip-seq \
    --dup-seq --qkey --qpn --publisher-id --idle-timeout --port --address --hist-csv --hist-plot \
    --driver --device --local; do
  grep -q -- "$o" "$tmp/help" || { echo "FAIL: --help lacks $o"; fail=1; }
done
# 5. --driver verbs: groups through rdma_cm on an RDMA device. Without one
# (this machine) it must say so in one line and exit 1, leaving nothing
# behind; with one, the hw suite (verbs_hw) runs the join.
if ls /sys/class/infiniband/* >/dev/null 2>&1; then
  echo "SKIP (verbs without a device): this host has an RDMA device"
else
  "$mc" $eal --file-prefix "rdgram-mc$$" -- --driver verbs --mode sub --status-interval 0 >"$tmp/verbs" 2>&1
  rc=$?
  if [ $rc -eq 1 ] && grep -q "rdgram-mcast: sub0: driver verbs: cannot open RDMA device '(the first usable)': no RDMA device" "$tmp/verbs"; then
    echo "verbs without a device: $(grep 'rdgram-mcast:' "$tmp/verbs")"
  else
    echo "FAIL: --driver verbs without a device: exit $rc"; cat "$tmp/verbs"; fail=1
  fi
  # The checked-in verbs config parses (a config error would exit 2).
  "$mc" -c "$cfgdir/mcast-verbs.toml" >"$tmp/verbs" 2>&1
  rc=$?
  [ $rc -eq 1 ] && grep -q "no RDMA device" "$tmp/verbs" ||
    { echo "FAIL: -c mcast-verbs.toml without a device: exit $rc (want 1)"; cat "$tmp/verbs"; fail=1; }
fi
[ $fail -eq 0 ] && echo "mcast: all checks passed"
exit $fail
