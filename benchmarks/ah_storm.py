#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The AH storm end to end, for docs/PERFORMANCE.md.

For N ranks (8 and 32), a job of rdgram-coll with one iteration of each
collective, and its figure: the time from the job's start barrier (the PMIx
fence under mpirun; the TCP rendezvous; in threads mode the in-memory
exchange) to every rank holding AHs to all N - 1 peers, i.e. the largest of
the ranks' start_to_ahs_ms (rank 0's --json: job_storm in procs mode, storm
in threads mode). Beside it, in the same round, bench_ah's registry alone
(create/registry_batch, one ah_registry over one soft device, thread CPU
time) creating the same N(N - 1) AHs, and one rank's N - 1.

Launches (--launch, repeatable; default: every one this machine has):
  threads  all ranks in one rdgram-coll process, over its net_ring switch
  mpirun   mpirun -np N rdgram-coll --mode procs: rank, size and endpoint
           records through PMIx (needs openmpi-bin and a PMIx build)
  tcp      N rdgram-coll --mode procs processes started here, --bootstrap tcp
The procs launches use rdgram-coll's fabric: the memif star through rank 0
(--memif-socket), or, when rdgram-coll has --port, one veth per rank behind a
Linux bridge in a network namespace made here (tests/integration/lib.sh
fabric_up; root), net_af_packet on each rank's veth. With --idle in
rdgram-coll's options the poll loops sleep when idle (--idle, default sleep):
32 ranks on 2 CPUs.

Where the rest goes, per rank (medians over ranks, then over rounds): the
storm itself (create_ah_batch: the AH service's hop to the control thread,
the registry, the driver, neighbour resolution) and the rest of
start_to_ahs (the rank's device and port opened, links up, the storm
threads started); and the spread between the median rank and the last.

A job counts only if it prints result: PASS and every rank created N - 1 AHs;
one that does not is run again (up to three times; the table says how many
were not clean).

Usage: benchmarks/ah_storm.py [--build build] [--ranks 8,32] [--rounds 5] [--launch L ...] [--idle sleep]
Prints a markdown table; per-round figures go to stderr.
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


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


class Coll:
    def __init__(self, build):
        self.bin = os.path.join(build, "apps", "rdgram-coll", "rdgram-coll")
        h = sh([self.bin, *EAL, "-m", "64", "--", "--help"], timeout=60).stdout
        self.bridge = "--port " in h
        self.memif = "--memif-socket" in h
        self.idle = "--idle" in h
        port = ["--port", "net_null0"] if self.bridge else []
        p = sh([self.bin, *EAL, "-m", "64", "--", "--mode", "procs", "--bootstrap", "pmix", "--timeout", "1", *port],
               timeout=60, env={k: v for k, v in os.environ.items() if not k.startswith(("PMIX", "OMPI"))})
        self.pmix = "this build has none" not in p.stderr

    def common(self, idle):
        a = ["--iters", "1", "--timeout", "120"]
        if self.idle:
            a += ["--idle", idle]
        return a


def fabric(action, ns, n=0):
    """fabric_up / fabric_down of tests/integration/lib.sh."""
    lib = os.path.join(ROOT, "tests", "integration", "lib.sh")
    arg = f"{ns} {n}" if action == "up" else ns
    p = sh(["bash", "-c", f'source "{lib}" && fabric_{action} {arg}'], timeout=60)
    if p.returncode != 0:
        sys.exit(f"fabric_{action} {arg}: {p.stderr.strip()}")


def job(coll, launch, n, tmp, rnd, idle):
    """One job; returns rank 0's JSON."""
    out = os.path.join(tmp, f"{launch}-{n}-{rnd}.json")
    base = coll.common(idle)
    if launch == "threads":
        cmd = [coll.bin, "-l", "0,1", *EAL, "-m", "512", "--", "--mode", "threads", "--ranks", str(n), *base,
               "--json", out]
        p = sh(cmd, timeout=600)
        logs = p.stdout + p.stderr
        rc = p.returncode
    else:
        ns = None
        fab = []
        if coll.bridge:
            ns = f"rdstorm{os.getpid()}"
            fabric("up", ns, n)
            fab = ["--port", "net_af_packet{rank},iface=rdc{rank}"]
        elif coll.memif:
            fab = ["--memif-socket", os.path.join(tmp, f"star-{n}-{rnd}.sock")]
        pre = ["ip", "netns", "exec", ns] if ns else []
        eal = ["-l", "0,1", *EAL, "-m", "256"]
        try:
            if launch == "mpirun":
                mpi = pre + ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
                args = ["--mode", "procs", *fab, *base]
                cmd = mpi + ["-np", "1", coll.bin, *eal, "--", *args, "--json", out,
                             ":", "-np", str(n - 1), coll.bin, *eal, "--", *args]
                p = sh(cmd, timeout=900)
                logs, rc = p.stdout + p.stderr, p.returncode
            else:
                port = 20000 + os.getpid() % 20000
                procs = []
                for r in range(n):
                    a = ["--mode", "procs", "--bootstrap", "tcp", "--rank", str(r), "--ranks", str(n),
                         "--rendezvous", f"127.0.0.1:{port}", *fab, *base]
                    if r == 0:
                        a += ["--json", out]
                    procs.append(subprocess.Popen(pre + [coll.bin, *eal, f"--file-prefix=rdstorm{os.getpid()}-{r}",
                                                         "--", *a], stdout=subprocess.PIPE,
                                                  stderr=subprocess.STDOUT, text=True))
                logs, rc = "", 0
                for q in procs:
                    try:
                        o, _ = q.communicate(timeout=900)
                    except subprocess.TimeoutExpired:
                        for k in procs:
                            k.kill()
                        o, _ = q.communicate()
                    logs += o
                    rc = rc or q.returncode
        finally:
            if ns:
                fabric("down", ns)
    try:
        d = json.load(open(out))
    except (OSError, ValueError):
        d = {}
    rows = d.get("job_storm") or d.get("storm") or []
    if rc != 0 or d.get("result") != "PASS" or len(rows) != n or any(
            r.get("created", n - 1) != n - 1 for r in d.get("storm", [])):
        return None, logs[-3000:]
    return rows, None


def registry(build, sizes):
    """bench_ah's create/registry_batch at each size: us of thread CPU time."""
    b = os.path.join(build, "benchmarks", "bench_ah")
    p = sh([b, "--no_memory_report", "--storm_sizes=" + ",".join(map(str, sizes)), "--benchmark_filter=^storm/",
            "--benchmark_min_time=0.2", "--benchmark_format=json"], timeout=600)
    if p.returncode != 0:
        sys.exit(f"bench_ah: exit {p.returncode}\n{p.stderr[-2000:]}")
    res = {}
    for bm in json.loads(p.stdout)["benchmarks"]:
        n = int(bm["name"].split("/")[2])
        res[n] = bm["real_time"] * {"us": 1, "ms": 1e3, "ns": 1e-3}[bm["time_unit"]]
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ranks", default="8,32")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--launch", action="append", choices=["threads", "mpirun", "tcp"])
    ap.add_argument("--idle", default="sleep", help="rdgram-coll --idle, where it has the option [sleep]")
    a = ap.parse_args()
    coll = Coll(a.build)
    launches = a.launch or (["threads"] + (["mpirun"] if shutil.which("mpirun") and coll.pmix else []))
    if coll.bridge and any(l != "threads" for l in launches) and os.geteuid() != 0:
        sys.exit("the bridge fabric needs root (network namespace, veths)")
    ranks = [int(x) for x in a.ranks.split(",")]
    sizes = sorted({s for n in ranks for s in (n - 1, n * (n - 1))})
    res = {(l, n): [] for l in launches for n in ranks}
    reg = []
    failed = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(a.rounds):
            for l in launches:
                for n in ranks:
                    for attempt in range(3):
                        rows, why = job(coll, l, n, tmp, rnd, a.idle)
                        if rows:
                            break
                        failed[(l, n)] = failed.get((l, n), 0) + 1
                        print(f"round {rnd + 1}: {l} N={n}: job not clean, run again:\n{why}", file=sys.stderr)
                    if not rows:
                        sys.exit(f"{l} N={n}: three jobs in a row not clean")
                    res[(l, n)].append(rows)
                    e2e = max(r["start_to_ahs_ms"] for r in rows)
                    print(f"round {rnd + 1}: {l} N={n}: start barrier to all AHs {e2e:.3f} ms, create_ah_batch "
                          f"median {statistics.median(r['ms'] for r in rows):.3f} ms", file=sys.stderr)
            reg.append(registry(a.build, sizes))
            print(f"round {rnd + 1}: registry alone: " + ", ".join(f"{s} AHs {reg[-1][s]:.1f} us" for s in sizes),
                  file=sys.stderr)
    med = statistics.median
    print("| ranks | launch | AHs | start barrier to all ranks' AHs, ms | per rank: create_ah_batch, ms | "
          "per rank: rest of start to AHs, ms | registry alone, N(N-1) AHs, us | ratio | "
          "registry alone, N-1 AHs, us | jobs not clean |")
    print("|---" * 10 + "|")
    for n in ranks:
        for l in launches:
            runs = res[(l, n)]
            e2e = [max(r["start_to_ahs_ms"] for r in rows) for rows in runs]
            storm = [med(r["ms"] for r in rows) for rows in runs]
            rest = [med(r["start_to_ahs_ms"] - r["ms"] for r in rows) for rows in runs]
            ratio = med(e * 1e3 / g[n * (n - 1)] for e, g in zip(e2e, reg))
            print(f"| {n} | {l} | {n * (n - 1):,} | {med(e2e):.3f} ({min(e2e):.3f}-{max(e2e):.3f}) | "
                  f"{med(storm):.3f} | {med(rest):.3f} | {med(g[n * (n - 1)] for g in reg):.1f} | "
                  f"{ratio:,.0f}x | {med(g[n - 1] for g in reg):.1f} | {failed.get((l, n), 0)} |")


if __name__ == "__main__":
    main()
