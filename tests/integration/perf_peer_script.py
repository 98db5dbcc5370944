#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# A scripted peer for rdgram-perf --oob-proto perftest|ud_pingpong: it
# speaks the tools' TCP exchange (perftest 6.06: version, system data, MTU,
# key messages; ibv_ud_pingpong: one address message) and departs from it
# as the scenario says. Used by perf_peer_script.sh.
#   perf_peer_script.py SCENARIO server|client PORT
import socket
import sys
import time

VERSION = b"6.06" + b"\0" * 12
PAGE = (4096).to_bytes(4, "big")
LINE = (64).to_bytes(4, "big")
GID4 = bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 9])
GID6 = bytes([0xfd, 0x77]) + bytes(13) + b"\x09"


def key(qpn, gid):
    """perftest's KEY_PRINT_FMT_GID, 108 bytes with the NUL."""
    s = "%04x:%04x:%06x:%06x:%08x:%016x:" % (0, 1, qpn, 0x123456, 0, 0x7f0000001000)
    s += "".join("%02x:" % b for b in gid) + "%08x:" % 0
    return s.encode() + b"\0"


def pp(qpn, gid):
    """ibv_ud_pingpong's "%04x:%06x:%06x:%s", 52 bytes with the NUL."""
    return ("%04x:%06x:%06x:" % (0, qpn, 0x654321)).encode() + gid.hex().encode() + b"\0"


def rd(c, n):
    b = b""
    while len(b) < n:
        k = c.recv(n - len(b))
        if not k:
            break
        b += k
    return b


def main():
    scenario, role, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if role == "server":
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", port))
        ls.listen(1)
        c, _ = ls.accept()
    else:
        for _ in range(300):
            try:
                c = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.05)
    client = role == "client"

    def xchg(mine, n):  # the client writes first in every exchange
        if client:
            c.sendall(mine)
            return rd(c, n)
        got = rd(c, n)
        c.sendall(mine)
        return got

    if scenario == "old-version":
        xchg(b"5.60" + b"\0" * 12, 16)
    elif scenario == "stop-mid-version":
        if not client:
            rd(c, 16)
        c.sendall(VERSION[:8])
        time.sleep(8)
    elif scenario == "close-mid-exchange":
        xchg(VERSION, 16)
        xchg(PAGE, 4)
        xchg(LINE, 4)
        if not client:
            rd(c, 2)
        c.sendall(b"3")  # half the MTU message, then gone
    elif scenario in ("gid-family", "small-mtu", "stop-mid-keys"):
        xchg(VERSION, 16)
        xchg(PAGE, 4)
        xchg(LINE, 4)
        xchg(b"1\0" if scenario == "small-mtu" else b"3\0", 2)
        if scenario == "stop-mid-keys":
            if not client:
                rd(c, 108)
            c.sendall(key(0x99, GID4)[:50])
            time.sleep(8)
        else:
            xchg(key(0x99, GID6 if scenario == "gid-family" else GID4), 108)
            time.sleep(1)
    elif scenario == "bw-lost":
        # A whole exchange whose data never arrives (rdgram-perf is on
        # net_null): the peer moves on to its closing hand-shake, which
        # must end rdgram-perf's wait and be answered.
        xchg(VERSION, 16)
        xchg(PAGE, 4)
        xchg(LINE, 4)
        xchg(b"3\0", 2)
        for _ in range(4):
            xchg(key(0x99, GID4), 108)
        time.sleep(0.5)
        got = xchg(key(0x99, GID4), 108)
        c.sendall(b"done\0")
        if len(got) != 108 or rd(c, 5) != b"done\0":
            sys.exit(3)  # rdgram-perf did not close the exchange
    elif scenario == "speaks-ud-pingpong":  # an ibv_ud_pingpong client
        c.sendall(pp(0x99, GID4))
        rd(c, 52)
    elif scenario == "speaks-perftest":  # a perftest client
        c.sendall(VERSION)
        rd(c, 16)
    elif scenario == "pp-no-gid":  # ibv_ud_pingpong without -g
        if client:
            c.sendall(pp(0x99, bytes(16)))
            rd(c, 52)
        else:
            rd(c, 52)
            c.sendall(pp(0x99, bytes(16)))
            rd(c, 5)
    else:
        sys.exit("unknown scenario " + scenario)
    c.close()


try:
    main()
except OSError:
    pass  # rdgram-perf hung up on us, as the scenario wants
