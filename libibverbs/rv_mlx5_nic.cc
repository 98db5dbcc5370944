/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The NIC of the mlx5 device kind (rv_mlx5_nic.h): its poll thread and
 * data path. What it reads and writes is the PRM's, as <infiniband/mlx5dv.h>
 * lays it out and libmlx5 v44 writes and reads it:
 *
 * - Send: the doorbell record's SND word (the low 16 bits of the
 *   provider's cur_post) is the producer; WQEs from the NIC's consumer up
 *   to it are executed in order. A WQE is 64-byte basic blocks: the
 *   control segment (opcode, WQE index, QPN, DS = size in 16-byte units,
 *   fm_ce_se), the datagram segment (struct mlx5_wqe_av: 48 bytes when
 *   dqp_dct has MLX5_EXTENDED_UD_AV, 16 bytes otherwise), then data
 *   segments (lkey, address, length) or inline segments (MLX5_INLINE_SEG
 *   with the length, then the bytes); every 16-byte unit past the ring's
 *   end wraps to its start. BlueFlame and UAR doorbell writes land in
 *   memory nobody reads: the record is authoritative.
 * - Send CQE: REQ, the WQE's opcode and QPN in sop_drop_qpn, its index in
 *   wqe_counter, the user index in srqn_uidx (CQE version 1), when the WQE
 *   asked for one (CQ_UPDATE) or failed.
 * - Receive: RQ WQEs are lists of data segments ended by MLX5_INVALID_LKEY
 *   or the WQE's end; the RCV word is the producer. The GRH area (40
 *   bytes: the IPv6 header, or 20 zero bytes and the IPv4 header) then the
 *   payload are scattered in order; the responder CQE has the byte count,
 *   flags_rqpn = GRH-in-data (bit 28), the RoCE L3 type (bits 25:24, 1
 *   IPv6, 2 IPv4) and the source QPN, the immediate, the user index.
 * - Owner bit: a CQE at producer index pi has owner (pi >> log2 ncqe) & 1;
 *   a full CQ (pi - SET_CI == ncqe) loses the CQE (cq_overrun).
 * - Arming: the ARM_DB word of the CQ's doorbell record (sn << 28 | cmd |
 *   ci) and the 64-bit doorbell at UAR offset 0x20 ({that word, cqn});
 *   either changing arms the CQ, and its next CQE raises one event on
 *   its channel.
 * - Errors: a bad lkey, a length over the MTU, a bad opcode or DS count:
 *   an error CQE with the PRM's syndrome, the QP to ERR, and from then on
 *   every posted WQE is flushed (WR_FLUSH_ERR).
 *
 * The thread spins while there is work and sleeps (10 us growing to
 * 200 us) when there is none: two busy processes share two CPUs here.
 * Per packet: no system call, lock or allocation (a completion event is a
 * write(2) on the channel's eventfd, as the kernel's is a wake-up).
 */
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <system_error>

#include <infiniband/mlx5dv.h>
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <rte_cycles.h>

#include "rv.h"
#include "rv_mlx5_nic.h"
#include "soft_datapath.h"

namespace rdgram::rv::m5 {

namespace {

static_assert(sizeof(mlx5_cqe64) == 64);
static_assert(sizeof(mlx5_err_cqe) == 64);
static_assert(sizeof(mlx5_wqe_ctrl_seg) == 16);
static_assert(sizeof(mlx5_wqe_av) == 48);
static_assert(sizeof(mlx5_wqe_data_seg) == 16);

constexpr uint32_t compact_av_len = 16;
constexpr uint8_t cqe_flag_l3_in_data = 1; /* flags_rqpn bit 28 */

inline uint32_t load_be32(const uint32_t *p) { return be32toh(__atomic_load_n(p, __ATOMIC_ACQUIRE)); }

/* The next CQE slot of c, or null when the CQ is full (counted). */
mlx5_cqe64 *cqe_slot(nic &n, cq &c)
{
	const uint32_t ci = load_be32(&c.dbrec[MLX5_CQ_SET_CI]) & 0xffffff;
	if (unlikely(((c.pi - ci) & 0xffffff) >= c.ncqe)) {
		n.ctr.cq_overrun++;
		return nullptr;
	}
	uint8_t *e = c.buf + size_t(c.pi & (c.ncqe - 1)) * c.cqe_sz;
	return reinterpret_cast<mlx5_cqe64 *>(e + c.cqe_sz - 64);
}

/* An arm seen in c's ARM_DB word (sn << 28 | cmd | ci): the next CQE
 * raises the event; CQEs already in the CQ do not (ibv_req_notify_cq(3):
 * "the next completion"; perftest's -e loops poll once per event and
 * count on it). */
inline void arm(cq &c, uint32_t word)
{
	c.armed = true;
	c.sol_only = (word & MLX5_CQ_DB_REQ_NOT_SOL) != 0;
}

/* Publishes a CQE whose other fields are written: op_own last (the
 * provider reads op_own, then the rest after a read barrier). A CQ with
 * a channel looks at its ARM_DB word once more after the CQE is out: a
 * program arms, then polls; when its poll missed this CQE, its arm was
 * written before the CQE (both sides store, then load), and must raise
 * the event, even though this round's watch_arms came too early. */
void cqe_publish(cq &c, mlx5_cqe64 *e, uint8_t opcode, bool solicited)
{
	const uint8_t owner = uint8_t((c.pi >> c.log_ncqe) & 1);
	const uint8_t op_own = uint8_t(opcode << 4 | owner);
	c.pi++;
	if (c.chan == nullptr) {
		__atomic_store_n(&e->op_own, op_own, __ATOMIC_RELEASE);
	} else {
		/* A sequentially consistent exchange orders the CQE's store
		 * before the arm word's load (x86 reorders a store after a
		 * later load; xchg is a full barrier). Not a fence: GCC's
		 * TSan takes none (-Wtsan). */
		__atomic_exchange_n(&e->op_own, op_own, __ATOMIC_SEQ_CST);
		const uint32_t w = load_be32(&c.dbrec[MLX5_CQ_ARM_DB]);
		if (w != c.arm_seen) {
			c.arm_seen = w;
			arm(c, w);
		}
	}
	if (c.armed && (!c.sol_only || solicited))
		c.fire = true;
}

void write_err_cqe(nic &n, cq &c, qp &q, uint8_t opcode, uint8_t syndrome, uint16_t wqe_counter,
		   uint8_t wqe_opcode)
{
	auto *e = reinterpret_cast<mlx5_err_cqe *>(cqe_slot(n, c));
	if (e == nullptr)
		return;
	memset(e, 0, 63);
	e->srqn = htobe32(q.uidx);
	e->syndrome = syndrome;
	e->vendor_err_synd = 0;
	e->s_wqe_opcode_qpn = htobe32(uint32_t(wqe_opcode) << 24 | q.qpn);
	e->wqe_counter = htobe16(wqe_counter);
	cqe_publish(c, reinterpret_cast<mlx5_cqe64 *>(e), opcode, true);
}

/* A QP that met an error: ERR, and what is posted is flushed. */
void to_error(nic &n, qp &q)
{
	q.state = IBV_QPS_ERR;
	flush(n, q);
}

/* The 16-byte unit u (from the WQE at index wqe) of q's SQ, wrapped. */
inline const uint8_t *sq_unit(const qp &q, uint32_t wqe, uint32_t u)
{
	const uint32_t bytes = q.sq_cnt * MLX5_SEND_WQE_BB;
	return q.sq + ((size_t(wqe) * MLX5_SEND_WQE_BB + size_t(u) * 16) & (bytes - 1));
}

/* len bytes from unit u, byte off, of the WQE at wqe, into dst. */
void sq_copy(const qp &q, uint32_t wqe, uint32_t u, uint32_t off, void *dst, uint32_t len)
{
	auto *o = static_cast<uint8_t *>(dst);
	const uint32_t bytes = q.sq_cnt * MLX5_SEND_WQE_BB;
	size_t at = (size_t(wqe) * MLX5_SEND_WQE_BB + size_t(u) * 16 + off) & (bytes - 1);
	while (len != 0) {
		const uint32_t k = std::min<uint32_t>(len, uint32_t(bytes - at));
		memcpy(o, q.sq + at, k);
		o += k;
		len -= k;
		at = 0;
	}
}

inline const mr *mr_of(const nic &n, uint32_t lkey, uint64_t addr, uint32_t len)
{
	const mr *m = n.mrs[(lkey >> 8) & (max_mrs - 1)];
	if (m == nullptr || m->lkey != lkey || addr < m->lo || addr + len > m->hi || addr + len < addr)
		return nullptr;
	return m;
}

inline const av_entry *av_find(nic &n, const mlx5_wqe_av &av)
{
	const uint8_t sgid = uint8_t(be32toh(av.grh_gid_fl) >> 20);
	const av_entry *old = nullptr;
	for (const av_entry &e : n.avs) {
		if (e.sgid_index != sgid || memcmp(e.rgid, av.rgid, 16) != 0)
			continue;
		if (e.refs != 0)
			return &e;
		if (e.retired && old == nullptr)
			old = &e;
	}
	if (old != nullptr)
		n.ctr.tx_av_retired++;
	return old;
}

/* One parsed send WQE, ready for the soft queue. */
struct parsed {
	send_wr s;
	uint16_t index; /* the WQE index (wqe_counter) */
	uint8_t opcode;
	bool signaled;
	bool loop;
	uint32_t bbs;
};

enum class verdict { send, skip, error };

/* Parses the WQE at q.sq_ci into p. error: *syndrome says which, and the
 * counter is moved. skip: complete without sending (NOP, unknown AV). */
verdict parse_wqe(nic &n, qp &q, parsed &p, uint8_t *gather, uint8_t *syndrome)
{
	const rv_device &d = *n.d;
	mlx5_wqe_ctrl_seg ctrl;
	memcpy(&ctrl, sq_unit(q, q.sq_ci, 0), sizeof(ctrl));
	const uint32_t oio = be32toh(ctrl.opmod_idx_opcode);
	const uint32_t ds = be32toh(ctrl.qpn_ds) & 0x3f;
	p.opcode = uint8_t(oio & 0xff);
	p.index = q.sq_ci;
	p.signaled = (ctrl.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) != 0 || q.sq_sig_all;
	p.loop = false;
	p.bbs = std::max<uint32_t>(1, (ds * 16 + MLX5_SEND_WQE_BB - 1) / MLX5_SEND_WQE_BB);
	if (unlikely(ds == 0 || p.bbs > q.sq_cnt)) {
		n.ctr.tx_ds_err++;
		p.bbs = 1;
		*syndrome = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		return verdict::error;
	}
	if (p.opcode == MLX5_OPCODE_NOP)
		return verdict::skip;
	if (unlikely(p.opcode != MLX5_OPCODE_SEND && p.opcode != MLX5_OPCODE_SEND_IMM)) {
		n.ctr.tx_opcode_err++;
		*syndrome = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		return verdict::error;
	}
	/* The datagram segment: the compact form's 16 bytes first. */
	mlx5_wqe_av av{};
	sq_copy(q, q.sq_ci, 1, 0, &av, compact_av_len);
	const uint32_t dqp = be32toh(av.dqp_dct);
	uint32_t u = 2; /* the next 16-byte unit */
	if (unlikely(!(dqp & MLX5_EXTENDED_UD_AV))) {
		n.ctr.tx_compact_av++;
		*syndrome = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		return verdict::error;
	}
	if (unlikely(ds < 4)) {
		n.ctr.tx_ds_err++;
		*syndrome = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
		return verdict::error;
	}
	sq_copy(q, q.sq_ci, 1, 0, &av, sizeof(av));
	u = 4;
	/* The payload: data and inline segments up to DS. */
	uint32_t len = 0;
	bool gathered = false; /* the payload is in gather, not at one */
	const uint8_t *one = nullptr; /* a single data segment: sent from where it is */
	while (u < ds) {
		uint32_t bc;
		memcpy(&bc, sq_unit(q, q.sq_ci, u), 4);
		bc = be32toh(bc);
		if (bc & MLX5_INLINE_SEG) {
			const uint32_t k = bc & ~uint32_t(MLX5_INLINE_SEG);
			const uint32_t units = (4 + k + 15) / 16;
			if (unlikely(u + units > ds)) {
				n.ctr.tx_ds_err++;
				*syndrome = MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
				return verdict::error;
			}
			if (unlikely(len + k > d.cfg.mtu)) {
				n.ctr.tx_len_err++;
				*syndrome = MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
				return verdict::error;
			}
			if (!gathered && len != 0)
				memcpy(gather, one, len);
			gathered = true;
			sq_copy(q, q.sq_ci, u, 4, gather + len, k);
			len += k;
			u += units;
			continue;
		}
		mlx5_wqe_data_seg seg;
		sq_copy(q, q.sq_ci, u, 0, &seg, sizeof(seg));
		u++;
		const uint32_t k = be32toh(seg.byte_count);
		if (k == 0)
			continue;
		const uint64_t addr = be64toh(seg.addr);
		if (unlikely(mr_of(n, be32toh(seg.lkey), addr, k) == nullptr)) {
			n.ctr.tx_lkey_err++;
			*syndrome = MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
			return verdict::error;
		}
		if (unlikely(len + k > d.cfg.mtu)) {
			n.ctr.tx_len_err++;
			*syndrome = MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
			return verdict::error;
		}
		const auto *src = reinterpret_cast<const uint8_t *>(uintptr_t(addr));
		if (len == 0 && !gathered) {
			one = src;
		} else {
			if (!gathered)
				memcpy(gather, one, len);
			gathered = true;
			memcpy(gather + len, src, k);
		}
		len += k;
	}
	const av_entry *e = av_find(n, av);
	if (unlikely(e == nullptr)) {
		n.ctr.tx_av_unknown++;
		return verdict::skip;
	}
	p.loop = e->loop;
	p.s.ah = e->h;
	p.s.remote_qpn = dqp & 0xffffff;
	p.s.remote_qkey = be32toh(av.key.qkey.qkey);
	p.s.mbuf = nullptr;
	p.s.inline_data = gathered ? gather : one;
	p.s.inline_len = len;
	p.s.imm_data = p.opcode == MLX5_OPCODE_SEND_IMM ? ctrl.imm : 0;
	p.s.flags = uint16_t(send_inline | (p.opcode == MLX5_OPCODE_SEND_IMM ? send_imm : 0) |
			     ((ctrl.fm_ce_se & MLX5_WQE_CTRL_SOLICITED) ? send_solicited : 0));
	return verdict::send;
}

void send_cqe(nic &n, qp &q, const parsed &p)
{
	if (!p.signaled)
		return;
	mlx5_cqe64 *e = cqe_slot(n, *q.scq);
	if (e == nullptr)
		return;
	memset(e, 0, 63);
	e->srqn_uidx = htobe32(q.uidx);
	e->sop_drop_qpn = htobe32(uint32_t(p.opcode) << 24 | q.qpn);
	e->wqe_counter = htobe16(p.index);
	e->byte_cnt = htobe32(p.s.inline_len);
	cqe_publish(*q.scq, e, MLX5_CQE_REQ, false);
}

void deliver(nic &n, const recv_wc &r);

/* Executes q's posted send WQEs, a burst at a time. true: work done. */
bool run_sq(nic &n, qp &q)
{
	rv_device &d = *n.d;
	bool work = false;
	for (;;) {
		const uint16_t pi = uint16_t(load_be32(&q.db[MLX5_SND_DBR]));
		if (q.sq_ci == pi)
			return work;
		if (q.state != IBV_QPS_RTS) {
			/* Posted before RTS: waits for it (or a reset) without
			 * counting as work, so the thread still goes to sleep. */
			if (q.state == IBV_QPS_ERR)
				flush(n, q);
			return work;
		}
		work = true;
		parsed b[32];
		unsigned nb = 0;
		uint16_t ci = q.sq_ci;
		bool failed = false;
		while (ci != pi && nb < 32) {
			parsed &p = b[nb];
			const uint16_t save = q.sq_ci;
			q.sq_ci = ci;
			uint8_t syn = 0;
			const verdict v = parse_wqe(n, q, p, n.gather[nb], &syn);
			q.sq_ci = save;
			if (v == verdict::error) {
				/* What came before it goes first. */
				failed = true;
				p.s.inline_len = syn; /* the syndrome, kept for below */
				break;
			}
			ci = uint16_t(ci + p.bbs);
			if (v == verdict::skip) {
				p.s.inline_len = 0;
				p.s.flags = 0xffff; /* not for the wire */
			}
			nb++;
		}
		/* Send the burst in order; what the port does not take waits. */
		d.q.select_send_qp(unsigned(q.sidx));
		unsigned done = 0;
		while (done < nb) {
			if (b[done].s.flags == 0xffff) {
				q.sq_ci = uint16_t(q.sq_ci + b[done].bbs);
				send_cqe(n, q, b[done]);
				done++;
				continue;
			}
			if (b[done].loop) {
				/* The WQE is done before its datagram is received:
				 * the receive may put this very QP in ERR, which
				 * flushes from the consumer counter on. */
				recv_wc r;
				const bool got = d.q.tx_loopback(b[done].s, r);
				q.sq_ci = uint16_t(q.sq_ci + b[done].bbs);
				send_cqe(n, q, b[done]);
				n.ctr.tx_wqes++;
				done++;
				if (got)
					deliver(n, r);
				if (q.state != IBV_QPS_RTS)
					return work;
				continue;
			}
			unsigned run = done;
			send_wr w[32];
			unsigned k = 0;
			while (run < nb && b[run].s.flags != 0xffff && !b[run].loop)
				w[k++] = b[run++].s;
			const unsigned took = d.q.tx_burst(w, uint16_t(k));
			for (unsigned i = 0; i < took; i++) {
				q.sq_ci = uint16_t(q.sq_ci + b[done].bbs);
				send_cqe(n, q, b[done]);
				n.ctr.tx_wqes++;
				done++;
			}
			if (took < k)
				return work; /* the port is full: the rest next round */
		}
		if (failed) {
			mlx5_wqe_ctrl_seg ctrl;
			memcpy(&ctrl, sq_unit(q, q.sq_ci, 0), sizeof(ctrl));
			write_err_cqe(n, *q.scq, q, MLX5_CQE_REQ_ERR, uint8_t(b[nb].s.inline_len), q.sq_ci,
				      uint8_t(be32toh(ctrl.opmod_idx_opcode) & 0xff));
			q.sq_ci = uint16_t(q.sq_ci + std::max<uint32_t>(1, b[nb].bbs));
			to_error(n, q);
			return work;
		}
	}
}

inline qp *qp_by_num(nic &n, uint32_t qpn)
{
	qp *q = n.qps[qpn & (max_qps - 1)];
	return q != nullptr && q->qpn == qpn ? q : nullptr;
}

/* One datagram into its QP's next receive WQE. Frees the mbuf. */
void deliver(nic &n, const recv_wc &r)
{
	qp *q = qp_by_num(n, r.qp_num);
	if (unlikely(q == nullptr)) {
		n.ctr.rx_no_qp++;
		rte_pktmbuf_free(r.mbuf);
		return;
	}
	if (unlikely(q->state != IBV_QPS_RTR && q->state != IBV_QPS_RTS)) {
		n.ctr.rx_qp_not_ready++;
		rte_pktmbuf_free(r.mbuf);
		return;
	}
	const uint8_t *w;
	uint32_t nsegs;
	uint16_t index;
	if (q->srq != nullptr) {
		/* The SRQ's next WQE in its list; its data segments follow
		 * the next segment. */
		m5::srq &s = *q->srq;
		if (unlikely(uint16_t(load_be32(s.db)) == s.consumed)) {
			n.ctr.rx_no_wqe++;
			rte_pktmbuf_free(r.mbuf);
			return;
		}
		index = s.head;
		const uint8_t *sw = s.buf + (size_t(index & (s.max - 1)) << s.wqe_shift);
		mlx5_wqe_srq_next_seg next;
		memcpy(&next, sw, sizeof(next));
		s.head = be16toh(next.next_wqe_index);
		s.consumed++;
		w = sw + sizeof(next);
		nsegs = s.max_gs;
	} else {
		const uint16_t pi = uint16_t(load_be32(&q->db[MLX5_RCV_DBR]));
		if (unlikely(q->rq_ci == pi || q->rq_cnt == 0)) {
			n.ctr.rx_no_wqe++;
			rte_pktmbuf_free(r.mbuf);
			return;
		}
		index = q->rq_ci;
		q->rq_ci++;
		w = q->rq + (size_t(index & (q->rq_cnt - 1)) << q->rq_shift);
		nsegs = (1u << q->rq_shift) / 16;
	}
	const uint8_t *src = rte_pktmbuf_mtod(r.mbuf, const uint8_t *);
	uint32_t left = r.byte_len;
	uint8_t syndrome = 0;
	for (uint32_t i = 0; i < nsegs && left != 0; i++) {
		mlx5_wqe_data_seg seg;
		memcpy(&seg, w + i * 16, sizeof(seg));
		const uint32_t lkey = be32toh(seg.lkey);
		if (lkey == MLX5_INVALID_LKEY)
			break;
		const uint32_t room = be32toh(seg.byte_count);
		const uint32_t k = std::min(left, room);
		if (k == 0)
			continue;
		const uint64_t addr = be64toh(seg.addr);
		if (unlikely(mr_of(n, lkey, addr, k) == nullptr)) {
			syndrome = MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
			break;
		}
		memcpy(reinterpret_cast<void *>(uintptr_t(addr)), src, k);
		src += k;
		left -= k;
	}
	if (syndrome == 0 && left != 0)
		syndrome = MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
	if (unlikely(syndrome != 0)) {
		if (syndrome == MLX5_CQE_SYNDROME_LOCAL_PROT_ERR)
			n.ctr.rx_lkey_err++;
		else
			n.ctr.rx_len_err++;
		rte_pktmbuf_free(r.mbuf);
		write_err_cqe(n, *q->rcq, *q, MLX5_CQE_RESP_ERR, syndrome, index, 0);
		to_error(n, *q);
		return;
	}
	mlx5_cqe64 *e = cqe_slot(n, *q->rcq);
	if (e != nullptr) {
		memset(e, 0, 63);
		const uint32_t l3 = r.l3 == l3_type::ipv4 ? MLX5_CQE_L3_HDR_TYPE_IPV4
				    : r.l3 == l3_type::ipv6 ? MLX5_CQE_L3_HDR_TYPE_IPV6
							    : MLX5_CQE_L3_HDR_TYPE_NONE;
		e->flags_rqpn = htobe32(uint32_t(cqe_flag_l3_in_data) << 28 | l3 << 24 | (r.src_qp & 0xffffff));
		e->l4_hdr_type_etc = uint8_t(l3 << 2);
		const bool imm = (r.wc_flags & wc_with_imm) != 0;
		e->imm_inval_pkey = imm ? r.imm_data : htobe32(r.pkey_index);
		e->srqn_uidx = htobe32(q->uidx);
		e->byte_cnt = htobe32(r.byte_len);
		e->sop_drop_qpn = htobe32(q->qpn);
		e->wqe_counter = htobe16(index);
		cqe_publish(*q->rcq, e, imm ? MLX5_CQE_RESP_SEND_IMM : MLX5_CQE_RESP_SEND,
			    (r.wc_flags & wc_solicited) != 0);
	}
	n.ctr.rx_delivered++;
	rte_pktmbuf_free(r.mbuf);
}

/* Arm doorbells seen since the last round. */
void watch_arms(nic &n)
{
	for (unsigned i = 0; i < max_uars; i++) {
		if (n.uar_db[i] == nullptr)
			continue;
		const uint64_t v = __atomic_load_n(n.uar_db[i], __ATOMIC_ACQUIRE);
		if (v == n.uar_seen[i])
			continue;
		n.uar_seen[i] = v;
		/* Written as one big-endian 64-bit word: {arm word, cqn}. */
		const uint64_t h = be64toh(v);
		const uint32_t cqn = uint32_t(h) & 0xffffff;
		if (cqn >= 1 && cqn <= max_cqs && n.cqs[cqn - 1] != nullptr && n.cqs[cqn - 1]->chan != nullptr) {
			cq &c = *n.cqs[cqn - 1];
			c.arm_seen = load_be32(&c.dbrec[MLX5_CQ_ARM_DB]);
			arm(c, uint32_t(h >> 32));
		}
	}
	for (cq *c : n.cqs) {
		if (c == nullptr || c->chan == nullptr)
			continue;
		const uint32_t w = load_be32(&c->dbrec[MLX5_CQ_ARM_DB]);
		if (w != c->arm_seen) {
			c->arm_seen = w;
			arm(*c, w);
		}
	}
}

void raise_events(nic &n)
{
	for (cq *c : n.cqs) {
		if (c == nullptr || !c->fire)
			continue;
		c->fire = false;
		if (!c->armed || c->chan == nullptr)
			continue;
		c->armed = false;
		rv_channel *ch = c->chan;
		{
			std::lock_guard<std::mutex> g(ch->mu);
			ch->events.push_back(c->ibcq);
			c->events_reported++;
		}
		const uint64_t one = 1;
		ssize_t w = write(ch->ch.fd, &one, sizeof(one));
		(void)w;
		n.ctr.events++;
	}
}

/* One round: arms, sends, receives, events. true: work done. (dp) */
bool round(nic &n)
{
	rv_device &d = *n.d;
	bool work = false;
	watch_arms(n);
	for (qp *q : n.qps) {
		if (q == nullptr || q->sidx < 0)
			continue;
		if (unlikely(q->state == IBV_QPS_ERR))
			flush(n, *q); /* what was posted to a QP in ERR */
		else
			work |= run_sq(n, *q);
	}
	recv_wc wcs[soft::soft_queue::max_burst];
	const unsigned k = d.q.rx_burst(wcs, soft::soft_queue::max_burst);
	for (unsigned i = 0; i < k; i++)
		deliver(n, wcs[i]);
	work |= k != 0;
	if (unlikely(d.q.counters().rx_to_control != n.ctl_seen)) {
		n.ctl_seen = d.q.counters().rx_to_control;
		service_wake();
	}
	d.q.tx_flush();
	work |= d.q.tx_pending() != 0;
	raise_events(n);
	return work;
}

void run(nic *n)
{
	prctl(PR_SET_TIMERSLACK, 1000UL);
	rv_device &d = *n->d;
	unsigned idle = 0;
	while (!n->stop.load(std::memory_order_acquire)) {
		dp_lock(d);
		const bool work = round(*n);
		dp_unlock(d);
		if (work) {
			idle = 0;
			continue;
		}
		/* Nothing: spin a little (a peer's answer is near), then sleep,
		 * longer the longer nothing comes. Not sched_yield: against a
		 * program busy-polling its CQ on the same CPU it gives away a
		 * whole time slice, where a short sleep is woken (and preempts)
		 * in microseconds. */
		if (++idle < 32) {
			rte_pause();
			continue;
		}
		const long us = idle < 20000 ? 5 : 200;
		const timespec ts{0, us * 1000};
		nanosleep(&ts, nullptr);
	}
}

} // namespace

bool assist(rv_device &d)
{
	nic *n = d.nic;
	if (n == nullptr || !dp_trylock(d))
		return false;
	round(*n);
	dp_unlock(d);
	return true;
}

void flush(nic &n, qp &q)
{
	/* Send WQEs: each completes with WR_FLUSH_ERR. */
	/* Signed distances: a consumer never passes its producer, and if it
	 * did this would not flush 65535 WQEs. */
	const uint16_t spi = uint16_t(load_be32(&q.db[MLX5_SND_DBR]));
	while (int16_t(uint16_t(spi - q.sq_ci)) > 0) {
		mlx5_wqe_ctrl_seg ctrl;
		memcpy(&ctrl, sq_unit(q, q.sq_ci, 0), sizeof(ctrl));
		const uint32_t ds = be32toh(ctrl.qpn_ds) & 0x3f;
		write_err_cqe(n, *q.scq, q, MLX5_CQE_REQ_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, q.sq_ci,
			      uint8_t(be32toh(ctrl.opmod_idx_opcode) & 0xff));
		q.sq_ci = uint16_t(q.sq_ci + std::max<uint32_t>(1, (ds * 16 + 63) / 64));
		n.ctr.flushed++;
	}
	if (q.rq_cnt == 0)
		return;
	const uint16_t rpi = uint16_t(load_be32(&q.db[MLX5_RCV_DBR]));
	while (int16_t(uint16_t(rpi - q.rq_ci)) > 0) {
		write_err_cqe(n, *q.rcq, q, MLX5_CQE_RESP_ERR, MLX5_CQE_SYNDROME_WR_FLUSH_ERR, q.rq_ci, 0);
		q.rq_ci++;
		n.ctr.flushed++;
	}
}

int start(rv_device &d)
{
	auto *n = new (std::nothrow) nic;
	if (n == nullptr)
		return ENOMEM;
	n->d = &d;
	try {
		n->th = std::thread(run, n);
	} catch (const std::system_error &ex) {
		delete n;
		return ex.code().value() != 0 ? ex.code().value() : EAGAIN;
	}
	d.nic = n;
	return 0;
}

void stop(rv_device &d)
{
	nic *n = d.nic;
	if (n == nullptr || !n->th.joinable())
		return;
	n->stop.store(true, std::memory_order_release);
	n->th.join();
	/* Frames built and not yet taken go back to the pool. */
	dp_lock(d);
	d.q.tx_flush();
	dp_unlock(d);
}

void print_counters(const rv_device &d)
{
	if (d.nic == nullptr)
		return;
	const counters &c = d.nic->ctr;
	fprintf(stderr, "rdgram-verbs: %s (mlx5 NIC):\n", d.cfg.name.c_str());
#define RV_M5_PRINT(f, desc)                                                                           \
	if (c.f != 0)                                                                                  \
		fprintf(stderr, "  %-24s %12llu  %s\n", #f, (unsigned long long)c.f, desc);
	RV_M5_COUNTERS(RV_M5_PRINT)
#undef RV_M5_PRINT
}

} // namespace rdgram::rv::m5
