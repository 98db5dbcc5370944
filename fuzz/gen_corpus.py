#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Generate the seed corpora of the libFuzzer targets in fuzz/.

Run with Debian's system interpreter (python3-scapy 2.5):

    /usr/bin/python3 fuzz/gen_corpus.py            # rewrites fuzz/corpus/*/

Seeds are valid inputs, so that fuzzing starts deep in the code, plus one
input per drop reason or error path. Frames are built with scapy; the RoCEv2
ICRC comes from scapy's BTH.compute_icrc for IPv4 and, for IPv6 (which scapy
2.5 cannot do), from annex_icrc() below, which is checked against scapy on
every IPv4 frame first (the method of tests/tools/gen_icrc_vectors.py).

The values match the harnesses:
  fuzz_roce_rx: our IPv4 10.0.0.1 and 192.168.1.1, IPv6 fd00::1 and
    2001:db8::1, QP 0x000100 (Q_Key 0x11111111) and 0xabcdef (0x80010000),
    P_Key 0xffff, MTU 4096.
  fuzz_neigh: we are 02:00:00:00:00:01 at 10.0.0.1 / fd00::1; static
    10.0.0.9, fd00::9; resolutions of 10.0.0.2 and fd00::2 in flight.
    Input = records [ctl][len:2 BE][frame], ctl = 10 ms steps | 0x80 direct.
  fuzz_ah_from_wc: 40-byte GRH area, then FuzzedDataProvider bytes (integers
    are taken from the END of the data, byte strings from the front).
  fuzz_config: TOML text (the shipped config/*.toml are copied in).
  fuzz_mlx5_cqe: [flags][split][40-byte GRH area][CQE64 ...], QP 0x000abc
    (`gen_corpus.py mlx5_cqe` rewrites only that corpus).
"""

import os
import shutil
import struct
import sys
import zlib

from scapy.compat import raw
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import (ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr,
                                ICMPv6NDOptSrcLLAddr, IPv6)
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

OUR_MAC = "02:00:00:00:00:01"
PEER_MAC = "02:00:00:00:00:02"
QPS = [(0x000100, 0x11111111), (0xABCDEF, 0x80010000)]
V4 = ["10.0.0.1", "192.168.1.1"]
V6 = ["fd00::1", "2001:db8::1"]


def annex_icrc(frame):
    """RoCEv2 ICRC (IBA Annex A17) of an untagged frame whose last 4 bytes
    are the ICRC slot; returns the 4 wire bytes."""
    et = struct.unpack_from("!H", frame, 12)[0]
    l3 = bytearray(frame[14:-4])
    if et == 0x0800:
        l3[1] = 0xFF
        l3[8] = 0xFF
        l3[10:12] = b"\xff\xff"
        udp = 20
    else:
        l3[0] |= 0x0F
        l3[1:4] = b"\xff\xff\xff"
        l3[7] = 0xFF
        udp = 40
    l3[udp + 6:udp + 8] = b"\xff\xff"
    l3[udp + 8 + 4] = 0xFF
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(l3)) & 0xFFFFFFFF)


def roce(l3=4, dst=None, src=None, qp=0, payload=b"", imm=None, se=0,
         pkey=0xFFFF, opcode=None, dqpn=None, qkey=None, pad=None, tos=0,
         sport=0xC001, dport=4791, tver=0, udp_csum=False, fl=0):
    """A RoCEv2 UD SEND_ONLY[_WITH_IMM] frame with a correct ICRC."""
    dqpn_, qkey_ = QPS[qp]
    dqpn = dqpn_ if dqpn is None else dqpn
    qkey = qkey_ if qkey is None else qkey
    body = struct.pack("!IB", qkey, 0) + (0x2A2A2A).to_bytes(3, "big")
    if imm is not None:
        body += struct.pack("!I", imm)
    body += payload
    npad = (-len(body)) % 4 if pad is None else pad
    body += b"\x00" * ((-len(body)) % 4)
    if opcode is None:
        opcode = 0x65 if imm is not None else 0x64
    eth = Ether(dst=OUR_MAC, src=PEER_MAC)
    if l3 == 4:
        ip = IP(src=src or "10.0.0.2", dst=dst or V4[0], tos=tos, ttl=64,
                flags="DF", id=1)
    else:
        ip = IPv6(src=src or "fd00::2", dst=dst or V6[0], tc=tos, fl=fl,
                  hlim=64)
    bth = BTH(opcode=opcode, solicited=se, migreq=0, padcount=npad,
              version=tver, pkey=pkey, fecn=0, becn=0, resv6=0, dqpn=dqpn,
              ackreq=0, resv7=0, psn=7, icrc=0)
    f = bytearray(raw(eth / ip / UDP(sport=sport, dport=dport, chksum=0) /
                      bth / Raw(body)))
    icrc = annex_icrc(bytes(f))
    if l3 == 4:
        ref = raw(eth / ip / UDP(sport=sport, dport=dport, chksum=0) /
                  BTH(opcode=opcode, solicited=se, migreq=0, padcount=npad,
                      version=tver, pkey=pkey, dqpn=dqpn, psn=7, icrc=None) /
                  Raw(body))
        assert ref[-4:] == icrc, "annex ICRC != scapy ICRC"
    f[-4:] = icrc
    if udp_csum and l3 == 6:
        p = Ether(bytes(f))
        p[UDP].chksum = None
        f = bytearray(raw(p))
        assert annex_icrc(bytes(f)) == icrc
    return bytes(f)


def fix_ip4(f):
    """Recompute the IPv4 header checksum and the ICRC after an edit."""
    f = bytearray(f)
    f[24:26] = b"\0\0"
    s = sum(struct.unpack("!10H", bytes(f[14:34])))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    f[24:26] = struct.pack("!H", ~s & 0xFFFF)
    f[-4:] = annex_icrc(bytes(f))
    return bytes(f)


def roce_rx_seeds():
    s = {}
    sizes = [0, 1, 3, 4, 64, 257, 1024, 2000, 4096]
    for l3 in (4, 6):
        for n, size in enumerate(sizes):
            pay = bytes((i * 7 + size) & 0xFF for i in range(size))
            dst = (V4 if l3 == 4 else V6)[n % 2]
            s["v%d_send_p%d" % (l3, size)] = roce(
                l3, dst=dst, qp=n % 2, payload=pay, tos=[0, 0x68, 3][n % 3],
                udp_csum=(l3 == 6 and n % 2 == 1), fl=n * 0x1111)
            s["v%d_imm_p%d" % (l3, size)] = roce(
                l3, dst=dst, qp=(n + 1) % 2, payload=pay, imm=0xDEADBEEF,
                se=n % 2)
    # Accepted variants: limited-member P_Key, a multicast-free unusual src.
    s["v4_pkey_limited"] = roce(4, pkey=0x7FFF, payload=b"abc")
    s["v6_src_v4mapped"] = roce(6, src="::ffff:10.0.0.7", payload=b"x" * 9)
    s["v4_src_multicast"] = roce(4, src="224.0.0.5", payload=b"mc")
    # One frame per drop reason (soft_rx.h order).
    good4 = roce(4, payload=b"0123456789")
    s["drop_not_ip"] = raw(Ether(dst=OUR_MAC, src=PEER_MAC, type=0x88B5) /
                           Raw(b"\0" * 60))
    s["drop_truncated"] = good4[:40]
    s["drop_truncated_iplen"] = good4[:-8]
    f = bytearray(good4)
    f[14] = 0x46
    s["drop_bad_ip_header"] = fix_ip4(f)
    f = bytearray(good4)
    f[24] ^= 0x55
    s["drop_bad_ip_checksum"] = bytes(f)
    f = bytearray(good4)
    f[20] = 0x20  # MF
    s["drop_ip_fragment"] = fix_ip4(f)
    s["drop_not_udp"] = raw(Ether(dst=OUR_MAC, src=PEER_MAC) /
                            IP(src="10.0.0.2", dst=V4[0]) /
                            TCP(sport=1, dport=4791) / Raw(b"\0" * 40))
    s["drop_not_roce"] = roce(4, dport=4790, payload=b"x")
    f = bytearray(good4)
    f[38:40] = struct.pack("!H", struct.unpack("!H", f[38:40])[0] + 1)
    s["drop_bad_udp_length"] = fix_ip4(f)
    s["drop_dgid_mismatch"] = roce(4, dst="10.0.0.3", payload=b"x")
    s["drop_bad_bth_version"] = roce(4, tver=1, payload=b"x")
    s["drop_bad_opcode"] = roce(4, opcode=0x04, payload=b"x")
    s["drop_bad_pkey"] = roce(4, pkey=0x0001, payload=b"x")
    s["drop_unknown_qpn"] = roce(4, dqpn=0x000101, payload=b"x")
    s["drop_bad_qkey"] = roce(4, qkey=0x11111112, payload=b"x")
    s["drop_bad_length_pad"] = roce(4, pad=3, payload=b"")
    s["drop_bad_length_mtu"] = roce(6, payload=b"\x5a" * 4097)
    f = bytearray(good4)
    f[-1] ^= 1
    s["drop_bad_icrc"] = bytes(f)
    # Neighbour frames: handed to the control ring.
    s["ctl_arp_request"] = raw(Ether(dst="ff:ff:ff:ff:ff:ff", src=PEER_MAC) /
                               ARP(op=1, hwsrc=PEER_MAC, psrc="10.0.0.2",
                                   pdst="10.0.0.1"))
    s["ctl_nd_ns_short"] = raw(Ether(dst="33:33:ff:00:00:01", src=PEER_MAC) /
                               IPv6(src="fd00::2", dst="ff02::1:ff00:1",
                                    hlim=255) / ICMPv6ND_NS(tgt="fd00::1"))
    s["ctl_nd_ns_slla"] = raw(Ether(dst="33:33:ff:00:00:01", src=PEER_MAC) /
                              IPv6(src="fd00::2", dst="ff02::1:ff00:1",
                                   hlim=255) / ICMPv6ND_NS(tgt="fd00::1") /
                              ICMPv6NDOptSrcLLAddr(lladdr=PEER_MAC))
    s["ctl_nd_na"] = raw(Ether(dst=OUR_MAC, src=PEER_MAC) /
                         IPv6(src="fd00::2", dst="fd00::1", hlim=255) /
                         ICMPv6ND_NA(tgt="fd00::2", R=0, S=1, O=1) /
                         ICMPv6NDOptDstLLAddr(lladdr=PEER_MAC))
    return s


# ---- fuzz_neigh --------------------------------------------------------
def rec(frame, dt=0, direct=False):
    assert dt < 0x80
    return bytes([dt | (0x80 if direct else 0)]) + struct.pack("!H", len(frame)) + frame


def arp(op, smac, sip, tip, dst="ff:ff:ff:ff:ff:ff", tmac="00:00:00:00:00:00",
        hwtype=1):
    return raw(Ether(dst=dst, src=smac) /
               ARP(op=op, hwtype=hwtype, hwsrc=smac, psrc=sip, hwdst=tmac,
                   pdst=tip))


def ns(src, tgt, smac=PEER_MAC, slla=True, hlim=255, dst=None):
    t = tgt.split("::")[-1].zfill(4)
    d = dst or "ff02::1:ff00:%s" % t
    p = IPv6(src=src, dst=d, hlim=hlim) / ICMPv6ND_NS(tgt=tgt)
    if slla:
        p = p / ICMPv6NDOptSrcLLAddr(lladdr=smac)
    return raw(Ether(dst="33:33:ff:00:00:01", src=smac) / p)


def na(src, tgt, mac, S=1, O=1, dst="fd00::1", tlla=True, hlim=255):
    p = IPv6(src=src, dst=dst, hlim=hlim) / ICMPv6ND_NA(tgt=tgt, R=0, S=S, O=O)
    if tlla:
        p = p / ICMPv6NDOptDstLLAddr(lladdr=mac)
    return raw(Ether(dst=OUR_MAC, src=mac) / p)


def neigh_seeds():
    m2, m3 = PEER_MAC, "02:00:00:00:00:03"
    s = {}
    s["arp_reply_resolves"] = rec(arp(2, m2, "10.0.0.2", "10.0.0.1", OUR_MAC, OUR_MAC))
    s["arp_request_for_us"] = rec(arp(1, m2, "10.0.0.2", "10.0.0.1"))
    s["arp_request_learns"] = rec(arp(1, m3, "10.0.0.3", "10.0.0.1"))
    s["arp_request_not_us"] = rec(arp(1, m3, "10.0.0.3", "10.0.0.7"))
    s["arp_probe"] = rec(arp(1, m3, "0.0.0.0", "10.0.0.1"))
    s["arp_gratuitous"] = rec(arp(1, m2, "10.0.0.2", "10.0.0.2"))
    s["arp_bad_htype"] = rec(arp(1, m2, "10.0.0.2", "10.0.0.1", hwtype=6))
    s["arp_bad_sender"] = rec(arp(2, "01:00:5e:00:00:01", "10.0.0.2", "10.0.0.1"))
    s["arp_static_ignored"] = rec(arp(2, m3, "10.0.0.9", "10.0.0.1", OUR_MAC))
    s["arp_direct"] = rec(arp(2, m2, "10.0.0.2", "10.0.0.1", OUR_MAC), direct=True)
    # The AV follows a MAC change; then the TTL runs out and refreshes.
    s["arp_mac_change"] = (rec(arp(2, m2, "10.0.0.2", "10.0.0.1", OUR_MAC)) +
                           rec(arp(2, m3, "10.0.0.2", "10.0.0.1", OUR_MAC), dt=20) +
                           rec(b"", dt=110) +
                           rec(arp(2, m3, "10.0.0.2", "10.0.0.1", OUR_MAC), dt=5))
    s["arp_timeout"] = rec(b"", dt=30) + rec(b"", dt=60) + rec(arp(2, m2, "10.0.0.2", "10.0.0.1"), dt=10)
    s["arp_learn_cap"] = b"".join(
        rec(arp(1, "02:00:00:00:01:%02x" % i, "10.0.1.%d" % i, "10.0.0.1"))
        for i in range(1, 11))
    s["nd_na_resolves"] = rec(na("fd00::2", "fd00::2", m2))
    s["nd_ns_for_us"] = rec(ns("fd00::2", "fd00::1"))
    s["nd_ns_learns"] = rec(ns("fd00::3", "fd00::1", m3))
    s["nd_dad"] = rec(ns("::", "fd00::1", slla=False))
    s["nd_na_override"] = (rec(na("fd00::2", "fd00::2", m2)) +
                           rec(na("fd00::2", "fd00::2", m3, S=0, O=0), dt=2) +
                           rec(na("fd00::2", "fd00::2", m3, S=0, O=1), dt=2) +
                           rec(na("fd00::2", "fd00::2", m3, tlla=False), dt=2))
    s["nd_na_multicast_solicited"] = rec(na("fd00::2", "fd00::2", m2, dst="ff02::1"))
    s["nd_bad_hop_limit"] = rec(na("fd00::2", "fd00::2", m2, hlim=64))
    f = bytearray(na("fd00::2", "fd00::2", m2))
    f[54 + 2] ^= 0xFF
    s["nd_bad_checksum"] = rec(bytes(f))
    f = bytearray(ns("fd00::2", "fd00::1"))
    f[54 + 24 + 1] = 0  # option length 0
    s["nd_bad_option"] = rec(bytes(f), direct=True)
    s["mixed"] = (rec(ns("fd00::2", "fd00::1")) + rec(arp(1, m2, "10.0.0.2", "10.0.0.1"), dt=1) +
                  rec(na("fd00::2", "fd00::2", m2), dt=1) + rec(roce(4, payload=b"hi")) +
                  rec(b"\x00" * 20, direct=True))
    return s


# ---- fuzz_ah_from_wc ---------------------------------------------------
def grh_v6(src, dst, nh=17, tc=0, fl=0):
    return raw(IPv6(src=src, dst=dst, nh=nh, tc=tc, fl=fl, hlim=64, plen=0))[:40]


def grh_v4(src, dst, tos=0):
    return b"\0" * 20 + raw(IP(src=src, dst=dst, tos=tos, ttl=64, proto=17, len=20))[:20]


def wc_input(area, flags=1, l3=0, slid=0, sl=0, dpb=0, port_ok=True, opts=0,
             extra=(), at=None):
    """area + FuzzedDataProvider bytes; see fuzz_ah_from_wc.cc for the
    order. l3: 0 ib_grh, 1 ipv6, 2 ipv4 (as the harness maps byte % 3)."""
    ends = [flags, l3, slid >> 8, slid & 0xFF, sl, dpb, 0 if port_ok else 0xF2,
            opts, len(extra)]
    if at is not None:
        ends += [at] if at < 256 else [at >> 8, at & 0xFF]
    front = b"".join(extra)
    return area + front + bytes(reversed(ends))


def ah_seeds():
    s = {}
    s["eth_v4"] = wc_input(grh_v4("10.0.0.2", "10.0.0.1"), l3=2)
    s["eth_v4_unreported"] = wc_input(grh_v4("10.0.0.2", "10.0.0.1", tos=3), l3=0)
    s["eth_v6"] = wc_input(grh_v6("fd00::2", "fd00::1", tc=0x6B, fl=0x12345), l3=1)
    s["eth_v6_unreported"] = wc_input(grh_v6("fd00::2", "2001:db8::1"), l3=0)
    s["eth_v6_multicast_dst"] = wc_input(grh_v6("fd00::2", "ff0e::1"), l3=1)
    s["eth_v4_multicast_dst"] = wc_input(grh_v4("10.0.0.2", "239.1.1.1"), l3=2)
    s["eth_v6_rocev1"] = wc_input(grh_v6("fd00::2", "fd00::1", nh=0x1B), l3=1)
    s["eth_no_grh"] = wc_input(grh_v4("10.0.0.2", "10.0.0.1"), flags=0, l3=2)
    s["eth_bad_port"] = wc_input(grh_v4("10.0.0.2", "10.0.0.1"), l3=2, port_ok=False)
    s["eth_unknown_dst_placed"] = wc_input(grh_v6("fd00::2", "fd00::77"), l3=1,
                                           opts=0x40 | 0x80, at=3)
    s["ib_grh"] = wc_input(grh_v6("fe80::2", "fe80::1", nh=0x1B, tc=0x20, fl=7),
                           l3=0, slid=0x1234, sl=0x1F, dpb=3, opts=1)
    s["ib_no_grh_optional"] = wc_input(b"\0" * 40, flags=0, opts=1)
    s["ib_multicast_dst"] = wc_input(grh_v6("fe80::2", "ff12::1", nh=0x1B), opts=1)
    s["big_table_idx200"] = wc_input(grh_v4("10.0.0.2", "10.1.0.200"), l3=2, opts=0x20)
    s["big_table_idx280"] = wc_input(grh_v4("10.0.0.2", "10.1.1.24"), l3=2, opts=0x20)
    s["extra_gids"] = wc_input(grh_v6("fd00::2", "fd00::5"), l3=1,
                               extra=[bytes(16), bytes.fromhex("fd00" + "00" * 13 + "05")])
    return s


# ---- fuzz_config -------------------------------------------------------
CONFIG_EXTRA = {
    "generic_all_getters.toml": """\
int = 7
big = -9223372036854775808
bool = true
float = 1.5e3
str = "text"
enum = "b"
strs = ["a", "b"]
mac = "02:aa:bb:cc:dd:ee"
ip = "fd00::1"
ips = ["10.0.0.1", "2001:db8::1"]
[sub]
int = -3
ip = "192.168.1.1"
[sub.sub]
enum = "c"
[[list]]
mac = "0:1:2:3:4:5"
[[list]]
ips = []
[[list.list]]
str = 'literal'
""",
    "perf_server_v6.toml": """\
[perf]
test = "lat"
mode = "server"
size = 4096
timeout = 0.5
immediate = true
[port]
devargs = "net_memif0,role=server"
mtu = 1024
pkey = 0x8001
resolve = false
neigh_fail_hold_ms = 0
[server]
address = "fd00::5"
qpn = 0xffffff
qkey = 0x7fffffff
lcores = "0-1"
[client]
address = "fd00::6"
mac = "02:aa:bb:cc:dd:ee"
""",
    "err_unknown_key.toml": "[perf]\nsize = 64\n  sise = 65\n",
    "err_type.toml": "[perf]\nsize = \"big\"\n",
    "err_range.toml": "[server]\nqpn = 0x1000000\n",
    "err_enum.toml": "[perf]\nmode = \"sideways\"\n",
    "err_mtu.toml": "[port]\nmtu = 1000\n",
    "err_family.toml": "[server]\naddress = \"fd00::1\"\n",
    "err_multicast.toml": "[client]\naddress = \"239.0.0.1\"\n",
    "err_syntax.toml": "[perf]\nsize = = 3\n",
    "err_table_array.toml": "[[perf]]\nsize = 1\n",
    "err_eal_args.toml": "[eal]\nargs = [\"-l\", 1]\n",
    "err_dates.toml": "[perf]\nsize = 1979-05-27T07:32:00Z\ntimeout = inf\n",
    # Reproducers of fixed findings (docs/RELIABILITY.md).
    "regress_float_for_int_perf.toml": "[perf]\nsize = 1e19\n",
    "regress_float_for_int_generic.toml": "big = -9.3e19\n",
}


# fuzz_mlx5_cqe: [flags][split][40-byte GRH area][CQE64 ...] (see the
# harness). Offsets in the CQE64 are mlx5dv.h's struct mlx5_cqe64 /
# mlx5_err_cqe. The harness's QP is 0x000abc; RQ 8, receive CQ 16, send CQ 16.
MLX5_QPN = 0x000ABC


def cqe64(op, owner=0, byte_cnt=0, src_qp=0x123, grh=0, l3_sl=0, slid=0,
          imm=0, qpn=MLX5_QPN, wqe_counter=0, se=0, fmt=0, syndrome=0):
    c = bytearray(64)
    struct.pack_into(">H", c, 22, slid)
    struct.pack_into(">I", c, 24, (grh & 3) << 28 | (l3_sl & 0xF) << 24 | src_qp)
    struct.pack_into(">I", c, 36, imm)
    struct.pack_into(">I", c, 44, byte_cnt)
    struct.pack_into(">I", c, 56, qpn)
    struct.pack_into(">H", c, 60, wqe_counter)
    c[55] = syndrome
    c[63] = op << 4 | (fmt & 3) << 2 | (se & 1) << 1 | (owner & 1)
    return bytes(c)


def mlx5_input(cqes, split=None, roce=True, nsend=0, second_lap=False, area=None):
    flags = (1 if roce else 0) | (nsend & 7) << 1 | (0x10 if second_lap else 0)
    if split is None:
        split = len(cqes)
    if area is None:
        area = bytes(40)
    return bytes([flags, split]) + area + b"".join(cqes)


def mlx5_cqe_seeds():
    v4 = bytes(20) + raw(IP(src="10.0.0.2", dst="10.0.0.1", ttl=64, tos=0x68,
                            proto=17, len=20 + 8 + 12 + 8 + 64 + 4))
    v6 = raw(IPv6(src="fd00::2", dst="fd00::1", hlim=64, tc=0x68, fl=0x12345,
                  nh=17, plen=8 + 12 + 8 + 4 + 64 + 4))[:40]
    ibgrh = bytes([0x60, 0, 0, 0, 0, 90, 0x1B, 64]) + bytes(range(32))
    S, SI, ERR = 2, 3, 14
    ok = lambda i, **k: cqe64(S, byte_cnt=40 + 64, grh=1, l3_sl=2, wqe_counter=i, **k)
    seeds = {
        "roce_v4_one": mlx5_input([ok(0)], area=v4),
        "roce_v6_imm_se": mlx5_input([cqe64(SI, byte_cnt=40 + 64, grh=1, l3_sl=1, imm=0xDEADBEEF,
                                            se=1)], area=v6),
        "roce_burst_8": mlx5_input([ok(i) for i in range(8)], area=v4),
        "roce_rq_underrun": mlx5_input([ok(i) for i in range(10)], area=v4),
        "roce_full_ring": mlx5_input([ok(i) for i in range(16)], area=v4),
        "ib_lid_only": mlx5_input([cqe64(S, byte_cnt=40 + 16, l3_sl=5, slid=0x17)], roce=False),
        "ib_grh": mlx5_input([cqe64(SI, byte_cnt=40 + 90, grh=1, l3_sl=3, slid=0x17, imm=7)],
                             roce=False, area=ibgrh),
        "resp_err": mlx5_input([cqe64(ERR, syndrome=0x01), ok(1)], area=v4),
        "bad_len_short": mlx5_input([cqe64(S, byte_cnt=39)], area=v4),
        "bad_len_long": mlx5_input([cqe64(S, byte_cnt=0x7FFFFFFF)], area=v4),
        "scatter32": mlx5_input([cqe64(S, byte_cnt=40 + 8, fmt=1)], area=v4),
        "compressed": mlx5_input([cqe64(S, byte_cnt=100, fmt=3)], area=v4),
        "req_on_rcq": mlx5_input([cqe64(0), cqe64(13), cqe64(9), ok(0)], area=v4),
        "invalid_stops": mlx5_input([ok(0), cqe64(15), ok(1)], area=v4),
        "owner_stops": mlx5_input([ok(0), ok(1, owner=1)], area=v4),
        "second_lap": mlx5_input([ok(i, owner=1) for i in range(4)], second_lap=True, area=v4),
        "v4_bad_csum": mlx5_input([ok(0)], area=v4[:30] + b"\xff\xff" + v4[32:]),
        "send_cq_req": mlx5_input([cqe64(0, wqe_counter=2), cqe64(0, wqe_counter=6)],
                                  split=0, nsend=4),
        "send_cq_err": mlx5_input([cqe64(13, wqe_counter=4, syndrome=0x02)], split=0, nsend=4),
        "send_cq_stray": mlx5_input([cqe64(0, wqe_counter=1), cqe64(0, wqe_counter=100),
                                     cqe64(S)], split=0, nsend=3),
        "both_cqs": mlx5_input([ok(0), ok(1), cqe64(0, wqe_counter=0)], split=2, nsend=1,
                               area=v4),
    }
    return seeds


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    for name, data in sorted(seeds.items()):
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(data)
    print("%-11s %3d seeds in %s" % (target, len(seeds), os.path.relpath(d, ROOT)))


def main():
    # gen_corpus.py mlx5_cqe: only that corpus.
    if sys.argv[1:] == ["mlx5_cqe"]:
        write("mlx5_cqe", mlx5_cqe_seeds())
        return 0
    write("mlx5_cqe", mlx5_cqe_seeds())
    write("roce_rx", roce_rx_seeds())
    write("neigh", neigh_seeds())
    write("ah_from_wc", ah_seeds())
    cfg = dict(CONFIG_EXTRA)
    for f in sorted(os.listdir(os.path.join(ROOT, "config"))):
        if f.endswith(".toml"):
            with open(os.path.join(ROOT, "config", f), "rb") as fh:
                cfg["shipped_" + f] = fh.read()
    write("config", cfg)


if __name__ == "__main__":
    sys.exit(main())
