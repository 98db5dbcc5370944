#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""rdgram-fwd reflect throughput, 1 worker against 2, in one run (issue 26
item 6): net_pcap replays one capture per queue in a loop (infinite_rx=1,
a receive load that costs no sender's CPU) and drops what is sent (no
tx_pcap); 64-byte UD SENDs from one sender per queue, each to its worker's
QP (tests/tools/gen_fwd_queues.py). Rounds alternate 1 and 2 workers; the
ratio is taken round by round. Throughput is the replies handed to the
port (driver tx_pkts) over the run's elapsed time, from --stats-json.
One worker runs once on each CPU (-l 0,1, the worker on lcore 1; then
--main-lcore 1, the worker on lcore 0): on a machine shared with other
jobs the two CPUs are rarely equally free, and the ratio is taken against
their mean.

usage: benchmarks/fwd_workers.py [--build build] [--rounds 5] [--seconds 3]
Run with Debian's /usr/bin/python3 (python3-scapy). Prints a markdown table;
--json FILE also writes the raw figures.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EAL = ["-l", "0,1", "--no-huge", "--no-shconf", "--no-pci", "-m", "1024", "--log-level=lib.eal:error"]
CONFIG = """[[port]]
name = "p0"
mac = "02:00:00:00:00:01"
addresses = ["10.0.0.1"]
mbufs = 32767
qps = [{ qpn = 0x100, qkey = 0x11111111 }, { qpn = 0x101, qkey = 0x22222222 }]
neighbours = [{ ip = "10.0.0.20", mac = "02:00:00:00:00:20" }, { ip = "10.0.0.21", mac = "02:00:00:00:00:21" }]
"""


def run(fwd, d, workers, seconds, rnd, main_lcore=None):
    js = os.path.join(d, f"w{workers}-{rnd}-{main_lcore}.json")
    rx = ",".join(f"rx_pcap={d}/q{q}.pcap" for q in range(workers))
    main = ["--main-lcore", str(main_lcore)] if main_lcore is not None else []
    cmd = [fwd, *EAL, *main, "--file-prefix", f"fwdb{os.getpid()}", "--", "-c", os.path.join(d, "fwd.toml"),
           "--workers", str(workers), "--duration", str(seconds), "--stats-json", js,
           "--port", f"net_pcap0,{rx},infinite_rx=1"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=seconds + 60)
    if p.returncode != 0:
        sys.exit(f"rdgram-fwd --workers {workers} exited {p.returncode}:\n{p.stdout}")
    st = json.load(open(js))
    per = [w["totals"]["tx_pkts"] / w["elapsed_s"] / 1e6 for w in st["per_worker"]]
    return dict(mpps=st["totals"]["tx_pkts"] / st["elapsed_s"] / 1e6, per_worker=per,
                dropped=st["totals"]["dropped"], drops={k: v for k, v in st["totals"]["drops"].items() if v})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    fwd = os.path.join(a.build, "apps", "rdgram-fwd", "rdgram-fwd")
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None) as d:
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "tools", "gen_fwd_queues.py"), d, "own",
                        "1024"], check=True)
        with open(os.path.join(d, "fwd.toml"), "w") as f:
            f.write(CONFIG)
        runs = {"1 worker, CPU 1": (1, None), "1 worker, CPU 0": (1, 1), "2 workers": (2, None)}
        res = {k: [] for k in runs}
        for r in range(a.rounds):
            for k, (w, main) in runs.items():
                res[k].append(run(fwd, d, w, a.seconds, r, main))
                x = res[k][-1]
                print(f"round {r} {k}: {x['mpps']:.3f} Mpps "
                      f"(per worker {', '.join(f'{v:.3f}' for v in x['per_worker'])}), dropped {x['dropped']} "
                      f"{x['drops'] if x['drops'] else ''}", file=sys.stderr)
    ratios = [c["mpps"] / ((a_["mpps"] + b["mpps"]) / 2)
              for a_, b, c in zip(res["1 worker, CPU 1"], res["1 worker, CPU 0"], res["2 workers"])]
    print("| rdgram-fwd reflect, net_pcap infinite_rx, 64 B | Mpps (median) | min | max |")
    print("|---|---|---|---|")
    for k in runs:
        v = [x["mpps"] for x in res[k]]
        print(f"| {k} | {statistics.median(v):.3f} | {min(v):.3f} | {max(v):.3f} |")
    print(f"| 2 workers / mean of 1 worker on each CPU, round by round | {statistics.median(ratios):.2f}x | "
          f"{min(ratios):.2f}x | {max(ratios):.2f}x |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(results=res, ratios=ratios), f, indent=1)


if __name__ == "__main__":
    main()
