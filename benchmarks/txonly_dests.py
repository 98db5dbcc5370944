#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Send rate as destinations grow, for docs/PERFORMANCE.md.

rdgram-perf --test txonly on net_null (soft driver, 64 B payload, ICRC on),
pinned with taskset, --dests N for N = 1, 1k, 100k, 1M in round-robin and
random order; the cases alternate inside each round and every ratio is taken
against N = 1 of the same round. A run counts only if it exits 0, prints no
drop counter and has every mbuf back in the pool.

Usage: benchmarks/txonly_dests.py [--build build] [--rounds 7] [-n 60000000] [--cpu 1]
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


def run(perf, cpu, n, order, iters):
    cmd = ["taskset", "-c", str(cpu), perf, "-l", str(cpu), "--no-huge", "--no-shconf", "--no-pci", "-m", "1024",
           "--log-level=lib.eal:error", "--file-prefix", f"txd{os.getpid()}", "--", "--mode", "client", "--test",
           "txonly", "-n", str(iters), "-s", "64", "--port", "net_null0", "--status-interval", "0", "--json",
           "--dests", str(n), "--dest-order", order]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    rate = next((json.loads(l)["msg_rate_mpps"] for l in p.stdout.splitlines() if l.startswith("{")), None)
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
    a = ap.parse_args()
    perf = os.path.join(a.build, "apps", "rdgram-perf", "rdgram-perf")
    res = {c: [] for c in CASES}
    for r in range(a.rounds):
        for n, o in CASES:
            res[(n, o)].append(run(perf, a.cpu, n, o, a.n))
        print(f"round {r + 1}: " + ", ".join(f"{n}/{o} {res[(n, o)][r]:.2f}" for n, o in CASES), file=sys.stderr)
    base = res[(1, "rr")]
    print("| destinations | order | Mpps, median | ratio to N=1, median | Mpps per round |")
    print("|---|---|---|---|---|")
    for n, o in CASES:
        v = res[(n, o)]
        ratio = statistics.median(x / b for x, b in zip(v, base))
        print(f"| {n:,} | {o} | {statistics.median(v):.2f} | {ratio:.2f}x | {' / '.join(f'{x:.1f}' for x in v)} |")


if __name__ == "__main__":
    main()
