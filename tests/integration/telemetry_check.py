#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
"""Reads rdgram's /rdgram/ telemetry from a running app over DPDK's v2
socket (the protocol of dpdk-telemetry.py: SOCK_SEQPACKET, a greeting JSON
carrying max_output_len, then one command per message and one JSON reply
each) and checks the figures.

Usage: telemetry_check.py SOCKET perf|ah
  perf: rdgram-perf in a bandwidth run: QP counters present for both QPs,
        every drop reason named, the client's tx_pkts moving between two
        reads, lcores/ports sane.
  ah:   rdgram-ah storm --hold: the registry summary matches the storm.
Prints every reply; exits 1 on the first failed check.
"""
import json
import os
import re
import socket
import stat
import sys
import time

# Every counter of the soft driver's set: the generic list of
# dataplane/include/rdgram/stats.h and the driver's own
# (drivers/soft/soft_counters.h), name -> kind, read from the headers
# themselves so the test follows the X-macro lists.
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
COUNTER_HEADERS = [os.path.join(ROOT, "dataplane", "include", "rdgram", "stats.h"),
                   os.path.join(ROOT, "drivers", "soft", "soft_counters.h")]
X_LINE = re.compile(r"^\s*X\((\w+),\s*(traffic|drop|event),")


def soft_counters():
    kinds = {}
    for h in COUNTER_HEADERS:
        for line in open(h):
            m = X_LINE.match(line)
            if m:
                kinds[m.group(1)] = m.group(2)
    if len(kinds) < 20:
        fail("read only %d counters from %s" % (len(kinds), COUNTER_HEADERS))
    return kinds


def query(path, cmds):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5)
    s.connect(path)
    greeting = json.loads(s.recv(4096).decode())
    size = int(greeting.get("max_output_len", 16384))
    out = {}
    for c in cmds:
        s.send(c.encode())
        reply = json.loads(s.recv(size).decode())
        print(json.dumps(reply))
        out[c] = reply[c.split(",")[0]]
    s.close()
    return greeting, out


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check_mode(path):
    st = os.stat(path)
    if not stat.S_ISSOCK(st.st_mode):
        fail(path + " is not a socket")
    if stat.S_IMODE(st.st_mode) != 0o600:
        fail("socket mode %o, want 600" % stat.S_IMODE(st.st_mode))
    d = os.stat(os.path.dirname(path))
    if stat.S_IMODE(d.st_mode) & 0o077:
        fail("runtime directory mode %o: group/other bits set" % stat.S_IMODE(d.st_mode))
    print("socket mode 600, directory mode %o" % stat.S_IMODE(d.st_mode))


def check_perf(path):
    greeting, a = query(path, ["/rdgram/qps", "/rdgram/lcores", "/rdgram/ports", "/rdgram/ah",
                               "/rdgram/pending", "/rdgram/icrc"])
    if "DPDK" not in greeting.get("version", ""):
        fail("no DPDK greeting")
    qps = a["/rdgram/qps"]
    if set(qps) != {"server_qp0", "client_qp0"}:
        fail("QPs %s" % sorted(qps))
    kinds = soft_counters()
    for name, q in qps.items():
        if q.get("published") != 1:
            fail(name + " never published")
        if q.get("driver") != "soft":
            fail("%s: driver %s, want soft" % (name, q.get("driver")))
        for r in kinds:
            if r not in q:
                fail("%s lacks counter %s" % (name, r))
        drops = [r for r, k in kinds.items() if k == "drop"]
        if q["rx_drops"] != sum(q[r] for r in drops if r.startswith("rx_")):
            fail(name + ": rx_drops is not the sum of the rx reasons")
        if q["tx_drops"] != sum(q[r] for r in drops if r.startswith("tx_")):
            fail(name + ": tx_drops is not the sum of the tx reasons")
        if q["drops"] != q["rx_drops"] + q["tx_drops"]:
            fail(name + ": drops is not rx_drops + tx_drops")
        # The same counters as xstats: each with the kind its header
        # gives and a description.
        _, x = query(path, ["/rdgram/xstats," + name])
        xs = x["/rdgram/xstats," + name]
        if set(xs) != set(kinds):
            fail("%s xstats %s, want %s" % (name, sorted(set(xs) ^ set(kinds)), "the headers' lists"))
        for r, v in xs.items():
            if v["kind"] != kinds[r] or not v["description"]:
                fail("%s: xstat %s is %s" % (name, r, v))
    t1 = qps["client_qp0"]["tx_pkts"]
    time.sleep(0.5)
    _, b = query(path, ["/rdgram/qps,client_qp0"])
    t2 = b["/rdgram/qps,client_qp0"]["client_qp0"]["tx_pkts"]
    if not t2 > t1 > 0:
        fail("client tx_pkts did not move: %d then %d" % (t1, t2))
    print("client tx_pkts %d -> %d" % (t1, t2))
    # Each QP publishes its own snapshot (age_us apart), so the server's
    # rx_pkts from the first query is compared with the client's tx_pkts
    # from the second: a snapshot published at least 0.5 s later, which the
    # server can never have outrun.
    srv = qps["server_qp0"]
    if srv["rx_pkts"] > t2:
        fail("server received %d, more than the client's %d sent after it" % (srv["rx_pkts"], t2))
    lc = a["/rdgram/lcores"]
    if sorted(v["role"] for v in lc.values()) != ["client", "server"]:
        fail("lcores %s" % lc)
    ports = a["/rdgram/ports"]
    if ports["client"]["driver"] != "soft" or ports["client"]["gid0"] != "10.0.0.2":
        fail("ports %s" % ports)
    if ports["client"]["mac"].lower() != "02:00:00:00:00:02":
        fail("client MAC %s" % ports["client"]["mac"])
    if a["/rdgram/ah"].get("device_live_ahs") != 2:
        fail("rdgram-perf holds one AH per endpoint: %s" % a["/rdgram/ah"])
    if a["/rdgram/pending"].get("clients") != 0:
        fail("rdgram-perf has no AH client: %s" % a["/rdgram/pending"])
    # The ICRC plan its queues took: a kernel per size class, and (when
    # measured) the time of each kernel it chose from, the chosen one the
    # least.
    ic = a["/rdgram/icrc"]
    classes = [k for k in ic if k.startswith("up_to_") or k.startswith("above_")]
    if len(classes) != 6 or not ic.get("plan"):
        fail("/rdgram/icrc %s" % ic)
    for c in classes:
        v = ic[c]
        if v.get("kernel") not in ("table", "pclmul", "avx2", "avx512"):
            fail("/rdgram/icrc %s: %s" % (c, v))
        times = {k[:-3]: t for k, t in v.items() if k.endswith("_ps")}
        if ic["measured"] == 1 and (v["kernel"] not in times or times[v["kernel"]] > min(times.values())):
            fail("/rdgram/icrc %s: chose %s, timed %s" % (c, v["kernel"], times))
    print("ICRC: %s" % ic["plan"])


def check_ah(path, n):
    _, a = query(path, ["/rdgram/ah", "/rdgram/pending", "/rdgram/qps", "/rdgram/lcores"])
    ah = a["/rdgram/ah"]
    # The storm's AHs are released once measured: all live, none held.
    for k, want in (("live", n), ("created", n), ("device_live_ahs", n), ("unreferenced", n),
                    ("svc_app_creates", n), ("failed", 0)):
        if ah.get(k) != want:
            fail("/rdgram/ah %s = %s, want %s" % (k, ah.get(k), want))
    if not ah.get("memory_bytes", 0) > 0 or ah.get("capacity") != 65536:
        fail("/rdgram/ah memory/capacity %s" % ah)
    pend = a["/rdgram/pending"]
    if pend.get("clients") != 1 or "local_qp0" not in pend:
        fail("/rdgram/pending %s" % pend)
    for k in ("pend_timeout", "pend_enomem", "waiting_messages"):
        if k not in pend["local_qp0"]:
            fail("/rdgram/pending lacks " + k)
    if "ah_hits" not in a["/rdgram/qps"]["local_qp0"]:
        fail("local_qp0 lacks its AH client's counters")


if __name__ == "__main__":
    sock, what = sys.argv[1], sys.argv[2]
    check_mode(sock)
    if what == "perf":
        check_perf(sock)
    else:
        check_ah(sock, int(sys.argv[3]))
    print("OK")
