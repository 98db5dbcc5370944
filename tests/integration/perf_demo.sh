#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# What `./build.sh demo` shows: rdgram-perf with no EAL arguments (the
# loopback demo) starts with its own banner, with no DPDK start-up lines
# (EAL, TELEMETRY, the CRC library's handler choice) and no word about a
# capture nobody asked for, then the two tables, then what bounded the
# bandwidth figure (CPU shares, a full ring, the CPUs' cache-line round trip), then the non-zero queue counters with their meaning,
# in that order even through a pipe. -v brings DPDK's lines back, and so
# does an EAL --log-level given before --; EAL arguments without one are
# quiet too; --capture on where capture cannot be had says why in one
# line. About 3 s on an idle 2-CPU machine.
# Usage: perf_demo.sh RDGRAM_PERF
set -u
perf=$1
[ "$(nproc)" -ge 2 ] || { echo "SKIP: the loopback demo needs two CPUs"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
noise='^(EAL: |TELEMETRY: |avx512|[a-z_0-9]*_get_handlers)'

# The demo itself (smaller -n: the same code, shorter).
"$perf" -n 20000 --timeout 20 >"$tmp/demo" 2>&1
rc=$?
cat "$tmp/demo"
[ $rc -eq 0 ] || { echo "FAIL: demo exit $rc"; fail=1; }
! grep -Eq "$noise" "$tmp/demo" || { echo "FAIL: DPDK start-up lines in the demo (above)"; fail=1; }
/usr/bin/python3 - "$tmp/demo" <<'PY' || fail=1
import sys
lines = open(sys.argv[1]).read().splitlines()
def at(pred, what):
    for i, l in enumerate(lines):
        if pred(l):
            return i
    sys.exit("FAIL: no " + what)
# The demo's own banner first: nothing about capture, which nobody asked
# for, whether or not hugepages are free, and no DPDK line before it.
first = 0
if len(lines) <= first or not lines[first].startswith(" rdgram-perf: loopback, soft RoCEv2 driver over net_ring"):
    sys.exit("FAIL: the demo does not start with its banner: %r" % (lines[first] if len(lines) > first else ""))
lat = at(lambda l: "t_typical[usec]" in l, "latency table")
bw = at(lambda l: "MsgRate[Mpps]" in l, "bandwidth table")
lim = at(lambda l: l.startswith(" bandwidth test: "), "'bandwidth test:' line (what bounded the figure)")
if not lat < bw < lim:
    sys.exit("FAIL: latency table, bandwidth table, bandwidth limits out of order")
if not any("MsgRate is the" in l for l in lines[lim:]):
    sys.exit("FAIL: the limits do not say whose rate MsgRate is")
if not any("cache line's round trip between cpu" in l for l in lines[lim:]):
    sys.exit("FAIL: the limits do not give the two CPUs' cache-line round trip")
ctr = [i for i, l in enumerate(lines) if " counters: " in l]
if ctr:
    head = at(lambda l: l.startswith(" queue counters"), "label above the counters")
    if not lim < head < ctr[0]:
        sys.exit("FAIL: the counters are not after the tables under their label")
    names = {kv.split("=")[0] for i in ctr for kv in lines[i].split(" counters: ")[1].split()}
    for n in names:
        if not any(l.strip().startswith(n + " ") for l in lines[ctr[-1] + 1:]):
            sys.exit("FAIL: counter %s printed without its meaning" % n)
print("order ok: latency table, bandwidth table, limits, %d counter line(s)" % len(ctr))
PY

# -v: DPDK's own start-up lines again.
"$perf" -v --test lat -n 2000 --timeout 20 >"$tmp/v" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$tmp/v"; echo "FAIL: -v exit $rc"; fail=1; }
grep -q '^EAL: ' "$tmp/v" || { cat "$tmp/v"; echo "FAIL: -v shows no EAL line"; fail=1; }

# --capture on where it cannot be had (EAL arguments with --no-huge rule
# it out): the one line that says why, exit 1.
"$perf" -l 0,1 --no-huge --no-shconf -m 256 --no-pci --file-prefix rdgram-demo$$ -- --capture on --test lat -n 2000 \
	--timeout 20 >"$tmp/on" 2>&1
rc=$?
[ $rc -eq 1 ] && [ "$(grep -c . "$tmp/on")" -eq 1 ] && grep -q '^rdgram-perf: capture on: the EAL arguments say --no-huge$' "$tmp/on" ||
	{ cat "$tmp/on"; echo "FAIL: --capture on with --no-huge: exit $rc, not one line saying why"; fail=1; }

# EAL arguments of one's own: quiet without --log-level, DPDK's levels with one.
eal="-l 0,1 --no-huge --no-shconf -m 256 --no-pci --file-prefix rdgram-demo$$"
"$perf" $eal -- --test lat -n 2000 --timeout 20 >"$tmp/e" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$tmp/e"; echo "FAIL: EAL args: exit $rc"; fail=1; }
! grep -Eq "$noise" "$tmp/e" || { cat "$tmp/e"; echo "FAIL: DPDK start-up lines with EAL args but no --log-level"; fail=1; }
"$perf" $eal --log-level=lib.eal:info -- --test lat -n 2000 --timeout 20 >"$tmp/l" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$tmp/l"; echo "FAIL: --log-level: exit $rc"; fail=1; }
grep -q '^EAL: ' "$tmp/l" || { cat "$tmp/l"; echo "FAIL: an EAL --log-level did not bring the EAL's lines back"; fail=1; }
[ $fail -eq 0 ] && echo "PASS"
exit $fail
