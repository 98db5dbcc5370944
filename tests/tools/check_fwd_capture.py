#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checks what rdgram-fwd wrote for an input made by gen_roce_pcap.py.

usage: check_fwd_capture.py reflect|forward MANIFEST.json OUT.pcap STATS.json

Every RoCE frame of OUT.pcap is decoded by tshark's InfiniBand dissector
(no malformed frame, UD SEND, QPNs and Q_Key) and parsed by scapy, whose
RoCE layer recomputes the ICRC (IPv4; IPv6 with gen_icrc_vectors.annex_icrc).

reflect: every well-formed input packet is answered once, to its sender
  (destination MAC/IP/QPN = the sender's, source = ours and the QP it was sent
  to, that QP's Q_Key), payload and immediate data unchanged, in the order
  sent for each sender and QP.
forward (config/rdgram-fwd-forward.toml): packets to QP 0x100 go to sink_a
  with Q_Key rewritten to 0x44444444, packets with Q_Key 0x22222222 (QP
  0x101) to sink_b with their Q_Key, packets to QP 0x102 match no rule.
Both: the JSON counters name every malformed frame's reason and add up.
"""
import json
import subprocess
import sys
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scapy.utils import rdpcap  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402
from gen_icrc_vectors import annex_icrc  # noqa: E402

PEERS = {"sink_a": dict(mac="02:00:00:00:00:20", ip="10.0.0.20", qpn=0x300),
         "sink_b": dict(mac="02:00:00:00:00:21", ip="10.0.0.21", qpn=0x301)}

errors = []


def err(msg):
    errors.append(msg)


def parse_out(pcap):
    """The RoCE frames of the capture as dicts (scapy's view)."""
    out = []
    for i, f in enumerate(rdpcap(pcap)):
        raw = bytes(f)
        p = Ether(raw)
        if UDP not in p or p[UDP].dport != 4791:
            continue
        if BTH not in p:
            err(f"out frame {i}: UDP port 4791 but scapy finds no BTH")
            continue
        l3 = p[IP] if IP in p else p[IPv6]
        bth = p[BTH]
        if IP in p:
            want = bth.compute_icrc(None)
        else:
            want = annex_icrc(raw)
        if raw[-4:] != want:
            err(f"out frame {i}: ICRC {raw[-4:].hex()} but scapy/annex computes {want.hex()}")
        rest = bytes(bth.payload)  # DETH [ImmDt] payload pad (scapy keeps the ICRC in BTH.icrc)
        qkey = int.from_bytes(rest[0:4], "big")
        sqpn = int.from_bytes(rest[5:8], "big")
        imm = None
        off = 8
        if bth.opcode == 0x65:
            imm = int.from_bytes(rest[8:12], "big")
            off = 12
        payload = rest[off:len(rest) - bth.padcount]
        out.append(dict(frame=i, dmac=p.dst, smac=p.src, src=l3.src, dst=l3.dst, dqpn=bth.dqpn, sqpn=sqpn,
                        qkey=qkey, imm=imm, payload=payload.hex(), opcode=bth.opcode))
    return out


def tshark_check(pcap, frames):
    r = subprocess.run(["tshark", "-r", pcap, "--disable-heuristic", "mellanox_eoib", "-Y", "udp.dstport==4791",
                        "-T", "fields", "-E", "separator=|", "-e", "frame.number", "-e", "infiniband.bth.opcode",
                        "-e", "infiniband.bth.destqp", "-e", "infiniband.deth.srcqp", "-e", "infiniband.deth.q_key",
                        "-e", "_ws.malformed"], capture_output=True, text=True)
    if r.returncode != 0:
        err("tshark failed: " + r.stderr)
        return
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    if len(lines) != len(frames):
        err(f"tshark decoded {len(lines)} RoCE frames, scapy {len(frames)}")
    for ln, f in zip(lines, frames):
        num, op, dq, sq, qk, mal = (ln.split("|") + [""] * 6)[:6]
        if mal:
            err(f"out frame {num}: tshark says malformed")
        if op not in ("100", "101"):
            err(f"out frame {num}: tshark opcode {op!r}")
        if not dq or int(dq, 0) != f["dqpn"] or not sq or int(sq, 0) != f["sqpn"] or not qk or \
                int(qk, 0) != f["qkey"]:
            err(f"out frame {num}: tshark dqpn/sqpn/qkey {dq}/{sq}/{qk} vs scapy {f['dqpn']:#x}/"
                f"{f['sqpn']:#x}/{f['qkey']:#x}")


def expected(mode, man):
    """(destination, our QP) -> list of (dqpn, qkey, imm, payload), in order; and no-rule count."""
    senders = {s["name"]: s for s in man["senders"]}
    exp, no_rule = {}, 0
    for g in man["good"]:
        s = senders[g["sender"]]
        if mode == "reflect":
            dest = (s["mac"], s["ip"], s["qpn"])
            qkey = g["qkey"]
        elif g["dqpn"] == 0x100:
            p = PEERS["sink_a"]
            dest, qkey = (p["mac"], p["ip"], p["qpn"]), 0x44444444
        elif g["qkey"] == 0x22222222:
            p = PEERS["sink_b"]
            dest, qkey = (p["mac"], p["ip"], p["qpn"]), g["qkey"]
        else:
            no_rule += 1
            continue
        exp.setdefault((dest, g["dqpn"]), []).append((qkey, g["imm"], g["payload"]))
    return exp, no_rule


def main():
    mode, man_path, pcap, stats_path = sys.argv[1:5]
    man = json.load(open(man_path))
    with open(stats_path) as f:
        st = json.load(f)  # also proves it is valid JSON
    frames = parse_out(pcap)
    tshark_check(pcap, frames)
    exp, no_rule = expected(mode, man)
    got = {}
    for f in frames:
        ours = man["our_v4"] if ":" not in f["dst"] else man["our_v6"]
        if f["smac"] != man["our_mac"] or f["src"] != ours:
            err(f"out frame {f['frame']}: source {f['smac']} {f['src']}, expected ours")
        got.setdefault(((f["dmac"], f["dst"], f["dqpn"]), f["sqpn"]), []).append((f["qkey"], f["imm"], f["payload"]))
    for k in sorted(set(exp) | set(got), key=str):
        e, g = exp.get(k, []), got.get(k, [])
        if e != g:
            err(f"to {k[0]} from QP {k[1]:#x}: expected {len(e)} packets, got {len(g)}"
                + ("" if len(e) != len(g) else " (contents or order differ)"))
    n_out = sum(len(v) for v in exp.values())
    if len(frames) != n_out:
        err(f"{len(frames)} RoCE frames out, expected {n_out}")

    # Counters.
    port = st["ports"][0]
    drv, eth, tot = port["driver"], port["ethdev"], st["totals"]
    want_bad = {}
    for b in man["bad"]:
        want_bad[b["reason"]] = want_bad.get(b["reason"], 0) + 1
    for name, v in drv.items():
        if name.startswith("rx_") and name not in ("rx_pkts", "rx_bytes", "rx_to_control"):
            if v != want_bad.get(name, 0):
                err(f"driver counter {name} = {v}, expected {want_bad.get(name, 0)}")
    for name, v in want_bad.items():
        if tot["drops"].get(name) != v:
            err(f"totals.drops.{name} = {tot['drops'].get(name)}, expected {v}")
    if eth["ipackets"] != man["frames"]:
        err(f"ethdev ipackets {eth['ipackets']}, the capture has {man['frames']}")
    if drv["rx_to_control"] != man["neighbour_frames"]:
        err(f"rx_to_control {drv['rx_to_control']}, expected {man['neighbour_frames']} ARP/ND frames")
    rx_drops = sum(v for k, v in drv.items() if k.startswith("rx_") and k not in ("rx_pkts", "rx_bytes",
                                                                                     "rx_to_control"))
    # Send-side drop reasons: every tx_* counter that is not a packet/byte
    # count, a stall count or the control thread's frames.
    tx_drops = sum(v for k, v in drv.items() if k.startswith("tx_") and k not in (
        "tx_pkts", "tx_bytes", "tx_no_mbuf", "tx_port_full", "tx_control", "tx_control_dropped"))
    qps = port["qps"]
    pend = sum(v for q in qps for k, v in q["send_path"].items() if k.startswith("pend_"))
    app_drops = sum(q[k] for q in qps for k in ("fwd_no_rule", "reply_bad_wc", "tx_full"))
    checks = [
        ("frames received = ethdev ipackets", tot["frames_received"], eth["ipackets"]),
        ("frames = delivered + to control + driver RX drops", tot["frames_received"],
         tot["delivered"] + tot["to_control"] + rx_drops),
        ("delivered = well-formed input", tot["delivered"], len(man["good"])),
        ("delivered = sum of per-QP rx", tot["delivered"], sum(q["rx"] for q in qps)),
        ("delivered = reflected + forwarded + app drops", tot["delivered"],
         tot["reflected"] + tot["forwarded"] + app_drops),
        ("reflected + forwarded = handed to driver + pending drops + waiting", tot["reflected"] + tot["forwarded"],
         tot["handed_to_driver"] + pend + tot["waiting"]),
        ("tx_pkts = handed to driver - driver TX drops", tot["tx_pkts"], tot["handed_to_driver"] - tx_drops),
        ("tx_pkts = RoCE frames in the output", tot["tx_pkts"], len(frames)),
        ("opackets = tx_pkts + tx_control", eth["opackets"], drv["tx_pkts"] + drv["tx_control"]),
        ("dropped = sum of reasons", tot["dropped"], sum(tot["drops"].values())),
        ("dropped = malformed + no rule", tot["dropped"], len(man["bad"]) + no_rule),
        ("fwd_no_rule", tot["drops"].get("fwd_no_rule", 0), no_rule),
        ("waiting at exit", tot["waiting"], 0),
    ]
    if mode == "reflect":
        checks.append(("reflected = well-formed input", tot["reflected"], len(man["good"])))
        # The reply path creates one AH per sender, then answers from the cache.
        checks.append(("reply AHs created = senders", port["ah_service"]["created"], len(man["senders"])))
        checks.append(("senders learned by ARP/ND", port["neighbours"]["learned"], len(man["senders"])))
    else:
        checks.append(("peer AHs created ahead", port["ah_service"]["app_creates"], len(PEERS)))
        checks.append(("forwarded = rule hits", tot["forwarded"], sum(r["hits"] for r in st["rules"])))
        checks.append(("rule 0 hits", st["rules"][0]["hits"], sum(1 for g in man["good"] if g["dqpn"] == 0x100)))
    for what, a, b in checks:
        if a != b:
            err(f"accounting: {what}: {a} != {b}")
    for e in errors[:30]:
        print("FAIL:", e)
    print(f"{mode}: {len(frames)} RoCE frames out for {len(man['good'])} well-formed and {len(man['bad'])} "
          f"malformed in; tshark + scapy + {len(checks)} counter checks: {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
