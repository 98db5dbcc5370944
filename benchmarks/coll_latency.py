#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Collective latency per operation, rank count and idle mode, for docs/PERFORMANCE.md.

rdgram-coll jobs of N ranks (2, 8, 32) with --idle busy, yield and sleep,
--iters iterations of barrier, allgather and alltoall (64-byte blocks, no
injected loss), every collective verified; per op the p50 and p99 of the
per-rank latencies (rank 0's --json: in procs mode its own rank's, in
threads mode every rank's). The idle modes alternate inside each round;
each p50 is also given as a ratio to busy's of the same round, then the
median over rounds.

Launches (--launch): mpirun (default where mpirun and the bridge exist:
each rank a process on its own veth behind a Linux bridge in a network
namespace made here, tests/integration/lib.sh fabric_up, PMIx bootstrap;
even ranks' poll lcores on CPU 1, odd ranks' on CPU 0)
or threads (all ranks in one process, one poll lcore).

A job counts only if it prints result: PASS; one that does not finish
within --timeout is reported as such (e.g. busy polling with more ranks
than cores).

Usage: benchmarks/coll_latency.py [--build build] [--ranks 2,8,32] [--idle busy,yield,sleep] [--rounds 3]
       [--iters 100] [--launch mpirun|threads] [--timeout 120]
Prints a markdown table; per-run figures go to stderr.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EAL = ["--no-huge", "--no-shconf", "--no-pci", "--log-level=lib.eal:error"]
OPS = ["barrier", "allgather", "alltoall"]


def fabric(action, ns, n=0):
    lib = os.path.join(ROOT, "tests", "integration", "lib.sh")
    arg = f"{ns} {n}" if action == "up" else ns
    p = subprocess.run(["bash", "-c", f'source "{lib}" && fabric_{action} {arg}'], capture_output=True, text=True,
                       timeout=60)
    if p.returncode != 0:
        sys.exit(f"fabric_{action} {arg}: {p.stderr.strip()}")


def job(coll, launch, n, idle, iters, timeout, out):
    """One job: rank 0's JSON, or None when it did not pass in time."""
    args = ["--iters", str(iters), "--timeout", str(timeout), "--idle", idle, "--json", out]
    ns = None
    if launch == "threads":
        cmd = [coll, "-l", "0,1", *EAL, "-m", "512", "--", "--mode", "threads", "--ranks", str(n), *args]
    else:
        ns = f"rdlat{os.getpid()}"
        fabric("up", ns, n)
        mpi = ["ip", "netns", "exec", ns, "mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
        pa = ["--mode", "procs", "--port", "net_af_packet{rank},iface=rdc{rank}",
              "--iters", str(iters), "--timeout", str(timeout), "--idle", idle]
        # One context per rank (MPMD): the poll lcores of even ranks on CPU
        # 1, of odd ranks on CPU 0, so two ranks get a CPU each.
        cmd = mpi
        for r in range(n):
            lc = ["-l", "0,1" if r % 2 == 0 else "1,0"]
            cmd += ([":"] if r else []) + ["-np", "1", coll, *lc, *EAL, "-m", "256", "--", *pa] + (
                ["--json", out] if r == 0 else [])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=3 * timeout + 60)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    finally:
        if ns:
            fabric("down", ns)
    try:
        d = json.load(open(out))
        os.unlink(out)
    except (OSError, ValueError):
        return None
    return d if rc == 0 and d.get("result") == "PASS" else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ranks", default="2,8,32")
    ap.add_argument("--idle", default="busy,yield,sleep")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--launch", choices=["mpirun", "threads"])
    a = ap.parse_args()
    coll = os.path.join(a.build, "apps", "rdgram-coll", "rdgram-coll")
    launch = a.launch or ("mpirun" if shutil.which("mpirun") and os.geteuid() == 0 else "threads")
    ranks = [int(x) for x in a.ranks.split(",")]
    idles = a.idle.split(",")
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(a.rounds):
            for n in ranks:
                for idle in idles:
                    d = job(coll, launch, n, idle, a.iters, a.timeout, os.path.join(tmp, "r0.json"))
                    res.setdefault((n, idle), []).append(d)
                    print(f"round {rnd + 1}: {launch} N={n} {idle}: " +
                          (", ".join(f"{o} p50 {d['collectives'][o]['p50_us']:.1f} p99 "
                                     f"{d['collectives'][o]['p99_us']:.1f} us" for o in OPS) if d else
                           "did not pass within the timeout"), file=sys.stderr)
    med = statistics.median
    print(f"| ranks | idle | " + " | ".join(f"{o} p50 / p99, us" for o in OPS) + " | " +
          " | ".join(f"{o} p50 / busy's" for o in OPS) + " | jobs passed |")
    print("|---" * (3 + 2 * len(OPS)) + "|")
    for n in ranks:
        for idle in idles:
            runs = [d for d in res[(n, idle)] if d]
            if not runs:
                print(f"| {n} | {idle} | " + " | ".join("-" for _ in range(2 * len(OPS))) +
                      f" | 0/{a.rounds} |")
                continue
            cells = []
            for o in OPS:
                cells.append(f"{med(d['collectives'][o]['p50_us'] for d in runs):.1f} / "
                             f"{med(d['collectives'][o]['p99_us'] for d in runs):.1f}")
            for o in OPS:
                pairs = [(d, b) for d, b in zip(res[(n, idle)], res.get((n, "busy"), [])) if d and b]
                cells.append(f"{med(d['collectives'][o]['p50_us'] / b['collectives'][o]['p50_us'] for d, b in pairs):.2f}x"
                             if pairs else "-")
            print(f"| {n} | {idle} | " + " | ".join(cells) + f" | {len(runs)}/{a.rounds} |")


if __name__ == "__main__":
    main()
