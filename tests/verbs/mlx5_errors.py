# SPDX-License-Identifier: BSD-3-Clause
"""The emulated ConnectX's completions and errors, judged through Debian's
libmlx5 (pyverbs), on one kind = "mlx5" port sending to its own GIDs (the
NIC loops them back through the same frame build and parse):

- a loopback datagram: the send CQE, the responder CQE as libmlx5 reads it
  (byte_len with the GRH, src_qp, the immediate, IBV_WC_GRH, and the RoCE
  L3 type that libmlx5 reports as sl: 2 for IPv4, 1 for IPv6), the GRH area;
- a send whose data segment's lkey is no MR's: IBV_WC_LOC_PROT_ERR even
  unsignalled, the QP in ERR, its posted receive flushed (IBV_WC_WR_FLUSH_ERR);
- a send longer than the port's MTU: IBV_WC_LOC_LEN_ERR, the QP in ERR;
- a receive WQE too short for GRH + payload: IBV_WC_LOC_LEN_ERR on the
  receive, the QP in ERR;
- a basic SRQ: its answered limits, a QP receiving from it (datagrams land
  in the SRQ's WQEs in the order they were posted, each CQE naming its
  wr_id), the limit kept by ibv_modify_srq and a resize refused (EINVAL,
  as mlx5_ib);
- a fresh QP after all that works (nothing else on the port disturbed).
"""
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
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


ctx = Context(name="mlx5_0")
pd = PD(ctx)
mr = MR(pd, 16384, e.IBV_ACCESS_LOCAL_WRITE)
cq = CQ(ctx, 64)


def gid(index):
    return ctx.query_gid(1, index)


def ah_to(index):
    gr = GlobalRoute(dgid=gid(index), sgid_index=index)
    gr.hop_limit = 64
    return AH(pd, attr=AHAttr(port_num=1, is_global=1, gr=gr))


def new_qp(srq=None):
    cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=2, max_recv_sge=2)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, srq=srq, cap=cap, sq_sig_all=0))
    a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
    a.qkey = QKEY
    a.pkey_index = 0
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
    qp.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE)
    r = QPAttr(qp_state=e.IBV_QPS_RTS)
    r.sq_psn = 0
    qp.modify(r, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
    return qp


def poll(n, timeout=2.0):
    out = []
    end = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < end:
        k, wcs = cq.poll(n - len(out))
        out += wcs[:k]
    return out


def state(qp):
    attr, _ = qp.query(e.IBV_QP_STATE)
    return attr.qp_state


own4, own6 = ah_to(1), ah_to(2)

# --- a loopback datagram, over IPv4 and IPv6 ---
for ah, l3, sl in ((own4, "IPv4", 2), (own6, "IPv6", 1)):
    qp = new_qp()
    qp.post_recv(RecvWR(wr_id=100, num_sge=1, sg=[SGE(mr.buf + 4096, 2048, mr.lkey)]))
    payload = bytes(range(64))
    mr.write(payload, 64)
    swr = SendWR(wr_id=7, opcode=e.IBV_WR_SEND_WITH_IMM, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)],
                 send_flags=e.IBV_SEND_SIGNALED)
    swr.imm_data = 0x01020304
    swr.set_wr_ud(ah, qp.qp_num, QKEY)
    qp.post_send(swr)
    wcs = poll(2)
    send = [w for w in wcs if w.opcode == e.IBV_WC_SEND]
    recv = [w for w in wcs if w.opcode == e.IBV_WC_RECV]
    check(len(send) == 1 and send[0].status == e.IBV_WC_SUCCESS and send[0].wr_id == 7,
          f"{l3}: the signalled send completes")
    check(len(recv) == 1 and recv[0].status == e.IBV_WC_SUCCESS and recv[0].wr_id == 100,
          f"{l3}: the loopback datagram is received")
    if recv:
        w = recv[0]
        check(w.byte_len == 40 + 64 and w.src_qp == qp.qp_num and w.qp_num == qp.qp_num,
              f"{l3}: byte_len {w.byte_len} (GRH + 64), src_qp, qp_num")
        check(bool(w.wc_flags & e.IBV_WC_GRH) and bool(w.wc_flags & e.IBV_WC_WITH_IMM) and
              w.imm_data == 0x01020304, f"{l3}: IBV_WC_GRH, IBV_WC_WITH_IMM, imm_data")
        check(w.sl == sl, f"{l3}: the L3 type in flags_rqpn, which libmlx5 reports as sl: {w.sl} (want {sl})")
        grh = mr.read(40, 4096)
        if l3 == "IPv4":
            ok = grh[20] == 0x45 and grh[:20] == bytes(20)
        else:
            ok = (grh[0] >> 4) == 6 and grh[24:40] == bytes.fromhex(str(gid(2)).replace(":", ""))
        check(ok and mr.read(64, 4096 + 40) == payload, f"{l3}: the GRH area, then the payload")
    qp.close()

# --- a data segment outside every MR: LOC_PROT_ERR, QP to ERR, flush ---
qp = new_qp()
qp.post_recv(RecvWR(wr_id=200, num_sge=1, sg=[SGE(mr.buf + 4096, 2048, mr.lkey)]))
swr = SendWR(wr_id=8, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey ^ 0x1000)], send_flags=0)
swr.set_wr_ud(own4, qp.qp_num, QKEY)
qp.post_send(swr)
wcs = poll(2)
bad = [w for w in wcs if w.wr_id == 8]
flushed = [w for w in wcs if w.wr_id == 200]
check(len(bad) == 1 and bad[0].status == e.IBV_WC_LOC_PROT_ERR,
      f"bad lkey: an unsignalled send completes with IBV_WC_LOC_PROT_ERR ({[w.status for w in bad]})")
check(state(qp) == e.IBV_QPS_ERR, "bad lkey: the QP is in ERR")
check(len(flushed) == 1 and flushed[0].status == e.IBV_WC_WR_FLUSH_ERR,
      f"bad lkey: the posted receive is flushed ({[w.status for w in flushed]})")
qp.close()

# --- longer than the port's MTU (1024): LOC_LEN_ERR ---
qp = new_qp()
swr = SendWR(wr_id=9, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 2000, mr.lkey)],
             send_flags=e.IBV_SEND_SIGNALED)
swr.set_wr_ud(own4, qp.qp_num, QKEY)
qp.post_send(swr)
wcs = poll(1)
check(len(wcs) == 1 and wcs[0].wr_id == 9 and wcs[0].status == e.IBV_WC_LOC_LEN_ERR,
      f"over the MTU: IBV_WC_LOC_LEN_ERR ({[w.status for w in wcs]})")
check(state(qp) == e.IBV_QPS_ERR, "over the MTU: the QP is in ERR")
qp.close()

# --- a receive WQE too short: LOC_LEN_ERR on the receive ---
qp = new_qp()
qp.post_recv(RecvWR(wr_id=300, num_sge=1, sg=[SGE(mr.buf + 4096, 50, mr.lkey)]))
swr = SendWR(wr_id=10, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)],
             send_flags=e.IBV_SEND_SIGNALED)
swr.set_wr_ud(own4, qp.qp_num, QKEY)
qp.post_send(swr)
wcs = poll(2)
r = [w for w in wcs if w.wr_id == 300]
check(len(r) == 1 and r[0].status == e.IBV_WC_LOC_LEN_ERR,
      f"short receive: IBV_WC_LOC_LEN_ERR ({[w.status for w in r]})")
check(state(qp) == e.IBV_QPS_ERR, "short receive: the QP is in ERR")
qp.close()

# --- a basic SRQ: datagrams land in its WQEs in the order posted ---
srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=8, max_sge=1)))
a = srq.query()
check(a.max_wr >= 8 and a.max_sge >= 1, f"SRQ: ibv_query_srq max_wr {a.max_wr}, max_sge {a.max_sge}")
qp = new_qp(srq)
for i in range(3):
    srq.post_recv(RecvWR(wr_id=500 + i, num_sge=1, sg=[SGE(mr.buf + 4096 + 2048 * i, 2048, mr.lkey)]))
for i in range(3):
    mr.write(bytes([0x60 + i]) * (32 + i), 32 + i, 256 * i)
    swr = SendWR(wr_id=20 + i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf + 256 * i, 32 + i, mr.lkey)],
                 send_flags=e.IBV_SEND_SIGNALED)
    swr.set_wr_ud(own4, qp.qp_num, QKEY)
    qp.post_send(swr)
wcs = poll(6)
recv = [w for w in wcs if w.opcode == e.IBV_WC_RECV]
check([(w.wr_id, w.status, w.byte_len) for w in recv] == [(500 + i, 0, 40 + 32 + i) for i in range(3)],
      f"SRQ: three datagrams in the posted order ({[(w.wr_id, w.status, w.byte_len) for w in recv]})")
check(all(mr.read(32 + i, 4096 + 2048 * i + 40) == bytes([0x60 + i]) * (32 + i) for i in range(3)),
      "SRQ: each payload in its own WQE's buffer, after the GRH area")
srq.modify(SrqAttr(srq_limit=2), e.IBV_SRQ_LIMIT)
check(srq.query().srq_limit == 2, "SRQ: ibv_modify_srq keeps the limit")
try:
    srq.modify(SrqAttr(max_wr=16), e.IBV_SRQ_MAX_WR)
    check(False, "SRQ: a resize is refused")
except PyverbsRDMAError as ex:
    check(ex.error_code == 22, f"SRQ: a resize is refused with EINVAL ({ex.error_code})")
qp.close()
srq.close()

# --- and the port still works ---
qp = new_qp()
qp.post_recv(RecvWR(wr_id=400, num_sge=1, sg=[SGE(mr.buf + 4096, 2048, mr.lkey)]))
swr = SendWR(wr_id=11, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)],
             send_flags=e.IBV_SEND_SIGNALED)
swr.set_wr_ud(own6, qp.qp_num, QKEY)
qp.post_send(swr)
wcs = poll(2)
check(sorted((w.wr_id, w.status) for w in wcs) == [(11, 0), (400, 0)], "a fresh QP sends and receives")
qp.close()

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
