#!/usr/bin/python3
"""Generate RoCEv2 UD ICRC test vectors with an independent implementation.

Run with Debian's system interpreter (NOT a pyenv/venv python):

    /usr/bin/python3 tests/tools/gen_icrc_vectors.py [--out tests/data/icrc_vectors.txt]
                                                     [--pcap /tmp/icrc_vectors.pcap]

Requires Debian 12's python3-scapy (2.5.0), whose scapy/contrib/roce.py can
compute the RoCEv2 ICRC for IPv4 (BTH.icrc=None).

Frames are Ether / IPv4|IPv6 / UDP(dport=4791) / BTH / DETH / [ImmDt] /
payload / pad / ICRC.  scapy has no DETH/ImmDt layers, so they are appended as
Raw bytes after BTH:
    DETH  = Q_Key (32 bit BE) | reserved (8 bit, 0) | source QPN (24 bit BE)
    ImmDt = 32 bit BE
BTH.padcount = number of zero pad bytes so that DETH+ImmDt+payload+pad is a
multiple of 4.

ICRC sources:
  * IPv4: scapy's BTH.compute_icrc (source=scapy).  Every IPv4 vector is also
    recomputed with annex_icrc() below and asserted equal.
  * IPv6: scapy 2.5 does not support IPv6 in compute_icrc (it warns and
    returns 0), so the ICRC is computed with annex_icrc() (source=annex-zlib),
    the function that was just cross-checked against scapy on IPv4.

annex_icrc() follows IBA Annex A17 (RoCEv2) / Linux rxe_icrc.c:
    crc32 (zlib, i.e. reflected CRC-32, init ~0, final xor ~0) over
      8 bytes 0xff (masked pseudo-LRH)
      | IP header with IPv4 TOS, TTL, header checksum  -> all ones
                         IPv6 traffic class, flow label, hop limit -> all ones
                         (the IPv6 version nibble is kept)
      | UDP header with checksum -> 0xffff
      | BTH with byte 4 (FECN, BECN, resv6) -> 0xff
      | rest of the packet up to (excluding) the ICRC
    stored on the wire least-significant byte first (scapy: pack_icrc reverses
    the big-endian packing; rxe stores the u32 in host=LE order).

UDP checksum: always 0 for IPv4.  For IPv6 some vectors use 0 and others a
real UDP checksum.  The ICRC masks the UDP checksum, so the ICRC is computed
first (with checksum 0), then the frame is rebuilt with BTH.icrc set to the
final value and UDP.chksum=None, so scapy computes the checksum over the final
UDP payload including the ICRC.  The ICRC is then re-verified on the final
bytes.

Output line format (one vector per line, '#' starts a comment line):
  <name> l3=<4|6> imm=<0|1> qpn=0x<dqpn,6 hex> sqpn=0x<src qpn,6 hex>
  qkey=0x<8 hex> psn=0x<6 hex> paylen=<decimal, excl. pad>
  icrc=<8 hex: the 4 ICRC bytes in wire order> source=<scapy|annex-zlib>
  frame=<hex of the whole Ethernet frame, no FCS, ICRC as last 4 bytes>
If immediate data is present the vector also carries imm data inside the frame
(ImmDt follows DETH); its value is not a separate field.
"""

import argparse
import os
import platform
import random
import struct
import subprocess
import sys
import zlib

import scapy
from scapy.compat import raw
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.contrib.roce import BTH

ROCEV2_UDP_PORT = 4791
OP_UD_SEND_ONLY = 0x64
OP_UD_SEND_ONLY_IMM = 0x65
SEED = 0x1CC2C0DE

PAYLOAD_SIZES = [0, 1, 2, 3, 4, 63, 64, 65, 256, 1024, 4000]
IPV4_TOS = [0x00, 0x68, 0x6A, 0x03, 0xB8]


# ---------------------------------------------------------------------------
# Independent ICRC per the RoCEv2 annex (zlib.crc32)
# ---------------------------------------------------------------------------
def annex_icrc(frame: bytes) -> bytes:
    """ICRC of an untagged Ethernet RoCEv2 frame whose last 4 bytes are the
    ICRC slot (their content is ignored).  Returns the 4 wire bytes."""
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    l3 = bytearray(frame[14:-4])
    if ethertype == 0x0800:
        ihl = (l3[0] & 0x0F) * 4
        l3[1] = 0xFF                     # TOS (DSCP+ECN)
        l3[8] = 0xFF                     # TTL
        l3[10:12] = b"\xff\xff"          # header checksum
        udp_off = ihl
    elif ethertype == 0x86DD:
        l3[0] |= 0x0F                    # traffic class high nibble
        l3[1:4] = b"\xff\xff\xff"        # TC low nibble + flow label
        l3[7] = 0xFF                     # hop limit
        udp_off = 40
        assert l3[6] == 17, "IPv6 extension headers not supported"
    else:
        raise ValueError("not IPv4/IPv6: 0x%04x" % ethertype)
    l3[udp_off + 6:udp_off + 8] = b"\xff\xff"    # UDP checksum
    l3[udp_off + 8 + 4] = 0xFF                   # BTH byte 4: FECN/BECN/resv6
    crc = zlib.crc32(b"\xff" * 8 + bytes(l3)) & 0xFFFFFFFF
    return struct.pack("<I", crc)


# ---------------------------------------------------------------------------
# Frame construction
# ---------------------------------------------------------------------------
def ud_tail(qkey, sqpn, imm, payload):
    """DETH [+ ImmDt] + payload + pad, and the BTH padcount."""
    deth = struct.pack("!IB", qkey, 0) + sqpn.to_bytes(3, "big")
    body = deth + (struct.pack("!I", imm) if imm is not None else b"") + payload
    pad = (-len(body)) % 4
    return body + b"\x00" * pad, pad


def build_frame(v, icrc_field=None, udp_chksum=0):
    tail, pad = ud_tail(v["qkey"], v["sqpn"], v["imm"], v["payload"])
    eth = Ether(dst=v["dmac"], src=v["smac"])
    if v["l3"] == 4:
        l3 = IP(src=v["src"], dst=v["dst"], tos=v["tos"], ttl=64,
                flags="DF", id=v["ipid"])
    else:
        l3 = IPv6(src=v["src"], dst=v["dst"], tc=v["tc"], fl=v["fl"],
                  hlim=64)
    udp = UDP(sport=v["sport"], dport=ROCEV2_UDP_PORT, chksum=udp_chksum)
    bth = BTH(opcode=OP_UD_SEND_ONLY_IMM if v["imm"] is not None
              else OP_UD_SEND_ONLY,
              solicited=v["se"], migreq=0, padcount=pad, version=0,
              pkey=0xFFFF, fecn=0, becn=0, resv6=0, dqpn=v["dqpn"],
              ackreq=0, resv7=0, psn=v["psn"], icrc=icrc_field)
    return raw(eth / l3 / udp / bth / Raw(tail))


def make_vector(v):
    if v["l3"] == 4:
        frame = build_frame(v, icrc_field=None, udp_chksum=0)  # scapy ICRC
        icrc = frame[-4:]
        mine = annex_icrc(frame)
        assert mine == icrc, "%s: annex %s != scapy %s" % (
            v["name"], mine.hex(), icrc.hex())
        source = "scapy"
    else:
        frame0 = build_frame(v, icrc_field=0, udp_chksum=0)
        icrc = annex_icrc(frame0)
        frame = build_frame(v, icrc_field=int.from_bytes(icrc, "big"),
                            udp_chksum=None if v["udpcsum"] else 0)
        assert frame[-4:] == icrc
        assert annex_icrc(frame) == icrc          # UDP csum is masked
        udp_ck = frame[14 + 40 + 6:14 + 40 + 8]
        if v["udpcsum"]:
            assert udp_ck != b"\x00\x00"
            # scapy re-dissection must agree with the checksum in the frame
            p = Ether(frame)
            ck = p[UDP].chksum
            del p[UDP].chksum
            assert Ether(raw(p))[UDP].chksum == ck
        else:
            assert udp_ck == b"\x00\x00"
        source = "annex-zlib"
    return frame, icrc, source


# ---------------------------------------------------------------------------
# Self test: annex_icrc must agree with scapy on IPv4 before it is trusted
# ---------------------------------------------------------------------------
def self_test(rng):
    n = 0
    for tos in (0x00, 0x68, 0xFF, 0x03):
        for plen in (0, 1, 5, 37, 300):
            for imm in (None, 0xDEADBEEF):
                v = dict(name="selftest", l3=4, dmac="02:00:00:00:00:01",
                         smac="02:00:00:00:00:02", src="10.1.2.3",
                         dst="10.3.2.1", tos=tos, ipid=rng.randrange(65536),
                         sport=rng.randrange(0xC000, 0x10000),
                         qkey=rng.getrandbits(32), sqpn=rng.getrandbits(24),
                         dqpn=rng.getrandbits(24), psn=rng.getrandbits(24),
                         imm=imm, se=0,
                         payload=bytes(rng.getrandbits(8)
                                       for _ in range(plen)))
                frame = build_frame(v, icrc_field=None)
                assert frame[-4:] == annex_icrc(frame), "self test failed"
                assert frame[-4:] != b"\x00\x00\x00\x00"
                n += 1
    # changing a masked field must not change the ICRC, an unmasked one must
    f = bytearray(frame)
    f[14 + 1] ^= 0x03; f[14 + 8] ^= 0x10            # TOS ECN, TTL
    f[14 + 20 + 8 + 4] |= 0xC0                      # FECN/BECN
    assert annex_icrc(bytes(f)) == frame[-4:]
    f[14 + 20 + 8 + 7] ^= 1                         # dest QPN
    assert annex_icrc(bytes(f)) != frame[-4:]
    return n


# ---------------------------------------------------------------------------
def versions():
    try:
        deb = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "python3-scapy"],
            capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        deb = "unknown"
    try:
        with open("/etc/debian_version") as fh:
            debver = "Debian " + fh.read().strip()
    except OSError:
        debver = platform.platform()
    return dict(scapy=scapy.__version__, scapy_deb=deb, os=debver,
                python=platform.python_version(),
                zlib=zlib.ZLIB_RUNTIME_VERSION,
                scapy_path=os.path.dirname(scapy.__file__))


def vector_params(rng):
    out = []
    idx = 0
    for l3 in (4, 6):
        for with_imm in (False, True):
            for plen in PAYLOAD_SIZES:
                v = dict(l3=l3, imm=rng.getrandbits(32) if with_imm else None,
                         se=1 if with_imm and idx % 3 == 0 else 0)
                v["dmac"] = "02:%02x:%02x:%02x:%02x:%02x" % tuple(
                    rng.getrandbits(8) for _ in range(5))
                v["smac"] = "0a:%02x:%02x:%02x:%02x:%02x" % tuple(
                    rng.getrandbits(8) for _ in range(5))
                if l3 == 4:
                    v["src"] = "10.%d.%d.%d" % (idx, rng.randrange(256),
                                                rng.randrange(1, 255))
                    v["dst"] = "192.168.%d.%d" % (rng.randrange(256),
                                                  rng.randrange(1, 255))
                    v["tos"] = IPV4_TOS[idx % len(IPV4_TOS)]
                    v["ipid"] = rng.randrange(65536)
                else:
                    v["src"] = "fd00:%x::%x:%x" % (idx, rng.getrandbits(16),
                                                   rng.getrandbits(16))
                    v["dst"] = "2001:db8:%x::%x" % (rng.getrandbits(16),
                                                    rng.getrandbits(16) | 1)
                    v["tc"] = [0x00, 0x68, 0x6A, 0x03][idx % 4]
                    v["fl"] = 0 if idx % 3 == 0 else rng.getrandbits(20)
                    v["udpcsum"] = (idx % 2 == 1)
                v["sport"] = rng.randrange(0xC000, 0x10000)
                v["dqpn"] = [0x000002, 0xFFFFFF, 0x000011][idx % 3] \
                    if idx % 5 == 0 else rng.getrandbits(24)
                v["sqpn"] = rng.getrandbits(24)
                v["qkey"] = [0x11111111, 0x80010000, 0xFFFFFFFF][idx % 3] \
                    if idx % 4 == 0 else rng.getrandbits(32)
                v["psn"] = 0xFFFFFF if idx % 7 == 3 else rng.getrandbits(24)
                v["payload"] = bytes(rng.getrandbits(8) for _ in range(plen))
                v["name"] = "v%d_%s_p%d%s" % (
                    l3, "imm" if with_imm else "send", plen,
                    ("_csum" if v["udpcsum"] else "_nocsum") if l3 == 6
                    else "_tos%02x" % v["tos"])
                out.append(v)
                idx += 1
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(
        here, "..", "data", "icrc_vectors.txt"))
    ap.add_argument("--pcap", help="also write the frames to this pcap")
    args = ap.parse_args()

    ver = versions()
    if ver["scapy"] != "2.5.0":
        print("warning: expected scapy 2.5.0, got %s (%s)"
              % (ver["scapy"], ver["scapy_path"]), file=sys.stderr)

    n_self = self_test(random.Random(SEED ^ 0x5E1F))

    vecs = vector_params(random.Random(SEED))
    lines = [
        "# RoCEv2 UD (BTH+DETH[+ImmDt]) ICRC test vectors.",
        "# generated by tests/tools/gen_icrc_vectors.py with python3-scapy %s "
        "(%s, scapy.__version__ %s), python %s, zlib %s"
        % (ver["scapy_deb"], ver["os"], ver["scapy"], ver["python"],
           ver["zlib"]),
        "# self-test: annex-zlib ICRC == scapy ICRC on %d IPv4 frames, and on "
        "every IPv4 vector below" % n_self,
        "# source=scapy: ICRC from scapy.contrib.roce BTH.compute_icrc (IPv4)",
        "# source=annex-zlib: ICRC from the script's RoCEv2-annex zlib.crc32 "
        "function (IPv6; scapy 2.5 lacks IPv6 ICRC)",
        "# IPv4: DF, ttl 64, UDP checksum 0.  IPv6: hlim 64, UDP checksum 0 "
        "(*_nocsum) or real (*_csum, computed over the final frame incl. ICRC)",
        "# opcode 0x64 (imm=0) / 0x65 (imm=1), pkey 0xffff, pad bytes zero; "
        "frames carry no FCS and no VLAN tag",
        "# format: <name> l3=<4|6> imm=<0|1> qpn=0x<dest qpn> "
        "sqpn=0x<src qpn> qkey=0x<q_key> psn=0x<psn> paylen=<bytes, no pad> "
        "icrc=<4 ICRC bytes in wire order> source=<scapy|annex-zlib> "
        "frame=<ethernet frame hex, ICRC = last 4 bytes>",
    ]
    frames = []
    for v in vecs:
        frame, icrc, source = make_vector(v)
        frames.append(frame)
        lines.append(
            "%s l3=%d imm=%d qpn=0x%06x sqpn=0x%06x qkey=0x%08x psn=0x%06x "
            "paylen=%d icrc=%s source=%s frame=%s" % (
                v["name"], v["l3"], v["imm"] is not None, v["dqpn"],
                v["sqpn"], v["qkey"], v["psn"], len(v["payload"]),
                icrc.hex(), source, frame.hex()))

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("wrote %d vectors to %s" % (len(vecs), os.path.normpath(args.out)))

    if args.pcap:
        # plain libpcap (LINKTYPE_ETHERNET), bytes exactly as in the file
        with open(args.pcap, "wb") as fh:
            fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0,
                                 65535, 1))
            for i, f in enumerate(frames):
                fh.write(struct.pack("<IIII", 1700000000 + i, 0,
                                     len(f), len(f)) + f)
        print("wrote %s" % args.pcap)


if __name__ == "__main__":
    main()
