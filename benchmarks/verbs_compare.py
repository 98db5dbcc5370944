#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""rdgram-verbs against rdgram-perf and the kernel, side by side in one run
(docs/PERFORMANCE.md, "Verbs programs on rdgram-verbs").

Each round, interleaved, the same two CPUs (server on 1, client on 0):
  lat: unmodified `ib_send_lat -c UD` under rdgram-verbs over a net_memif
       pair, and `rdgram-perf --test lat` over a net_memif pair: RTT/2 p50
       (perftest's t_typical) and p99;
  bw:  `ib_send_bw -c UD` under rdgram-verbs and `rdgram-perf --test bw`:
       messages per second;
  sockperf ping-pong over kernel UDP on loopback: RTT/2 p50 and p99, the
       path a verbs user without RDMA would otherwise take.
All with 64-byte messages. Prints a markdown table of medians and the
median of the per-round ratios; --json FILE writes the raw figures.

Usage: benchmarks/verbs_compare.py [--build build] [--rounds 3]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE = 64


def verbs_cfgs(d, tag):
    sock = f"rdgv-bench-{os.getpid()}-{tag}"
    cfgs = []
    for name, role, n in (("rdg0", "server", 1), ("rdg1", "client", 2)):
        p = os.path.join(d, f"{name}.toml")
        with open(p, "w") as f:
            f.write(f'[[port]]\nname = "{name}"\ndevargs = "net_memif{n - 1},role={role},socket={sock}"\n'
                    f'mac = "02:00:00:00:00:0{n}"\naddresses = ["10.0.0.{n}"]\nmtu = 1024\n')
        cfgs.append(p)
    return cfgs


def wait_listen(port, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if f":{port} " in subprocess.run(["ss", "-ltn"], capture_output=True, text=True).stdout:
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def perftest(rv, tool, iters, tag):
    d = tempfile.mkdtemp()
    a, b = verbs_cfgs(d, tag)
    common = ["-c", "UD", "-x", "1", "-s", str(SIZE), "-n", str(iters)]
    srv = subprocess.Popen(["taskset", "-c", "1", rv, "-c", a, tool, "-d", "rdg0", *common],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listen(18515)
        res = subprocess.run(["taskset", "-c", "0", rv, "-c", b, tool, "-d", "rdg1", *common, "127.0.0.1"],
                             capture_output=True, text=True, timeout=300)
    finally:
        srv.wait(timeout=120)
    out = res.stdout
    if res.returncode != 0:
        raise RuntimeError(f"{tool} client exit {res.returncode}:\n{out}\n{res.stderr}")
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if "#bytes" in line and i + 1 < len(lines):
            f = lines[i + 1].split()
            if tool == "ib_send_lat":  # bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9
                return float(f[4]), float(f[7])
            return float(f[4]) * 1e6  # bytes iters bw_peak bw_avg msg_rate(Mpps)
    raise RuntimeError(f"{tool} printed no result:\n{out}")


def rdgram_perf(perf, test, iters):
    d = tempfile.mkdtemp()
    sock = os.path.join(d, "m.sock")
    cfg = os.path.join(ROOT, "config", "memif-pair.toml")
    common = ["-c", cfg, "--test", test, "-s", str(SIZE), "-n", str(iters), "--timeout", "120"]
    srv = subprocess.Popen([perf, *common, "--mode", "server", "--port",
                            f"net_memif0,role=server,id=0,socket={sock},socket-abstract=no"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        out = subprocess.run([perf, *common, "--mode", "client", "--json", "--port",
                              f"net_memif0,role=client,id=0,socket={sock},socket-abstract=no"],
                             capture_output=True, text=True, timeout=300)
    finally:
        srv.wait(timeout=120)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            return (j["t_typical_us"], j["p99_us"]) if test == "lat" else j["msg_rate_mpps"] * 1e6
    raise RuntimeError("rdgram-perf failed:\n" + out.stdout + out.stderr)


def sockperf(seconds):
    srv = subprocess.Popen(["taskset", "-c", "1", "sockperf", "server", "-i", "127.0.0.1", "-p", "11312"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        out = subprocess.run(["taskset", "-c", "0", "sockperf", "ping-pong", "-i", "127.0.0.1", "-p", "11312",
                              "-t", str(seconds), "-m", str(SIZE)], capture_output=True, text=True,
                             timeout=seconds + 30).stdout
    finally:
        srv.terminate()
        srv.wait()
    return (float(re.search(r"percentile 50\.000 =\s+([\d.]+)", out).group(1)),
            float(re.search(r"percentile 99\.000 =\s+([\d.]+)", out).group(1)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lat-iters", type=int, default=100_000)
    ap.add_argument("--bw-iters", type=int, default=1_000_000)
    ap.add_argument("--json")
    a = ap.parse_args()
    rv = os.path.join(a.build, "apps", "rdgram-verbs", "rdgram-verbs")
    perf = os.path.join(a.build, "apps", "rdgram-perf", "rdgram-perf")
    r = {"verbs_lat": [], "perf_lat": [], "verbs_bw": [], "perf_bw": [], "sockperf": []}
    for i in range(a.rounds):
        r["verbs_lat"].append(perftest(rv, "ib_send_lat", a.lat_iters, f"l{i}"))
        r["perf_lat"].append(rdgram_perf(perf, "lat", a.lat_iters))
        r["verbs_bw"].append(perftest(rv, "ib_send_bw", a.bw_iters, f"b{i}"))
        r["perf_bw"].append(rdgram_perf(perf, "bw", a.bw_iters))
        r["sockperf"].append(sockperf(5))
        print(f"round {i + 1}: " + ", ".join(f"{k} {v[-1]}" for k, v in r.items()), file=sys.stderr, flush=True)
    med = statistics.median
    ratio = lambda num, den, f: med(f(x) / f(y) for x, y in zip(r[num], r[den]))
    rows = [
        ("RTT/2 p50, us", med(x[0] for x in r["verbs_lat"]), med(x[0] for x in r["perf_lat"]),
         ratio("verbs_lat", "perf_lat", lambda x: x[0]), med(x[0] for x in r["sockperf"]),
         ratio("verbs_lat", "sockperf", lambda x: x[0]), "<= 1.2x"),
        ("RTT/2 p99, us", med(x[1] for x in r["verbs_lat"]), med(x[1] for x in r["perf_lat"]),
         ratio("verbs_lat", "perf_lat", lambda x: x[1]), med(x[1] for x in r["sockperf"]),
         ratio("verbs_lat", "sockperf", lambda x: x[1]), "<= 1.2x"),
        ("messages/s, M", med(r["verbs_bw"]) / 1e6, med(r["perf_bw"]) / 1e6,
         ratio("verbs_bw", "perf_bw", lambda x: x), None, None, ">= 0.8x"),
    ]
    print("| 64 B | ib_send_lat / ib_send_bw on rdgram-verbs | rdgram-perf | ratio | sockperf UDP | "
          "rdgram-verbs / sockperf | target |")
    print("|---|---|---|---|---|---|---|")
    for name, v, p, rt, s, rs, tgt in rows:
        print(f"| {name} | {v:.2f} | {p:.2f} | {rt:.2f}x | {'' if s is None else f'{s:.2f}'} | "
              f"{'' if rs is None else f'{rs:.2f}x'} | {tgt} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f)


if __name__ == "__main__":
    main()
