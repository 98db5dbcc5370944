#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checks a capture of rdgram's RoCEv2 UD packets with two independent
implementations: Wireshark's InfiniBand dissector (tshark) must decode every
frame as a UD SEND with the expected QPNs and Q_Key and flag nothing as
malformed, and scapy's RoCE layer must compute the same ICRC (IPv4; for IPv6,
which scapy 2.5 cannot do, the annex function of gen_icrc_vectors.py, itself
cross-checked against scapy on IPv4).

usage: check_capture.py COUNT DQPN SQPN QKEY PCAP:PAYLEN [PCAP:PAYLEN ...]
Run with Debian's /usr/bin/python3 (python3-scapy).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scapy.utils import rdpcap  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.layers.inet import IP  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402
from gen_icrc_vectors import annex_icrc  # noqa: E402


def check(pcap, count, dqpn, sqpn, qkey, paylen):
    errors = []
    frames = rdpcap(pcap)
    if len(frames) != count:
        errors.append(f"{len(frames)} frames in the capture, expected {count}")
    for i, f in enumerate(frames):
        raw = bytes(f)
        p = Ether(raw)
        if IP in p:
            want = p[BTH].compute_icrc(None)
            how = "scapy"
        else:
            want = annex_icrc(raw)
            how = "annex"
        if raw[-4:] != want:
            errors.append(f"frame {i}: ICRC {raw[-4:].hex()} but {how} computes {want.hex()}")
    out = subprocess.run(["tshark", "-r", pcap, "--disable-heuristic", "mellanox_eoib", "-T", "fields",
                          "-E", "separator=|", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp",
                          "-e", "infiniband.deth.srcqp", "-e", "infiniband.deth.q_key", "-e", "_ws.malformed",
                          "-e", "udp.dstport"], capture_output=True, text=True)
    if out.returncode != 0:
        errors.append("tshark failed: " + out.stderr)
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    if len(lines) != count:
        errors.append(f"tshark decoded {len(lines)} frames, expected {count}")
    for i, ln in enumerate(lines):
        op, dq, sq, qk, malformed, port = (ln.split("|") + [""] * 6)[:6]
        if op not in ("100", "101"):
            errors.append(f"frame {i}: tshark opcode {op!r}, not UD SEND_ONLY[_IMM]")
        if dq and int(dq, 0) != dqpn:
            errors.append(f"frame {i}: tshark dest QP {dq}")
        if not sq or int(sq, 0) != sqpn:
            errors.append(f"frame {i}: tshark source QP {sq!r}")
        if not qk or int(qk, 0) != qkey:
            errors.append(f"frame {i}: tshark Q_Key {qk!r}")
        if malformed:
            errors.append(f"frame {i}: tshark says malformed")
        if port != "4791":
            errors.append(f"frame {i}: UDP port {port!r}")
    for e in errors[:20]:
        print(f"FAIL: {pcap}: {e}")
    print(f"{pcap}: {len(frames)} frames checked with tshark and scapy: {len(errors)} problems")
    return len(errors)


def main():
    count, dqpn, sqpn, qkey = int(sys.argv[1]), int(sys.argv[2], 0), int(sys.argv[3], 0), int(sys.argv[4], 0)
    bad = 0
    for spec in sys.argv[5:]:
        pcap, paylen = spec.rsplit(":", 1)
        bad += check(pcap, count, dqpn, sqpn, qkey, int(paylen))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
