#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes a capture of RoCEv2 UD traffic for rdgram-fwd, built with scapy
(an implementation independent of rdgram), and a manifest describing it.

usage: gen_roce_pcap.py OUT.pcap [MANIFEST.json]

The receiver is rdgram-fwd's port of config/rdgram-fwd*.toml: MAC
02:00:00:00:00:01, addresses 10.0.0.1 and fd00::1, QPs 0x100 (Q_Key
0x11111111), 0x101 (0x22222222) and 0x102 (0x55555555).

The capture holds, in this order:
  * an ARP request (IPv4) or a Neighbor Solicitation with a source link-layer
    option (IPv6) from each sender for our address, so the receiver learns
    the sender's MAC the way a host would (RFC 826, RFC 4861 7.2.3);
  * well-formed UD SENDs from four senders (three IPv4, one IPv6) to the
    three QPs, payloads of 0 to 1500 bytes, some with immediate data, each
    payload tagged so the answer can be matched to it;
  * malformed frames, each for one named drop counter of the soft driver:
    bad ICRC, bad Q_Key, truncated, unknown destination QPN, bad IPv4
    checksum, UDP port not 4791.
Frames are built with gen_icrc_vectors.build_frame (scapy computes the IPv4
ICRC) and annex_icrc (IPv6, cross-checked there against scapy on IPv4).

Run with Debian's /usr/bin/python3 (python3-scapy).
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scapy.layers.inet6 import IPv6, ICMPv6ND_NS, ICMPv6NDOptSrcLLAddr  # noqa: E402
from scapy.layers.l2 import ARP, Ether  # noqa: E402
from scapy.utils import wrpcap  # noqa: E402
from scapy.compat import raw  # noqa: E402
from gen_icrc_vectors import annex_icrc, build_frame  # noqa: E402

OUR_MAC = "02:00:00:00:00:01"
OUR_V4 = "10.0.0.1"
OUR_V6 = "fd00::1"
QPS = {0x100: 0x11111111, 0x101: 0x22222222, 0x102: 0x55555555}
SENDERS = [
    dict(name="s1", l3=4, mac="02:00:00:00:00:11", ip="10.0.0.11", qpn=0x000a11),
    dict(name="s2", l3=4, mac="02:00:00:00:00:12", ip="10.0.0.12", qpn=0x000a12),
    dict(name="s3", l3=4, mac="02:00:00:00:00:13", ip="10.0.0.13", qpn=0x000a13),
    dict(name="s6", l3=6, mac="02:00:00:00:00:16", ip="fd00::16", qpn=0x000a16),
]
SIZES = [0, 1, 3, 4, 17, 64, 100, 333, 1000, 1500]
SEED = 0xF00D


def roce(s, dqpn, qkey, payload, imm=None, psn=0, sport=0xC000):
    v = dict(l3=s["l3"], dmac=OUR_MAC, smac=s["mac"], src=s["ip"],
             dst=OUR_V4 if s["l3"] == 4 else OUR_V6, tos=0, ipid=psn & 0xffff,
             tc=0, fl=0, sport=sport, qkey=qkey, sqpn=s["qpn"], dqpn=dqpn,
             psn=psn, imm=imm, se=0, payload=payload, udpcsum=False, name="")
    if s["l3"] == 4:
        f = build_frame(v, icrc_field=None, udp_chksum=0)  # scapy's ICRC
        assert f[-4:] == annex_icrc(f)
    else:
        f0 = build_frame(v, icrc_field=0, udp_chksum=0)
        f = build_frame(v, icrc_field=int.from_bytes(annex_icrc(f0), "big"), udp_chksum=0)
    return f


def neighbour_frame(s):
    if s["l3"] == 4:
        return raw(Ether(dst="ff:ff:ff:ff:ff:ff", src=s["mac"]) /
                   ARP(op=1, hwsrc=s["mac"], psrc=s["ip"], hwdst="00:00:00:00:00:00", pdst=OUR_V4))
    # To the solicited-node group of fd00::1 (RFC 4291 2.7.1).
    return raw(Ether(dst="33:33:ff:00:00:01", src=s["mac"]) /
               IPv6(src=s["ip"], dst="ff02::1:ff00:1", hlim=255) /
               ICMPv6ND_NS(tgt=OUR_V6) / ICMPv6NDOptSrcLLAddr(lladdr=s["mac"]))


def main():
    out = sys.argv[1]
    manifest = sys.argv[2] if len(sys.argv) > 2 else None
    rng = random.Random(SEED)
    frames = [neighbour_frame(s) for s in SENDERS]
    good = []
    tag = 0
    qpns = sorted(QPS)
    for rnd in range(3):
        for s in SENDERS:
            for size in SIZES:
                qpn = qpns[(tag + rnd) % len(qpns)]
                # The first bytes carry the tag (payloads of 4+ bytes).
                body = tag.to_bytes(4, "big") + bytes(rng.getrandbits(8) for _ in range(max(0, size - 4)))
                payload = body[:size] if size < 4 else body
                imm = 0xC0DE0000 | tag if tag % 3 == 0 else None
                psn = tag
                good.append(dict(sender=s["name"], dqpn=qpn, qkey=QPS[qpn], payload=payload.hex(),
                                 imm=imm, index=len(frames)))
                frames.append(roce(s, qpn, QPS[qpn], payload, imm, psn, 0xC000 + tag))
                tag += 1
    s1, s6 = SENDERS[0], SENDERS[3]
    bad = []

    def add_bad(reason, f):
        bad.append(dict(reason=reason, index=len(frames)))
        frames.append(f)

    for s in (s1, s6):
        f = bytearray(roce(s, 0x100, QPS[0x100], b"bad icrc payload"))
        f[-1] ^= 0x5A
        add_bad("rx_bad_icrc", bytes(f))
        add_bad("rx_bad_qkey", roce(s, 0x101, 0x12345678, b"wrong qkey"))
        add_bad("rx_unknown_qpn", roce(s, 0x777, QPS[0x100], b"no such qp"))
        # Cut inside BTH: the IP/UDP lengths promise more than the frame has.
        add_bad("rx_truncated", roce(s, 0x100, QPS[0x100], b"x" * 40)[:14 + (20 if s["l3"] == 4 else 40) + 8 + 6])
    f = bytearray(roce(s1, 0x100, QPS[0x100], b"ip checksum"))
    f[14 + 10] ^= 0xFF
    add_bad("rx_bad_ip_checksum", bytes(f))
    f = bytearray(roce(s1, 0x100, QPS[0x100], b"udp port"))
    f[14 + 20 + 2:14 + 20 + 4] = (4792).to_bytes(2, "big")
    add_bad("rx_not_roce", bytes(f))

    # Malformed frames between the good ones (after the neighbour frames).
    head, body = frames[:len(SENDERS)], list(enumerate(frames[len(SENDERS):], len(SENDERS)))
    order = list(range(len(body)))
    bad_idx = {b["index"] for b in bad}
    good_pos = [i for i in order if body[i][0] not in bad_idx]
    bad_pos = [i for i in order if body[i][0] in bad_idx]
    mixed = list(good_pos)
    for bp in bad_pos:
        mixed.insert(rng.randrange(1, len(mixed)), bp)
    final = head + [body[i][1] for i in mixed]
    wrpcap(out, [Ether(f) for f in final])
    if manifest:
        with open(manifest, "w") as m:
            json.dump(dict(our_mac=OUR_MAC, our_v4=OUR_V4, our_v6=OUR_V6,
                           qps={hex(k): v for k, v in QPS.items()}, senders=SENDERS,
                           neighbour_frames=len(head), good=good, bad=bad, frames=len(final)), m, indent=1)
    print(f"{out}: {len(final)} frames: {len(head)} ARP/ND, {len(good)} well-formed UD SENDs from "
          f"{len(SENDERS)} senders, {len(bad)} malformed")


if __name__ == "__main__":
    main()
