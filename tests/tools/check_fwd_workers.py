#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checks rdgram-fwd --workers 2 in reflect mode over the captures
gen_fwd_queues.py wrote: the --stats-json accounting closes for each worker
and summed, each worker served its own QP, and each queue's output capture
holds exactly the replies its worker sent (right destination, source QP,
payload), read by scapy.

usage: check_fwd_workers.py STATS.json LAYOUT COUNT DIR [forward]

forward: the run was in forward mode with one rule to the peer SINK; each
worker's datagrams must leave on its own queue, from the QP that received
them, to SINK with its Q_Key.
"""
import json
import os
import sys

from scapy.layers.l2 import Ether  # noqa: F401 (LL type 1 for rdpcap)
from scapy.utils import rdpcap

SENDERS = {0: dict(ip="10.0.0.20", qpn=0xb00, our_qpn=0x100),
           1: dict(ip="10.0.0.21", qpn=0xb01, our_qpn=0x101)}
SINK = dict(ip="10.0.0.99", qpn=0x999, qkey=0x1234)
APP_DROPS = ("fwd_no_rule", "reply_bad_wc")
errors = []


def err(msg):
    errors.append(msg)


def closes(who, t):
    """The accounting of one worker's (or the summed) totals."""
    drops = t["drops"]
    rx_drops = sum(v for k, v in drops.items() if k.startswith("rx_"))
    tx_drops = sum(v for k, v in drops.items() if k.startswith("tx_") and k != "tx_full")
    pend = sum(v for k, v in drops.items() if k.startswith("pend_"))
    app = sum(drops.get(k, 0) for k in APP_DROPS)
    checks = [
        ("frames from the port = delivered + to control + driver RX drops + handed out - handed in - copies",
         t["frames_received"],
         t["delivered"] + t["to_control"] + rx_drops + t["handed_out"] - t["handed_in"] - t["group_copies"]),
        ("delivered = reflected + forwarded + app drops", t["delivered"], t["reflected"] + t["forwarded"] + app),
        ("reflected + forwarded = handed to driver + pending drops + tx_full + waiting",
         t["reflected"] + t["forwarded"], t["handed_to_driver"] + pend + drops.get("tx_full", 0) + t["waiting"]),
        ("tx_pkts = handed to driver - driver TX drops", t["tx_pkts"], t["handed_to_driver"] - tx_drops),
        ("dropped = sum of reasons", t["dropped"], sum(drops.values())),
        ("waiting at exit", t["waiting"], 0),
    ]
    for what, a, b in checks:
        if a != b:
            err(f"{who}: {what}: {a} != {b}")


def replies(path):
    """(dst ip, dest QPN, source QPN, payload) of each RoCE frame."""
    out = []
    for p in rdpcap(path):
        b = bytes(p)
        if len(b) < 14 + 20 + 8 + 12 + 8 + 4 or b[12:14] != b"\x08\x00":
            continue
        ip = ".".join(str(x) for x in b[30:34])
        bth = b[42:54]
        deth = b[54:62]
        out.append((ip, int.from_bytes(bth[5:8], "big"), int.from_bytes(deth[5:8], "big"), b[62:-4],
                    int.from_bytes(deth[0:4], "big")))
    return out


def main():
    stats, layout, count, d = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    fwd = len(sys.argv) > 5 and sys.argv[5] == "forward"
    moved = "forwarded" if fwd else "reflected"
    st = json.load(open(stats))
    w = st["per_worker"]
    if st["workers"] != 2 or len(w) != 2:
        err(f"workers: {st['workers']}, {len(w)} in per_worker; expected 2")
    tot = st["totals"]
    closes("totals", tot)
    for i, wk in enumerate(w):
        closes(f"worker {i}", wk["totals"])
    for k in ("frames_received", "delivered", "to_control", "reflected", "forwarded", "handed_to_driver",
              "tx_pkts", "waiting", "dropped", "handed_out", "handed_in"):
        s = sum(wk["totals"][k] for wk in w)
        if s != tot[k]:
            err(f"sum over workers of {k} = {s}, totals say {tot[k]}")
    if tot["dropped"] != 0:
        err(f"dropped {tot['dropped']}: {tot['drops']}")
    for i, wk in enumerate(w):
        t = wk["totals"]
        q = wk["queues"][0]
        if q["qpns"] != [SENDERS[i]["our_qpn"]]:
            err(f"worker {i} owns QPs {q['qpns']}, expected [{SENDERS[i]['our_qpn']:#x}]")
        if t["delivered"] != count or t[moved] != count or t["tx_pkts"] != count:
            err(f"worker {i}: delivered {t['delivered']}, {moved} {t[moved]}, tx_pkts {t['tx_pkts']}; "
                f"expected {count} each")
        if fwd and wk["rule_hits"] != [count]:
            err(f"worker {i}: rule hits {wk['rule_hits']}, expected [{count}]")
        if wk["stopped"] in ("", "running"):
            err(f"worker {i} stopped: {wk['stopped']}")
        # Its queue's output capture: exactly its replies.
        got = replies(os.path.join(d, f"o{i}.pcap"))
        s = SENDERS[i]
        to = SINK if fwd else s
        want = {(b"w%d-%06d" % (i, n)).ljust(64, b".") for n in range(count)}
        if len(got) != count:
            err(f"queue {i}'s output holds {len(got)} RoCE frames, expected {count}")
        bad = [g for g in got if (g[0], g[1], g[2]) != (to["ip"], to["qpn"], s["our_qpn"]) or
               (fwd and g[4] != SINK["qkey"])]
        if bad:
            err(f"queue {i}: {len(bad)} frames not from {s['our_qpn']:#x} to {to['ip']} QP {to['qpn']:#x}, "
                f"e.g. {bad[0][:3]} Q_Key {bad[0][4]:#x}")
        if {g[3] for g in got} != want:
            err(f"queue {i}: the replies' payloads are not the {count} datagrams sent to worker {i}")
    # Every datagram that landed on the other worker's queue was handed
    # over once, and only those.
    if tot["handed_out"] != tot["handed_in"]:
        err(f"handed out {tot['handed_out']} != handed in {tot['handed_in']}")
    if layout == "cross" and (w[0]["totals"]["handed_out"] != count or w[1]["totals"]["handed_in"] != count):
        err(f"hand-offs: worker 0 out {w[0]['totals']['handed_out']}, worker 1 in {w[1]['totals']['handed_in']}; "
            f"expected {count}")
    if layout != "cross" and tot["handed_out"] != 0:
        err(f"{tot['handed_out']} hand-offs where every datagram landed on its worker's queue")
    if st["ports"][0].get("mbufs_out_at_close") != 0:
        err(f"mbufs out of the pool once the queues closed: {st['ports'][0].get('mbufs_out_at_close')}, expected 0")
    qps = {q["qpn"]: q for q in st["ports"][0]["qps"]}
    for i in (0, 1):
        q = qps.get(SENDERS[i]["our_qpn"])
        if q is None or q["worker"] != i or q["rx"] != count or q[moved] != count:
            err(f"ports[0].qps: QP {SENDERS[i]['our_qpn']:#x}: {q}")
    for e in errors[:20]:
        print("FAIL:", e)
    if not errors:
        print(f"ok: {layout}: 2 workers x {count} datagrams {moved}; accounting closes per worker and summed; "
              "each queue's output holds its worker's replies; every mbuf back in the pool")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
