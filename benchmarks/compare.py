#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Side-by-side benchmarks for docs/PERFORMANCE.md, in one run.

  tx:  rdgram-perf --test txonly on net_null (soft driver, 64 B payload, ICRC
       on) beside dpdk-testpmd --forward-mode=txonly --txpkts=64 on net_null,
       same sending core, rounds interleaved.
  lat: rdgram-perf ping-pong between two processes over net_memif beside
       sockperf ping-pong over kernel UDP on loopback, same two cores.
  scale: rdgram-perf --test txonly on net_null with 1 worker and with 2
       (--workers, -l 0,1: the main lcore one of them, the port opened with
       one queue per worker), same messages per worker, rounds interleaved;
       the ratio of the 2-worker sum to the 1-worker rate (only with
       --only scale: it takes both CPUs).

Usage: benchmarks/compare.py [--build build] [--rounds 3] [--only tx|lat|scale]
                             [--icrc LEVEL,LEVEL...]
--icrc runs the rdgram sender once per RDGRAM_CPU_MAX level in each round
(e.g. avx512,avx2,sse: the ICRC kernel crc32_select picks under that cap;
in a native build nothing else on that path is chosen at run time), each
against the same round's testpmd.
Prints a markdown table; --json FILE also writes the raw figures.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EAL = ["--no-huge", "--no-shconf", "--no-pci", "-m", "512", "--log-level=lib.eal:error"]


def testpmd_txonly(seconds, core):
    cmd = ["dpdk-testpmd", "-l", f"0,{core}", *EAL, "--file-prefix", f"cmp-tp{os.getpid()}",
           "--vdev", "net_null0", "--", "--forward-mode=txonly", "--txpkts=64",
           "--stats-period", "1", "--total-num-mbufs=16384"]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rates = []
    t0 = time.time()
    os.set_blocking(p.stdout.fileno(), False)
    buf = ""
    while time.time() - t0 < seconds + 2:
        time.sleep(0.2)
        try:
            chunk = p.stdout.read()
        except (TypeError, BlockingIOError):
            chunk = None
        if chunk:
            buf += chunk
    p.send_signal(signal.SIGINT)
    try:
        p.communicate(input="\n", timeout=10)
    except Exception:
        p.kill()
    for m in re.finditer(r"Tx-pps:\s+(\d+)", buf):
        v = int(m.group(1))
        if v > 0:
            rates.append(v)
    if len(rates) < 2:
        raise RuntimeError("testpmd printed no rates:\n" + buf[-2000:])
    return statistics.median(rates[1:]) / 1e6  # drop the first, partial second


def rdgram_txonly(perf, msgs, core, cpu_max=None):
    cmd = [perf, "-l", str(core), *EAL, "--file-prefix", f"cmp-rd{os.getpid()}",
           "--force-max-simd-bitwidth=512", "--", "--mode", "client", "--test", "txonly",
           "-n", str(msgs), "-s", "64", "--port", "net_null0", "--json"]
    env = dict(os.environ)
    env.pop("RDGRAM_CPU_MAX", None)
    if cpu_max:
        env["RDGRAM_CPU_MAX"] = cpu_max
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)["msg_rate_mpps"]
    raise RuntimeError("rdgram-perf txonly failed:\n" + out.stdout + out.stderr)


def rdgram_txonly_workers(perf, msgs, workers):
    """Summed Mpps of `workers` txonly senders on -l 0,1, and each one's."""
    cmd = [perf, "-l", "0,1", *EAL, "--file-prefix", f"cmp-wk{os.getpid()}",
           "--force-max-simd-bitwidth=512", "--", "--mode", "client", "--test", "txonly",
           "-n", str(msgs), "-s", "64", "--port", "net_null0", "--json", "--status-interval", "0",
           "--workers", str(workers)]
    env = dict(os.environ)
    env.pop("RDGRAM_CPU_MAX", None)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    for line in out.stdout.splitlines():
        if line.startswith("{") and out.returncode == 0:
            j = json.loads(line)
            w = j.get("workers", [])
            return (j["msg_rate_mpps"], [x["msg_rate_mpps"] for x in w],
                    j.get("cpu_msg_rate_mpps", 0), [x.get("cpu_msg_rate_mpps", 0) for x in w])
    raise RuntimeError("rdgram-perf txonly --workers %d failed (exit %d):\n%s%s" %
                       (workers, out.returncode, out.stdout, out.stderr))


def sockperf_pingpong(seconds, size):
    srv = subprocess.Popen(["taskset", "-c", "1", "sockperf", "server", "-i", "127.0.0.1", "-p", "11311"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        out = subprocess.run(["taskset", "-c", "0", "sockperf", "ping-pong", "-i", "127.0.0.1", "-p", "11311",
                              "-t", str(seconds), "-m", str(size)], capture_output=True, text=True,
                             timeout=seconds + 30).stdout
    finally:
        srv.terminate()
        srv.wait()
    p50 = float(re.search(r"percentile 50\.000 =\s+([\d.]+)", out).group(1))
    p99 = float(re.search(r"percentile 99\.000 =\s+([\d.]+)", out).group(1))
    return p50, p99


def rdgram_memif_pingpong(perf, iters, size):
    d = tempfile.mkdtemp()
    sock = os.path.join(d, "m.sock")
    cfg = os.path.join(ROOT, "config", "memif-pair.toml")
    common = ["-c", cfg, "--test", "lat", "-s", str(size), "-n", str(iters), "--timeout", "120"]
    srv = subprocess.Popen([perf, *common, "--mode", "server", "--port",
                            f"net_memif0,role=server,id=0,socket={sock},socket-abstract=no"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        out = subprocess.run([perf, *common, "--mode", "client", "--json", "--port",
                              f"net_memif0,role=client,id=0,socket={sock},socket-abstract=no"],
                             capture_output=True, text=True, timeout=180)
    finally:
        srv.wait(timeout=60)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            return j["t_typical_us"], j["p99_us"]
    raise RuntimeError("rdgram-perf memif failed:\n" + out.stdout + out.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=["tx", "lat", "scale"])
    ap.add_argument("--icrc", help="comma-separated RDGRAM_CPU_MAX levels for the rdgram sender")
    ap.add_argument("--json")
    a = ap.parse_args()
    caps = a.icrc.split(",") if a.icrc else [None]
    perf = os.path.join(a.build, "apps", "rdgram-perf", "rdgram-perf")
    res = {"machine": subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo; nproc"],
                                     capture_output=True, text=True).stdout.split("\n")[:2]}
    print(f"machine: {res['machine']}")
    if a.only in (None, "tx"):
        tp, rd = [], {c: [] for c in caps}
        for r in range(a.rounds):
            tp.append(testpmd_txonly(4, 1))
            line = f"  round {r + 1}: testpmd txonly {tp[-1]:.2f} Mpps"
            for i in range(len(caps)):  # the caps' order rotates round to round
                c = caps[(r + i) % len(caps)]
                rd[c].append(rdgram_txonly(perf, 60_000_000, 1, c))
                line += f", rdgram soft txonly{' (' + c + ')' if c else ''} {rd[c][-1]:.2f} Mpps"
            print(line, flush=True)
        res["tx"] = {"testpmd_mpps": tp, "rdgram_mpps": rd[caps[0]],
                     "ratio": statistics.median(rd[caps[0]]) / statistics.median(tp)}
        if a.icrc:
            res["tx"]["by_cpu_max"] = {c: {"rdgram_mpps": rd[c],
                                           "ratio": statistics.median(rd[c]) / statistics.median(tp)}
                                       for c in caps}
    if a.only == "scale":
        one, two, per, cone, ctwo = [], [], [], [], []
        for r in range(a.rounds):
            order = (1, 2) if r % 2 == 0 else (2, 1)  # which goes first alternates
            got = {}
            for w in order:
                got[w] = rdgram_txonly_workers(perf, 40_000_000, w)
            one.append(got[1][0])
            two.append(got[2][0])
            per.append(got[2][1])
            # Per CPU second of each sending thread (its own clock): what
            # the loops do when they run, whoever else has the CPUs.
            cone.append(got[1][2])
            ctwo.append(sum(got[2][3]))
            print(f"  round {r + 1}: 1 worker {one[-1]:.2f} Mpps, 2 workers {two[-1]:.2f} Mpps "
                  f"({' + '.join(f'{x:.2f}' for x in per[-1])}), ratio {two[-1] / one[-1]:.2f}x; "
                  f"per thread CPU second: {cone[-1]:.2f} vs {' + '.join(f'{x:.2f}' for x in got[2][3])}, "
                  f"ratio {ctwo[-1] / cone[-1]:.2f}x", flush=True)
        res["scale"] = {"one_mpps": one, "two_mpps": two, "two_per_worker": per,
                        "ratio": statistics.median(two) / statistics.median(one),
                        "round_ratios": [b / a for a, b in zip(one, two)],
                        "one_cpu_mpps": cone, "two_cpu_mpps": ctwo,
                        "cpu_ratio": statistics.median(ctwo) / statistics.median(cone)}
    if a.only in (None, "lat"):
        sp, rp = [], []
        for r in range(a.rounds):
            sp.append(sockperf_pingpong(4, 64))
            rp.append(rdgram_memif_pingpong(perf, 200_000, 64))
            print(f"  round {r + 1}: sockperf p50/p99 {sp[-1][0]:.2f}/{sp[-1][1]:.2f} us, "
                  f"rdgram memif {rp[-1][0]:.2f}/{rp[-1][1]:.2f} us", flush=True)
        s50 = statistics.median(x[0] for x in sp)
        s99 = statistics.median(x[1] for x in sp)
        r50 = statistics.median(x[0] for x in rp)
        r99 = statistics.median(x[1] for x in rp)
        res["lat"] = {"sockperf": sp, "rdgram_memif": rp, "p50_ratio": r50 / s50, "p99_ratio": r99 / s99}
    print("\n| comparison | rdgram | reference | ratio | target |\n|---|---|---|---|---|")
    if "tx" in res:
        t = res["tx"]
        for c in caps:
            v = t["by_cpu_max"][c] if c else t
            print(f"| sender Mpps, 64 B payload, 1 core{', RDGRAM_CPU_MAX=' + c if c else ''} "
                  f"| {statistics.median(v['rdgram_mpps']):.2f} "
                  f"| testpmd txonly {statistics.median(t['testpmd_mpps']):.2f} | {v['ratio']:.2f}x | >= 0.7x |")
    if "scale" in res:
        t = res["scale"]
        print(f"| txonly Mpps, 64 B, net_null, 2 workers (-l 0,1) | {statistics.median(t['two_mpps']):.2f} "
              f"| 1 worker {statistics.median(t['one_mpps']):.2f} | {t['ratio']:.2f}x | >= 1.8x |")
        print(f"| the same per sending thread's CPU second, summed | {statistics.median(t['two_cpu_mpps']):.2f} "
              f"| 1 worker {statistics.median(t['one_cpu_mpps']):.2f} | {t['cpu_ratio']:.2f}x | (2x: no sharing cost) |")
    if "lat" in res:
        l = res["lat"]
        print(f"| RTT/2 p50 us | {statistics.median(x[0] for x in l['rdgram_memif']):.2f} | sockperf "
              f"{statistics.median(x[0] for x in l['sockperf']):.2f} | {l['p50_ratio']:.3f}x | <= 0.2x |")
        print(f"| RTT/2 p99 us | {statistics.median(x[1] for x in l['rdgram_memif']):.2f} | sockperf "
              f"{statistics.median(x[1] for x in l['sockperf']):.2f} | {l['p99_ratio']:.3f}x | <= 0.2x |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
