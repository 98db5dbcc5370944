#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
"""rdgram-coll's poll idle modes side by side, in one run.

For each job shape (threads mode in one process; procs mode, one process
per rank on net_af_packet behind a Linux bridge in a network namespace,
tests/integration/lib.sh fabric_up), runs --idle busy, yield and sleep in
interleaved rounds (busy, yield, sleep, busy, ...) so that a change in the
machine's load hits every mode alike, and prints per mode the median over
rounds and ranks of each rank's per-collective p50 and p99 (us), the
job's wall time, and the p50 ratio to busy.

    benchmarks/coll_idle.py [--coll build/apps/rdgram-coll/rdgram-coll]
        [--rounds 3] [--iters 200] [--jobs threads:8,procs:4,procs:8,procs:32]

procs jobs need root (ip netns). A job that does not finish within its
limit is reported as such (busy with 32 ranks on 2 cores may not).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, "..", "tests", "integration", "lib.sh")
MODES = ["busy", "yield", "sleep"]
OPS = ["barrier", "allgather", "alltoall"]
EAL = ["--no-huge", "--no-shconf", "--no-pci", "--log-level=lib.eal:error"]


def sh(cmd):
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)


def run_threads(coll, n, iters, mode, tmp, limit):
    js = os.path.join(tmp, "t.json")
    t0 = time.time()
    p = subprocess.run(["timeout", str(limit), coll, "-l", "0,1", "-m", "512", "--file-prefix", "rdci%d" % os.getpid()]
                       + EAL + ["--", "--ranks", str(n), "--iters", str(iters), "--idle", mode, "--json", js,
                                "--timeout", str(limit)], capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        return None, wall
    d = json.load(open(js))
    return [d], wall


def run_procs(coll, n, iters, mode, tmp, limit, ns, port):
    procs = []
    t0 = time.time()
    for r in reversed(range(n)):
        cmd = ["ip", "netns", "exec", ns, "timeout", str(limit), coll, "-l", "%d,%d" % (r % 2, (r + 1) % 2), "-m", "128",
               "--file-prefix", "%s-%d" % (ns, r)] + EAL + [
            "--", "--mode", "procs", "--ranks", str(n), "--rank", str(r), "--rendezvous", "127.0.0.1:%d" % port,
            "--port", "net_af_packet{rank},iface=rdc{rank}", "--iters", str(iters), "--idle", mode,
            "--timeout", str(max(limit - 10, 5)), "--json", os.path.join(tmp, "r%d.json" % r)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    ok = all(p.wait() == 0 for p in procs)
    wall = time.time() - t0
    if not ok:
        return None, wall
    return [json.load(open(os.path.join(tmp, "r%d.json" % r))) for r in range(n)], wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coll", default=os.path.join(HERE, "..", "build", "apps", "rdgram-coll", "rdgram-coll"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--jobs", default="threads:8,procs:4,procs:8,procs:32")
    ap.add_argument("--limit", type=int, default=120, help="seconds one job may take")
    a = ap.parse_args()
    jobs = [(j.split(":")[0], int(j.split(":")[1])) for j in a.jobs.split(",")]
    print("rdgram-coll idle modes, %d interleaved rounds, %d iterations of each collective; load average %s"
          % (a.rounds, a.iters, " ".join(open("/proc/loadavg").read().split()[:3])))
    print("%-10s %-6s %8s %8s %8s %8s %8s %8s %8s %7s" % ("job", "mode", "bar p50", "bar p99", "ag p50", "ag p99",
                                                       "a2a p50", "a2a p99", "wall s", "p50/busy"))
    port = 21000 + os.getpid() % 20000
    for kind, n in jobs:
        ns = "rdci%d" % os.getpid()
        if kind == "procs":
            if os.geteuid() != 0:
                print("%-10s skipped: needs root (ip netns)" % ("procs:%d" % n))
                continue
            r = sh(". %s && fabric_up %s %d" % (LIB, ns, n))
            if r.returncode != 0:
                print("%-10s skipped: %s" % ("procs:%d" % n, r.stderr.strip()))
                continue
        res = {m: {"p50": {o: [] for o in OPS}, "p99": {o: [] for o in OPS}, "wall": [], "fail": 0} for m in MODES}
        try:
            for _ in range(a.rounds):
                for m in MODES:
                    with tempfile.TemporaryDirectory() as tmp:
                        port += 1
                        if kind == "threads":
                            ds, wall = run_threads(a.coll, n, a.iters, m, tmp, a.limit)
                        else:
                            ds, wall = run_procs(a.coll, n, a.iters, m, tmp, a.limit, ns, port)
                    if ds is None:
                        res[m]["fail"] += 1
                        continue
                    res[m]["wall"].append(wall)
                    for d in ds:
                        for o in OPS:
                            res[m]["p50"][o].append(d["collectives"][o]["p50_us"])
                            res[m]["p99"][o].append(d["collectives"][o]["p99_us"])
        finally:
            if kind == "procs":
                sh(". %s && fabric_down %s" % (LIB, ns))
        busy50 = None
        for m in MODES:
            x = res[m]
            if not x["wall"]:
                print("%-10s %-6s no run finished within %d s (%d tried)" % ("%s:%d" % (kind, n), m, a.limit, x["fail"]))
                continue
            med = {k: {o: statistics.median(x[k][o]) for o in OPS} for k in ("p50", "p99")}
            s50 = sum(med["p50"].values())
            if m == "busy":
                busy50 = s50
            print("%-10s %-6s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.2f %7s%s"
                  % ("%s:%d" % (kind, n), m, med["p50"]["barrier"], med["p99"]["barrier"], med["p50"]["allgather"],
                     med["p99"]["allgather"], med["p50"]["alltoall"], med["p99"]["alltoall"],
                     statistics.median(x["wall"]), "%.3f" % (s50 / busy50) if busy50 else "-",
                     "  (%d of %d runs failed)" % (x["fail"], a.rounds) if x["fail"] else ""))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
