#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes one capture per receive queue for rdgram-fwd --workers N on
net_pcap (one rx_pcap= per queue), built with scapy (gen_icrc_vectors).

usage: gen_fwd_queues.py OUT_DIR LAYOUT COUNT

The receiver: MAC 02:00:00:00:00:01, address 10.0.0.1, QPs 0x100 (Q_Key
0x11111111, worker 0) and 0x101 (Q_Key 0x22222222, worker 1). Senders:
s0 10.0.0.20 (QP 0xb00) and s1 10.0.0.21 (QP 0xb01), each a static
neighbour of the port. LAYOUT:
  own    q0.pcap: COUNT datagrams from s0 to QP 0x100; q1.pcap: COUNT from
         s1 to QP 0x101: each worker's traffic arrives on its own queue.
  cross  q0.pcap: COUNT from s0 to 0x100 and COUNT from s1 to 0x101,
         interleaved; q1.pcap: none. Worker 1's datagrams land on queue 0
         and reach it only through the soft driver's hand-off.
Payloads are 64 bytes tagged with the sender and a sequence number.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scapy.utils import wrpcap  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from gen_icrc_vectors import annex_icrc, build_frame  # noqa: E402

OUR_MAC = "02:00:00:00:00:01"
OUR_V4 = "10.0.0.1"
SENDERS = [dict(mac="02:00:00:00:00:20", ip="10.0.0.20", qpn=0xb00, dqpn=0x100, qkey=0x11111111),
           dict(mac="02:00:00:00:00:21", ip="10.0.0.21", qpn=0xb01, dqpn=0x101, qkey=0x22222222)]


def frame(s, seq):
    payload = (b"w%d-%06d" % (SENDERS.index(s), seq)).ljust(64, b".")
    v = dict(l3=4, dmac=OUR_MAC, smac=s["mac"], src=s["ip"], dst=OUR_V4, tos=0, ipid=seq & 0xffff,
             tc=0, fl=0, sport=0xC000, qkey=s["qkey"], sqpn=s["qpn"], dqpn=s["dqpn"], psn=seq,
             imm=None, se=0, payload=payload, udpcsum=False, name="")
    f = build_frame(v, icrc_field=None, udp_chksum=0)
    assert f[-4:] == annex_icrc(f)
    return Ether(f)


def main():
    out, layout, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if layout == "own":
        q0 = [frame(SENDERS[0], i) for i in range(count)]
        q1 = [frame(SENDERS[1], i) for i in range(count)]
    elif layout == "cross":
        q0 = [frame(SENDERS[i % 2], i // 2) for i in range(2 * count)]
        q1 = []
    else:
        sys.exit("layout: own or cross")
    for name, frames in (("q0.pcap", q0), ("q1.pcap", q1)):
        path = os.path.join(out, name)
        if frames:
            wrpcap(path, frames)
        else:  # an empty capture: the global header only
            import struct
            with open(path, "wb") as f:
                f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))


if __name__ == "__main__":
    main()
