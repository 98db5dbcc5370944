#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Send rate as destinations grow, for docs/PERFORMANCE.md.

rdgram-perf --test txonly on net_null (soft driver, 64 B payload, ICRC on),
pinned with taskset, --dests N for N = 1, 1k, 100k, 1M in round-robin and
random order; the cases alternate inside each round and every ratio is taken
against N = 1 of the same round. Rates are messages per CPU second of the
sending thread (rdgram-perf's cpu_msg_rate_mpps; --wall: per wall-clock
second), so time the shared machine gives other processes is not counted. A run counts only if it exits 0, prints no
drop counter and has every mbuf back in the pool.

--before PERF also runs every case with another rdgram-perf binary (e.g. one
built from an older tree), alternating with this build's inside each round,
and adds its rate and the pairwise ratio this/before.

Usage: benchmarks/txonly_dests.py [--build build] [--rounds 7] [-n 60000000] [--cpu 1] [--before PERF]
Prints a markdown table.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [(1, "rr"), (1000, "rr"), (1000, "random"), (100000, "rr"), (100000, "random"),
         (1000000, "rr"), (1000000, "random")]


KEY = "cpu_msg_rate_mpps"


def run(perf, cpu, n, order, iters):
    cmd = ["taskset", "-c", str(cpu), perf, "-l", str(cpu), "--no-huge", "--no-shconf", "--no-pci", "-m", "1024",
           "--log-level=lib.eal:error", "--file-prefix", f"txd{os.getpid()}", "--", "--mode", "client", "--test",
           "txonly", "-n", str(iters), "-s", "64", "--port", "net_null0", "--status-interval", "0", "--json",
           "--dests", str(n), "--dest-order", order]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    rate = next((json.loads(l).get(KEY) for l in p.stdout.splitlines() if l.startswith("{")), None)
    if (p.returncode != 0 or rate is None or "counters:" in p.stderr
            or not re.search(r"mbufs in the pool (\d+) of \1$", p.stderr, re.M)):
        sys.exit(f"N={n} {order}: run not clean (exit {p.returncode}):\n{p.stderr[-2000:]}")
    return rate


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("-n", type=int, default=60000000)
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--before", help="another rdgram-perf binary, run alternately with this build's")
    ap.add_argument("--wall", action="store_true",
                    help="rates per wall-clock second (default: per CPU second of the sending thread)")
    a = ap.parse_args()
    if a.wall:
        global KEY
        KEY = "msg_rate_mpps"
    perf = os.path.join(a.build, "apps", "rdgram-perf", "rdgram-perf")
    res = {c: [] for c in CASES}
    old = {c: [] for c in CASES}
    for r in range(a.rounds):
        for n, o in CASES:
            res[(n, o)].append(run(perf, a.cpu, n, o, a.n))
            if a.before:
                old[(n, o)].append(run(a.before, a.cpu, n, o, a.n))
        print(f"round {r + 1}: " + ", ".join(f"{n}/{o} {res[(n, o)][r]:.2f}" +
                                           (f" (before {old[(n, o)][r]:.2f})" if a.before else "")
                                           for n, o in CASES), file=sys.stderr)
    base = res[(1, "rr")]
    head = "| destinations | order | Mpps, median | ratio to N=1, median |"
    if a.before:
        head += " before: Mpps, median | before: ratio to N=1 | this/before, median |"
    print(head + " Mpps per round |")
    print("|---" * head.count("|") + "|")
    for n, o in CASES:
        v = res[(n, o)]
        ratio = statistics.median(x / b for x, b in zip(v, base))
        row = f"| {n:,} | {o} | {statistics.median(v):.2f} | {ratio:.2f}x |"
        if a.before:
            w = old[(n, o)]
            wr = statistics.median(x / b for x, b in zip(w, old[(1, "rr")]))
            row += f" {statistics.median(w):.2f} | {wr:.2f}x | {statistics.median(x / y for x, y in zip(v, w)):.2f}x |"
        print(row + f" {' / '.join(f'{x:.1f}' for x in v)} |")


if __name__ == "__main__":
    main()
