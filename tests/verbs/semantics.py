#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Verbs semantics of rdgram's libibverbs, through Debian's pyverbs (run
under rdgram-verbs with one port, rdg0, whose neighbours never answer:
net_null with no-rx).

Each check names the man page or spec it follows:
- ibv_create_ah(3) to a neighbour that never answers returns NULL with an
  errno within its bound, and on RoCE a non-global AH is EINVAL;
- ibv_modify_qp(3): the UD transitions' required and optional masks
  (EINVAL otherwise), the state machine;
- ibv_post_send(3) before RTS is refused; ibv_post_recv(3) in RESET too;
- a send to an AH of the device's own GID loops back in software: a real
  completion with the 40-byte GRH area (IPv4 header at byte 20, or the IPv6
  header), byte_len, src_qp, IBV_WC_GRH and immediate data;
  ibv_create_ah_from_wc(3) from it, and the reply arrives;
- an armed CQ raises one event (ibv_req_notify_cq(3), ibv_get_cq_event(3));
- ibv_create_qp(3) of type RC: EOPNOTSUPP;
- the limits ibv_query_device(3) advertises hold: a CQ, QP and MR within
  them is created, one past them is EINVAL; a receive scatters over every
  SGE it posted; phys_port_cnt_ex equals phys_port_cnt.
Prints 'N passed, N failed'."""
import errno
import fcntl
import os
import select
import struct
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

QKEY = 0x11111111
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok: {what}")
    else:
        failed += 1
        print(f"FAIL: {what}")


def raises(fn, errnos, what):
    try:
        fn()
    except PyverbsRDMAError as ex:
        check(ex.error_code in errnos, f"{what} (errno {ex.error_code})")
        return
    check(False, f"{what} (it succeeded)")


ctx = Context(name="rdg0")
pd = PD(ctx)
port = ctx.query_port(1)
check(port.state == e.IBV_PORT_ACTIVE and port.link_layer == e.IBV_LINK_LAYER_ETHERNET,
      "ibv_query_port: ACTIVE, Ethernet")


def gid_of(text):
    """pyverbs' GID text: eight groups of four hex digits."""
    import ipaddress
    raw = ipaddress.ip_address(text)
    raw = (b"\0" * 10 + b"\xff\xff" + raw.packed) if raw.version == 4 else raw.packed
    return GID(":".join(raw[i:i + 2].hex() for i in range(0, 16, 2)))


def ah_to(gid, sgid_index):
    gr = GlobalRoute(dgid=gid if isinstance(gid, GID) else gid_of(gid), sgid_index=sgid_index)
    gr.hop_limit = 64
    return AH(pd, attr=AHAttr(port_num=1, is_global=1, gr=gr))


# --- ibv_create_ah: no GRH on RoCE, and a neighbour that never answers ---
raises(lambda: AH(pd, attr=AHAttr(port_num=1, is_global=0)), (errno.EINVAL,), "ibv_create_ah without GRH on RoCE: EINVAL")
t0 = time.monotonic()
raises(lambda: ah_to("::ffff:10.0.0.99", 1), (errno.ETIMEDOUT, errno.EHOSTUNREACH),
       "ibv_create_ah to a neighbour that never answers: NULL with an errno")
dt = time.monotonic() - t0
check(0.2 < dt < 3.0, f"... after {dt:.2f} s: resolution ran, and ended within its bound")
raises(lambda: ah_to("::ffff:10.0.0.99", 9), (errno.EINVAL,), "ibv_create_ah with an sgid_index past the table: EINVAL")

# --- QPs ---
cq = CQ(ctx, 64)
cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=2, max_recv_sge=2)
raises(lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap)), (errno.EOPNOTSUPP,),
       "ibv_create_qp(IBV_QPT_RC): EOPNOTSUPP")
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=cap, sq_sig_all=0))
check(qp.qp_state == e.IBV_QPS_RESET, "a new QP is in RESET")
mr = MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE)
raises(lambda: qp.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(mr.buf, 2048, mr.lkey)])), (errno.EINVAL,),
       "ibv_post_recv in RESET: EINVAL")
a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
a.qkey = QKEY
a.pkey_index = 0
raises(lambda: qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT), (errno.EINVAL,),
       "RESET->INIT without IBV_QP_QKEY: EINVAL (required attribute)")
raises(lambda: qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY | e.IBV_QP_SQ_PSN),
       (errno.EINVAL,), "RESET->INIT with IBV_QP_SQ_PSN: EINVAL (not allowed)")
r = QPAttr(qp_state=e.IBV_QPS_RTR)
raises(lambda: qp.modify(r, e.IBV_QP_STATE), (errno.EINVAL,), "RESET->RTR: EINVAL (no such transition)")
qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
check(qp.qp_state == e.IBV_QPS_INIT, "RESET->INIT with its required attributes")
for i in range(4):
    qp.post_recv(RecvWR(wr_id=100 + i, num_sge=1, sg=[SGE(mr.buf + 4096 + i * 0, 2048, mr.lkey)]))
own4 = ah_to(ctx.query_gid(1, 1), 1)
check(True, "ibv_create_ah to the device's own GID")
swr = SendWR(wr_id=7, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)])
swr.set_wr_ud(own4, qp.qp_num, QKEY)
raises(lambda: qp.post_send(swr), (errno.EINVAL,), "ibv_post_send in INIT: EINVAL")
qp.modify(r, e.IBV_QP_STATE)
rts = QPAttr(qp_state=e.IBV_QPS_RTS)
rts.sq_psn = 0x123
raises(lambda: qp.modify(rts, e.IBV_QP_STATE), (errno.EINVAL,), "RTR->RTS without IBV_QP_SQ_PSN: EINVAL")
qp.modify(rts, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
check(qp.qp_state == e.IBV_QPS_RTS, "INIT->RTR->RTS")


def poll(cq, n=1, timeout=2.0):
    out = []
    end = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < end:
        k, wcs = cq.poll(n - len(out))
        out += wcs[:k]
    return out


# --- loopback through the wire format, and the reply path ---
payload = bytes(range(64))
mr.write(payload, 64)
swr = SendWR(wr_id=7, opcode=e.IBV_WR_SEND_WITH_IMM, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)],
             send_flags=e.IBV_SEND_SIGNALED)
swr.imm_data = 0x01020304
swr.set_wr_ud(own4, qp.qp_num, QKEY)
qp.post_send(swr)
wcs = poll(cq, 2)
send = [w for w in wcs if w.opcode == e.IBV_WC_SEND]
recv = [w for w in wcs if w.opcode == e.IBV_WC_RECV]
check(len(send) == 1 and send[0].status == 0 and send[0].wr_id == 7, "a signalled send completes")
check(len(recv) == 1 and recv[0].status == 0, "the loopback datagram is received")
if recv:
    w = recv[0]
    check(w.byte_len == 40 + 64 and w.src_qp == qp.qp_num and w.qp_num == qp.qp_num,
          f"completion: byte_len {w.byte_len} (GRH + 64), src_qp and qp_num")
    check(bool(w.wc_flags & e.IBV_WC_GRH) and bool(w.wc_flags & e.IBV_WC_WITH_IMM) and w.imm_data == 0x01020304,
          "completion: IBV_WC_GRH, IBV_WC_WITH_IMM, imm_data")
    grh = mr.read(40, 4096)
    check(grh[20] == 0x45 and grh[20 + 16:20 + 20] == bytes([10, 0, 0, 1]) and
          mr.read(64, 4096 + 40) == payload, "GRH area: IPv4 header at byte 20, then the payload")
    reply_ah = AH(pd, wc=w, port_num=1, grh=mr.buf + 4096)
    check(True, "ibv_create_ah_from_wc from the completion and its GRH area")
    mr.write(b"pong" * 16, 64)
    swr = SendWR(wr_id=8, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)],
                 send_flags=e.IBV_SEND_SIGNALED)
    swr.set_wr_ud(reply_ah, w.src_qp, QKEY)
    qp.post_send(swr)
    wcs = poll(cq, 2)
    check(len([x for x in wcs if x.opcode == e.IBV_WC_RECV and x.status == 0]) == 1,
          "the reply through the AH made from the completion arrives")

# --- IPv6 loopback ---
own6 = ah_to(ctx.query_gid(1, 2), 2)
swr = SendWR(wr_id=9, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)], send_flags=0)
swr.set_wr_ud(own6, qp.qp_num, QKEY)
qp.post_send(swr)
wcs = poll(cq, 1)
check(len(wcs) == 1 and wcs[0].opcode == e.IBV_WC_RECV and wcs[0].byte_len == 104,
      "unsignalled send: only the receive completes (IPv6 loopback)")
check(mr.read(1, 4096 + 2 * 0)[0] >> 4 == 6, "GRH area over IPv6: the IPv6 header")
swr = SendWR(wr_id=10, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)], send_flags=0)
swr.set_wr_ud(own6, qp.qp_num, 0x22222222)
qp.post_send(swr)
late = poll(cq, 1, 0.3)
check(len(late) == 0, "a datagram with another Q_Key is not delivered (IBA 10.2.5)"
      + "".join(f" [got wr_id {w.wr_id} opcode {w.opcode} status {w.status}]" for w in late))

# --- the limits ibv_query_device(3) advertises are honoured ---
dev = ctx.query_device()
dex = ctx.query_device_ex()
check(dex.phys_port_cnt_ex == dev.phys_port_cnt == 1,
      f"ibv_query_device_ex: phys_port_cnt_ex {dex.phys_port_cnt_ex} == phys_port_cnt {dev.phys_port_cnt}")
check(dev.max_sge >= 2, f"max_sge {dev.max_sge}")
with CQ(ctx, dev.max_cqe) as big:
    check(big.cqe >= dev.max_cqe, f"ibv_create_cq with max_cqe ({dev.max_cqe}): created, cqe {big.cqe}")
raises(lambda: CQ(ctx, dev.max_cqe + 1), (errno.EINVAL,), "ibv_create_cq above max_cqe: EINVAL")
with MR(pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE) as m:
    check(m.length == 1 << 20, "ibv_reg_mr of 1 MiB (max_mr_size %#x)" % dev.max_mr_size)
bcq = CQ(ctx, 64)
maxcap = QPCap(max_send_wr=dev.max_qp_wr, max_recv_wr=dev.max_qp_wr, max_send_sge=dev.max_sge,
               max_recv_sge=dev.max_sge)
bqp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=bcq, rcq=bcq, cap=maxcap))
_, binit = bqp.query(e.IBV_QP_CAP)
check(binit.cap.max_recv_sge >= dev.max_sge and binit.cap.max_send_sge >= dev.max_sge and
      binit.cap.max_recv_wr >= dev.max_qp_wr and binit.cap.max_send_wr >= dev.max_qp_wr,
      f"ibv_create_qp(UD) with max_qp_wr {dev.max_qp_wr} WRs and max_sge {dev.max_sge} SGEs each way: created")
for what, field in (("max_send_sge", "max_sge"), ("max_recv_sge", "max_sge"),
                    ("max_send_wr", "max_qp_wr"), ("max_recv_wr", "max_qp_wr")):
    over = QPCap(max_send_wr=1, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
    setattr(over, what, getattr(dev, field) + 1)
    raises(lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=bcq, rcq=bcq, cap=over)), (errno.EINVAL,),
           f"ibv_create_qp(UD) with {what} = {field} + 1: EINVAL")
bqp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
bqp.modify(r, e.IBV_QP_STATE)
bqp.modify(rts, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
# A receive of max_sge SGEs: the 40-byte GRH area, then 4 bytes in each
# of the others, placed in reverse order within the MR; the send gathers the
# payload from 4 SGEs.
chunk = 4
nsg = dev.max_sge
plen = (nsg - 1) * chunk
payload = bytes((i * 7 + 3) & 0xff for i in range(plen))
mr.write(b"\0" * 4096, 4096, 4096)
mr.write(payload, plen, 0)
rsg = [SGE(mr.buf + 4096, 40, mr.lkey)]
offs = [4096 + 40 + (nsg - 2 - i) * 16 for i in range(nsg - 1)]
rsg += [SGE(mr.buf + o, chunk, mr.lkey) for o in offs]
bqp.post_recv(RecvWR(wr_id=300, num_sge=nsg, sg=rsg))
q = plen // 4
ssg = [SGE(mr.buf + i * q, q if i < 3 else plen - 3 * q, mr.lkey) for i in range(4)]
swr = SendWR(wr_id=12, opcode=e.IBV_WR_SEND, num_sge=4, sg=ssg, send_flags=0)
swr.set_wr_ud(own4, bqp.qp_num, QKEY)
bqp.post_send(swr)
got = poll(bcq, 1)
check(len(got) == 1 and got[0].status == 0 and got[0].byte_len == 40 + plen,
      f"a receive of {nsg} SGEs completes: byte_len 40 + {plen}"
      + "".join(f" [status {w.status} byte_len {w.byte_len}]" for w in got))
scattered = b"".join(mr.read(chunk, o) for o in offs)
check(scattered == payload, f"... and the payload is scattered over all {nsg - 1} data SGEs, in order")

# --- completion channel ---
ch = CompChannel(ctx)
ecq = CQ(ctx, 16, None, ch, 0)
eqp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=ecq, rcq=ecq, cap=cap))
eqp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
eqp.modify(r, e.IBV_QP_STATE)
eqp.modify(rts, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
eqp.post_recv(RecvWR(wr_id=200, num_sge=1, sg=[SGE(mr.buf + 4096, 2048, mr.lkey)]))
ecq.req_notify()
swr = SendWR(wr_id=11, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)], send_flags=0)
swr.set_wr_ud(own4, eqp.qp_num, QKEY)
qp.post_send(swr)
ch.get_cq_event(ecq)
ecq.ack_events(1)
check(len(poll(ecq, 1)) == 1, "an armed CQ raised its event, and the completion is there")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
