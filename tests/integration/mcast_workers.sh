#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# rdgram-mcast with --workers 2 on the soft driver, `-l 0,1`: two poll
# threads, the main lcore one of them, each with its own queue of every
# port and its own QPs.
#  1. --mode both, groups split (the default): publisher worker w sends the
#     groups g % 2 == w, subscriber worker w takes the same. The in-process
#     switch puts both groups' frames on receive queue 1 (the low byte of
#     their MAC, as RSS would spread), so worker 1's queue hands group 0's
#     frames to worker 0's (rx_handoff_out/in). Per worker: its groups, the
#     publisher's messages to them = what it received, the injected gap and
#     duplicate on each of its groups, latency samples; summed per
#     subscriber; every hand-off out came in.
#  2. --worker-groups all: each worker's QP attaches both groups and
#     receives every datagram (the driver's group copies).
#  3. The `workers` and `worker_groups` keys of [mcast].
#  4. pub and sub as processes with 2 workers each over net_pcap, one
#     capture per queue: the subscriber reads the publisher's queue 1
#     capture on its queue 0 and the other way round, so every frame is
#     handed to the worker that owns its group.
#  5. Bad input: one line, exit 2.
# Usage: mcast_workers.sh RDGRAM_MCAST
set -u
mc=$1
eal="-l 0,1 --no-huge --no-shconf -m 512 --no-pci --log-level=lib.eal:error --log-level=pmd:error"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
n=2000

# want OUT LINE: OUT holds exactly LINE.
want() {
  grep -qxF -- "$2" "$1" || { echo "FAIL: want '$2'"; grep -F -- "${2%%:*}:" "$1" | sed 's/^/  got: /'; fail=1; }
}
# field OUT PREFIX NAME: the value of NAME=... on the line starting PREFIX.
field() {
  grep "^$2" "$1" | head -1 | tr ' ' '\n' | sed -n "s/^$3=//p"
}

# 1. Split: gap at 500, duplicate at 700, on both groups.
"$mc" $eal --file-prefix "rdgram-mcw$$" -- -g 239.1.1.1 -g ff15::1:1 -n $n --rate 10000 --workers 2 \
  --skip-seq 500 --dup-seq 700 --status-interval 0.2 --hist-csv "$tmp/h.csv" >"$tmp/out1" 2>"$tmp/err1"
rc=$?
cat "$tmp/out1"
[ $rc -eq 0 ] || { echo "FAIL: run 1 exit $rc"; cat "$tmp/err1"; fail=1; }
grep -q "2 workers on lcores 1,0 (subscriber groups: split)" "$tmp/out1" \
  || { echo "FAIL: the header does not name 2 workers on lcores 1,0 (the main lcore last)"; fail=1; }
want "$tmp/out1" "pub/w0: lcore=1 groups=239.1.1.1 last_seq=$n tx_pkts=$n tx_drops=0 refused=0"
want "$tmp/out1" "pub/w1: lcore=0 groups=ff15::1:1 last_seq=$n tx_pkts=$n tx_drops=0 refused=0"
want "$tmp/out1" "pub: last_seq=$n groups=2 tx_pkts=$((2 * n)) tx_drops=0 refused=0 skipped=1 duplicated=1"
for s in sub0 sub1; do
  want "$tmp/out1" "$s/w0: lcore=1 groups=239.1.1.1 received=$n missing=1 dup=1 reordered=0 too_old=0 malformed=0 foreign=0 rx_drops=0"
  want "$tmp/out1" "$s/w1: lcore=0 groups=ff15::1:1 received=$n missing=1 dup=1 reordered=0 too_old=0 malformed=0 foreign=0 rx_drops=0"
  for w in 0 1; do
    want "$tmp/out1" "$s/w$w: accounting published=$n received=$n rx_drops=0: closes"
    # every delivered message but the duplicate's second copy has a sample
    [ "$(field "$tmp/out1" "$s/w$w: latency_ns" samples)" = $((n - 1)) ] \
      || { echo "FAIL: $s/w$w latency samples: $(grep "^$s/w$w: latency_ns" "$tmp/out1")"; fail=1; }
  done
  want "$tmp/out1" "$s: received=$((2 * n)) missing=2 dup=2 reordered=0 too_old=0 malformed=0 foreign=0 rx_drops=0"
  want "$tmp/out1" "$s: accounting published=$((2 * n)) received=$((2 * n)) named_drops=0: closes"
  want "$tmp/out1" "$s: driver sent igmp_report=1 igmp_leave=1 mld_report=1 mld_leave=1 tx_failed=0"
  want "$tmp/out1" "$s: switch saw igmp_report=1 igmp_leave=1 mld_join=1 mld_leave=1 other=0"
  # Queue 1 got both groups: group 0's frames went to worker 0, all of them.
  out=$(field "$tmp/out1" "$s/w1: rx events" rx_handoff_out)
  in=$(field "$tmp/out1" "$s/w0: rx events" rx_handoff_in)
  [ "$out" = $n ] && [ "$in" = $n ] \
    || { echo "FAIL: $s hand-off: out=$out in=$in, want $n each"; grep "^$s/w.: rx events" "$tmp/out1"; fail=1; }
done
grep -Eq '^ \[ +[0-9.]+ s\] sub0/w1: [0-9]+ msgs' "$tmp/err1" || { echo "FAIL: no status line per worker"; fail=1; }
/usr/bin/python3 - "$tmp/h-sub0.csv" $((2 * n - 2)) <<'PY' || fail=1
import csv, sys
total = sum(int(r["count"]) for r in csv.DictReader(open(sys.argv[1])))
if total != int(sys.argv[2]):
    sys.exit("FAIL: %s holds %d samples, want %s (both workers')" % (sys.argv[1], total, sys.argv[2]))
print("CSV ok: %s, both workers' %d samples" % (sys.argv[1], total))
PY

# 2. All: each worker's QP attaches both groups; one subscriber.
"$mc" $eal --file-prefix "rdgram-mcw$$" -- -n $n --rate 10000 --workers 2 --worker-groups all \
  --subscribers 1 --skip-seq 9 --status-interval 0 >"$tmp/out2" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: run 2 exit $rc"; cat "$tmp/out2"; fail=1; }
grep '^sub0' "$tmp/out2"
for w in 0 1; do
  want "$tmp/out2" "sub0/w$w: lcore=$((1 - w)) groups=239.1.1.1,ff15::1:1 received=$((2 * n - 2)) missing=2 dup=0 reordered=0 too_old=0 malformed=0 foreign=0 rx_drops=0"
  want "$tmp/out2" "sub0/w$w: accounting published=$((2 * n - 2)) received=$((2 * n - 2)) rx_drops=0: closes"
done
want "$tmp/out2" "sub0: received=$((4 * n - 4)) missing=4 dup=0 reordered=0 too_old=0 malformed=0 foreign=0 rx_drops=0"
want "$tmp/out2" "sub0: accounting published=$((4 * n - 4)) received=$((4 * n - 4)) named_drops=0: closes"
# one IGMP/MLD join per group on the wire, though two QPs attached each
want "$tmp/out2" "sub0: driver sent igmp_report=1 igmp_leave=1 mld_report=1 mld_leave=1 tx_failed=0"
[ "$(field "$tmp/out2" "sub0/w1: rx events" rx_group_copies)" = $((2 * n - 2)) ] \
  || { echo "FAIL: worker 1's queue made no copy per frame for worker 0's QP: $(grep '^sub0/w1: rx events' "$tmp/out2")"; fail=1; }

# 3. The config keys.
printf '[mcast]\nworkers = 2\nworker_groups = "all"\ncount = 500\nrate = 10000\nsubscribers = 1\nstatus_interval = 0\n' >"$tmp/w.toml"
"$mc" $eal --file-prefix "rdgram-mcw$$" -- -c "$tmp/w.toml" >"$tmp/out3" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "2 workers on lcores 1,0 (subscriber groups: all)" "$tmp/out3" \
  && grep -qxF "sub0: accounting published=2000 received=2000 named_drops=0: closes" "$tmp/out3" \
  || { echo "FAIL: workers/worker_groups keys: exit $rc"; cat "$tmp/out3"; fail=1; }

# 4. pub and sub processes, 2 workers each, a capture per queue: the
# subscriber's queue 0 reads what the publisher's queue 1 (group 1) sent.
python3 -c "import struct; open('$tmp/empty.pcap','wb').write(struct.pack('<IHHiIII',0xa1b2c3d4,2,4,0,0,65535,1))"
"$mc" $eal --file-prefix "rdgram-mcwp$$" -- --mode pub --address 10.9.0.1 --address fd00:9::1 -n 500 \
  --workers 2 --skip-seq 77 --status-interval 0 \
  --port "net_pcap_mcw0,rx_pcap=$tmp/empty.pcap,rx_pcap=$tmp/empty.pcap,tx_pcap=$tmp/p0.pcap,tx_pcap=$tmp/p1.pcap" \
  >"$tmp/out4" 2>&1 || { echo "FAIL: pub process"; cat "$tmp/out4"; fail=1; }
want "$tmp/out4" "pub: last_seq=500 groups=2 tx_pkts=998 tx_drops=0 refused=0 skipped=1 duplicated=0"
"$mc" $eal --file-prefix "rdgram-mcws$$" -- --mode sub --address 10.9.0.2 --address fd00:9::2 --workers 2 \
  --port "net_pcap_mcw1,rx_pcap=$tmp/p1.pcap,rx_pcap=$tmp/p0.pcap,tx_pcap=$tmp/s0.pcap,tx_pcap=$tmp/s1.pcap" \
  --idle-timeout 0.3 --status-interval 0 >"$tmp/out5" 2>&1 || { echo "FAIL: sub process"; cat "$tmp/out5"; fail=1; }
grep '^sub0' "$tmp/out5"
want "$tmp/out5" "sub0/w0: lcore=1 groups=239.1.1.1 received=499 missing=1 dup=0 reordered=0 too_old=0 malformed=0 foreign=0 rx_drops=0"
want "$tmp/out5" "sub0/w1: lcore=0 groups=ff15::1:1 received=499 missing=1 dup=0 reordered=0 too_old=0 malformed=0 foreign=0 rx_drops=0"
want "$tmp/out5" "sub0/w0: rx events: rx_handoff_out=499 rx_handoff_in=499"
want "$tmp/out5" "sub0/w1: rx events: rx_handoff_out=499 rx_handoff_in=499"

# 5. Refusals: one line on stderr, exit 2.
printf '[mcast]\nworkers = 0\n' >"$tmp/bad1.toml"
printf '[mcast]\nworker_groups = "some"\n' >"$tmp/bad2.toml"
for bad in "--workers 3 -g 239.1.1.1 -g 239.1.1.2 -g 239.1.1.3" "--workers 3" "--workers 2 -g 239.1.1.1" \
    "--workers 0" "--workers x" "--worker-groups some" "--mode sub --port net_null0 --address 10.0.0.1 -g 239.1.1.1 --workers 2" \
    "--workers 2 --qpn 0xfffffe" "-c $tmp/bad1.toml" "-c $tmp/bad2.toml" "--driver mlx5" "--driver efa" "--driver rxe"; do
  "$mc" $eal --file-prefix "rdgram-mcw$$" -- $bad >"$tmp/bad" 2>&1
  rc=$?
  lines=$(grep -c 'rdgram-mcast' "$tmp/bad")
  [ $rc -eq 2 ] && [ "$lines" -eq 1 ] || { echo "FAIL: '$bad' exit $rc (want 2), $lines lines"; cat "$tmp/bad"; fail=1; }
  echo "refused ($rc): $bad: $(grep rdgram-mcast "$tmp/bad")"
done
grep -q "only 2 lcore" <("$mc" $eal --file-prefix "rdgram-mcw$$" -- --workers 3 -g 239.1.1.1 -g 239.1.1.2 -g 239.1.1.3 2>&1) \
  || { echo "FAIL: --workers beyond the lcores does not say how many lcores there are"; fail=1; }
"$mc" --help >"$tmp/help" 2>&1
for o in --workers --worker-groups; do
  grep -q -- "$o" "$tmp/help" || { echo "FAIL: --help lacks $o"; fail=1; }
done
[ $fail -eq 0 ] && echo "mcast_workers: all checks passed"
exit $fail
