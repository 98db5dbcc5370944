#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# rdgram-perf's latency histogram: --hist-csv must account for every
# measured iteration (counts sum to -n, cumulative fraction ends at 1,
# buckets ascending) and --hist-plot must produce a well-formed SVG through
# gnuplot (skipped, with the expected clear refusal checked, when gnuplot is
# not installed). Bad histogram options are refused with exit 2.
# Usage: perf_hist.sh RDGRAM_PERF
set -u
perf=$1
eal="-l 0,1 --no-huge --no-shconf -m 512 --no-pci --log-level=lib.eal:error"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
n=3000
"$perf" $eal --file-prefix "rdgram-hist$$" -- --test lat -n $n --warmup 100 \
  --hist-csv "$tmp/h.csv" --hist-plot "$tmp/h.svg" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
if command -v gnuplot >/dev/null; then
  [ $rc -eq 0 ] || { echo "FAIL: rdgram-perf exit $rc"; fail=1; }
  /usr/bin/python3 - "$tmp/h.svg" <<'PY' || fail=1
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
if not root.tag.endswith("svg"):
    sys.exit("FAIL: root element %s is not svg" % root.tag)
print("SVG ok: %d elements" % sum(1 for _ in root.iter()))
PY
else
  [ $rc -eq 3 ] || { echo "FAIL: without gnuplot the plot part must exit 3, got $rc"; fail=1; }
  grep -q 'gnuplot is not installed' "$tmp/out" || { echo "FAIL: no clear gnuplot message"; fail=1; }
  echo "SKIP (plot part): gnuplot not installed"
fi
/usr/bin/python3 - "$tmp/h.csv" $n <<'PY' || fail=1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
n = int(sys.argv[2])
total = sum(int(r["count"]) for r in rows)
if total != n:
    sys.exit("FAIL: histogram holds %d samples, want %d" % (total, n))
lows = [int(r["lower_ns"]) for r in rows]
if lows != sorted(lows) or len(set(lows)) != len(lows):
    sys.exit("FAIL: buckets not strictly ascending")
if abs(float(rows[-1]["cumulative_fraction"]) - 1.0) > 1e-6:
    sys.exit("FAIL: cumulative fraction ends at %s" % rows[-1]["cumulative_fraction"])
if lows[0] <= 0:
    sys.exit("FAIL: a zero-nanosecond RTT/2")
print("CSV ok: %d samples in %d buckets, %d..%d ns" % (total, len(rows), lows[0], lows[-1]))
PY
# Refusals: one clear line, exit 2.
for bad in "--test bw --hist-csv $tmp/x.csv" "--test lat -n 10 --hist-plot $tmp/x.pdf" "--status-interval -1"; do
  "$perf" $eal --file-prefix "rdgram-hist$$" -- $bad >"$tmp/bad" 2>&1
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/bad")" -ge 1 ] \
    || { echo "FAIL: '$bad' exit $rc, want 2"; cat "$tmp/bad"; fail=1; }
  echo "refused ($rc): $bad: $(grep rdgram-perf "$tmp/bad")"
done
exit $fail
