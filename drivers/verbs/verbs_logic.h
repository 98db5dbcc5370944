/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/verbs: the decisions the verbs driver makes, apart from the verbs
 * calls that carry them out, so they can be tested on a machine without an
 * RDMA device (tests/unit/test_verbs_logic.cc):
 *   (the port facts and the lkey map, which mlx5 and EFA share, are in
 *   drivers/common/ibv: ibv_port.h, ibv_lkey_map.h)
 *   - the send ring: which mbufs a signalled completion releases;
 *   - one burst of send_wr as a chained ibv_send_wr list (postlist), with
 *     selective signalling, inline data when it fits, immediate data;
 *   - a batch of receive buffers as a chained ibv_recv_wr list;
 *   - ibv_wc (+ the 40-byte GRH area) into recv_wc.
 * Nothing here calls libibverbs; it only uses its structures. The rings'
 * allocation (init) is set-up, out of line in verbs_queue.cc.
 */
#ifndef RDGRAM_VERBS_LOGIC_H
#define RDGRAM_VERBS_LOGIC_H

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include <infiniband/verbs.h>
#include <rte_branch_prediction.h>
#include <rte_mbuf.h>

#include "ibv_lkey_map.h"
#include "ibv_port.h"
#include "rdgram/ah_from_wc.h"
#include "rdgram/device.h"
#include "rdgram/stats.h"
#include "rdgram/ud.h"
#include "rdgram/wire.h"

namespace rdgram::verbs {

using ibv::gid_kind;
using ibv::lkey_map;

/* ----------------------------------------------------------- send ring */

/*
 * The send queue's outstanding work requests, in posting order: one entry
 * per posted WR (the mbuf to free when it is done, or nullptr when the
 * payload went inline from the caller's buffer). A WR's wr_id is its
 * sequence number. Only one WR in N asks for a completion
 * (IBV_SEND_SIGNALED); a send queue completes in order (IBA 10.8.3), so a
 * completion for sequence s means every WR up to s is done, and complete()
 * releases them all. Errors generate a completion even for unsignalled WRs
 * (ibv_post_send(3)); those release the same way.
 * (NOT multi-thread safe: owned by one poll thread.)
 */
class tx_ring {
public:
	/* depth: the send queue's size (WRs in flight at most). 0 or EINVAL.
	 * (Set-up: allocates the slots; verbs_queue.cc.) */
	int init(uint32_t depth);
	uint32_t depth() const { return depth_; }
	uint32_t outstanding() const { return uint32_t(tail_ - head_); }
	uint32_t room() const { return depth_ - outstanding(); }
	uint64_t next_seq() const { return tail_; }

	/* Records a WR about to be posted; returns its sequence (wr_id).
	 * The caller checked room(). */
	uint64_t push(rte_mbuf *m)
	{
		slots_[tail_ & mask_] = m;
		return tail_++;
	}
	/* Un-records the WRs from seq on (ibv_post_send refused them),
	 * calling f(seq, mbuf) for each, oldest first. */
	template <class F> void rollback(uint64_t seq, F &&f)
	{
		if (seq < head_ || seq > tail_)
			return;
		for (uint64_t s = seq; s < tail_; s++)
			f(s, slots_[s & mask_]);
		tail_ = seq;
	}
	/* A completion for sequence seq: releases every WR up to and including
	 * it, calling f(mbuf) for each non-null mbuf. Returns how many WRs were
	 * released: 0 for a sequence already released or never posted. */
	template <class F> uint32_t complete(uint64_t seq, F &&f)
	{
		if (seq < head_ || seq >= tail_)
			return 0;
		const uint64_t from = head_;
		for (uint64_t s = from; s <= seq; s++) {
			rte_mbuf *m = slots_[s & mask_];
			if (m != nullptr)
				f(m);
		}
		head_ = seq + 1;
		return uint32_t(seq + 1 - from);
	}
	/* Releases everything outstanding (queue teardown, after the QP is
	 * gone: the device no longer reads the buffers). */
	template <class F> uint32_t drain(F &&f)
	{
		return tail_ == head_ ? 0 : complete(tail_ - 1, f);
	}

private:
	std::vector<rte_mbuf *> slots_;
	uint32_t mask_ = 0;
	uint32_t depth_ = 0;
	uint64_t head_ = 0, tail_ = 0;
};

/* -------------------------------------------------------- receive ring */

/*
 * The receive queue's posted buffers, in posting order, so that the driver
 * itself can give back every buffer the device still holds once the QP is
 * destroyed. Moving a QP to the error state should flush each posted
 * receive WR with a completion (ibv_modify_qp(3), IBA 10.3.1), but rxe on
 * Linux 6.1 flushes none for a UD QP: without this ring those buffers were
 * lost to the pool. A receive queue completes in order (IBA 10.8.3), so a
 * completion is normally the oldest entry; one that is not (a provider
 * that reorders) leaves a hole that is skipped once the entries before it
 * complete. (NOT multi-thread safe: owned by one poll thread.)
 */
class rx_ring {
public:
	/* depth: the receive queue's size. Room is twice that (rounded up to
	 * a power of two), so holes left by reordered completions do not
	 * stop the refill. 0 or EINVAL. (Set-up: allocates the slots;
	 * verbs_queue.cc.) */
	int init(uint32_t depth);
	/* Buffers posted and not completed. */
	uint32_t outstanding() const { return live_; }
	/* Entries that can still be recorded. */
	uint32_t room() const { return uint32_t(slots_.size() - (tail_ - head_)); }

	/* Records a posted buffer. The caller checked room(). */
	void push(rte_mbuf *m)
	{
		slots_[tail_++ & mask_] = m;
		live_++;
	}
	/* A completion for buffer m: true, or false for a buffer never
	 * recorded (or already completed). */
	bool complete(const rte_mbuf *m)
	{
		if (likely(head_ != tail_ && slots_[head_ & mask_] == m)) {
			slots_[head_++ & mask_] = nullptr;
			live_--;
			skip_holes();
			return true;
		}
		for (uint64_t s = head_; s != tail_; s++)
			if (slots_[s & mask_] == m) {
				slots_[s & mask_] = nullptr;
				live_--;
				return true;
			}
		return false;
	}
	/* Gives every recorded buffer to f and forgets them (queue teardown,
	 * after the QP is destroyed: the device writes none of them any
	 * more). Returns how many. */
	template <class F> uint32_t drain(F &&f)
	{
		uint32_t n = 0;
		for (; head_ != tail_; head_++) {
			rte_mbuf *&m = slots_[head_ & mask_];
			if (m != nullptr) {
				f(m);
				m = nullptr;
				n++;
			}
		}
		live_ = 0;
		return n;
	}

private:
	void skip_holes()
	{
		while (head_ != tail_ && slots_[head_ & mask_] == nullptr)
			head_++;
	}
	std::vector<rte_mbuf *> slots_;
	uint32_t mask_ = 0;
	uint32_t live_ = 0;
	uint64_t head_ = 0, tail_ = 0;
};

/* ---------------------------------------------------------- send chain */

inline constexpr unsigned chain_max = 32;

struct tx_params {
	uint32_t max_inline = 0;   /* the QP's cap.max_inline_data */
	uint32_t own_qkey = 0;     /* the QP's Q_Key, for a WR's controlled (high-bit) Q_Key (attach sets it) */
	uint32_t mtu = 4096;       /* largest UD payload */
	uint32_t signal_every = 32; /* IBV_SEND_SIGNALED on one WR in this many */
};

enum class tx_drop_reason : uint8_t { stale_ah, too_long, bad_mbuf };

/* A send_wr taken but not sent. Its mbuf is freed and the drop counted
 * only once the post settled (see tx_chain::settle). */
struct tx_drop {
	uint16_t idx;       /* index in the burst */
	tx_drop_reason why;
	bool fresh;         /* m is a copy this driver allocated */
	rte_mbuf *m;        /* nullptr: nothing to free */
};

/*
 * One burst as a chained ibv_send_wr list (ibv_post_send(3): wr.next),
 * built by build_send_chain, posted with one ibv_post_send. Indices in
 * wr[] are chain positions; src[k] is the burst index of chain entry k.
 */
struct tx_chain {
	ibv_send_wr wr[chain_max];
	ibv_sge sge[chain_max];
	uint16_t src[chain_max];
	uint32_t since_before[chain_max]; /* signalling counter before entry k */
	uint32_t len[chain_max];          /* payload bytes */
	bool fresh[chain_max];            /* entry k's mbuf is our copy */
	unsigned n = 0;                   /* chain entries */
	tx_drop drops[chain_max];
	unsigned ndrops = 0;
	unsigned taken = 0;               /* burst WRs consumed */
	bool no_mbuf = false;             /* stopped: no mbuf for a copy */
};

/*
 * Builds the chain for wrs[0..n) (n <= chain_max, n <= ring.room()).
 * (NOT multi-thread safe: the queue's poll thread.)
 *
 * Per WR, in order: the AH (ah_of(handle) -> ibv_ah*, nullptr when stale:
 * drop stale_ah); the payload (send_inline: the caller's bytes; else one
 * mbuf segment: a null or chained mbuf is bad_mbuf); the MTU (too_long).
 * Payloads of at most p.max_inline bytes go inline (IBV_SEND_INLINE: the
 * provider copies them during ibv_post_send, no lkey needed, no DMA read);
 * a send_inline payload that does not fit is copied into an mbuf from
 * alloc() (registered memory: the caller's buffer is theirs again when
 * tx_burst returns; none: stop, no_mbuf); a non-inline buffer needs an
 * lkey (mrs; none: bad_mbuf). A remote Q_Key with the high bit set
 * becomes p.own_qkey. send_imm selects SEND_WITH_IMM,
 * send_solicited IBV_SEND_SOLICITED. Every p.signal_every-th WR posted on
 * the queue (since counts across bursts) is signalled, so unsignalled WRs
 * in flight never exceed signal_every - 1 and the ring always drains.
 * Each entry is recorded in ring (wr_id = its sequence); the mbuf stays in
 * the ring until its completion (also when the bytes went inline: freeing
 * it after the post would save little and complicate a refused post).
 */
template <class AhOf, class Alloc>
inline void build_send_chain(const send_wr *wrs, unsigned n, const tx_params &p, uint32_t &since,
			     tx_ring &ring, lkey_map &mrs, AhOf &&ah_of, Alloc &&alloc, tx_chain &c)
{
	c.n = 0;
	c.ndrops = 0;
	c.no_mbuf = false;
	unsigned i = 0;
	for (; i < n; i++) {
		const send_wr &w = wrs[i];
		const bool caller_inline = (w.flags & send_inline) != 0;
		rte_mbuf *m = caller_inline ? nullptr : w.mbuf;
		auto drop = [&](tx_drop_reason why, rte_mbuf *dm, bool fresh) {
			c.drops[c.ndrops++] = tx_drop{uint16_t(i), why, fresh, dm};
		};

		ibv_ah *ah = ah_of(w.ah);
		if (unlikely(ah == nullptr)) {
			drop(tx_drop_reason::stale_ah, m, false);
			continue;
		}
		const void *data;
		uint32_t len;
		if (caller_inline) {
			data = w.inline_data;
			len = w.inline_len;
		} else {
			if (unlikely(m == nullptr || m->nb_segs != 1)) {
				drop(tx_drop_reason::bad_mbuf, m, false);
				continue;
			}
			data = rte_pktmbuf_mtod(m, const void *);
			len = m->data_len;
		}
		if (unlikely(len > p.mtu)) {
			drop(tx_drop_reason::too_long, m, false);
			continue;
		}
		const bool inl = len <= p.max_inline;
		bool fresh = false;
		if (caller_inline && !inl) {
			rte_mbuf *copy = alloc();
			if (unlikely(copy == nullptr)) {
				c.no_mbuf = true;
				break;
			}
			char *d = rte_pktmbuf_append(copy, uint16_t(len));
			if (unlikely(d == nullptr)) {
				/* The pool's buffers are smaller than the MTU. */
				drop(tx_drop_reason::bad_mbuf, copy, true);
				continue;
			}
			memcpy(d, data, len);
			data = d;
			m = copy;
			fresh = true;
		}
		uint32_t lkey = 0;
		if (!inl && unlikely(!mrs.lookup(data, len, &lkey))) {
			drop(tx_drop_reason::bad_mbuf, m, fresh);
			continue;
		}

		const unsigned k = c.n++;
		ibv_sge &s = c.sge[k];
		s.addr = reinterpret_cast<uintptr_t>(data);
		s.length = len;
		s.lkey = lkey;
		ibv_send_wr &r = c.wr[k];
		r.wr_id = ring.push(m);
		r.next = nullptr;
		if (k > 0)
			c.wr[k - 1].next = &r;
		r.sg_list = &s;
		r.num_sge = len != 0 ? 1 : 0;
		r.opcode = (w.flags & send_imm) ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
		r.imm_data = (w.flags & send_imm) ? w.imm_data : 0;
		unsigned f = 0;
		if (inl)
			f |= IBV_SEND_INLINE;
		if (w.flags & send_solicited)
			f |= IBV_SEND_SOLICITED;
		c.since_before[k] = since;
		if (++since >= p.signal_every) {
			f |= IBV_SEND_SIGNALED;
			since = 0;
		}
		r.send_flags = f;
		r.wr.ud.ah = ah;
		r.wr.ud.remote_qpn = w.remote_qpn;
		/* High bit set: the QP's own Q_Key (IBA 10.2.5, as the soft,
		 * mlx5 and EFA drivers do). Resolved here, not left to the
		 * provider: rxe puts wr.ud.remote_qkey in the DETH as it is
		 * (rxe_req.c init_req_packet), and the receiver then drops
		 * the datagram for a Q_Key mismatch without a trace. */
		r.wr.ud.remote_qkey = (w.remote_qkey & 0x80000000u) ? p.own_qkey : w.remote_qkey;
		c.src[k] = uint16_t(i);
		c.len[k] = len;
		c.fresh[k] = fresh;
	}
	c.taken = i;
}

/*
 * After ibv_post_send: which WRs the caller keeps and what to free.
 * posted = chain entries the device took (c.n, or the index of bad_wr when
 * the post failed). Rolls the ring and the signalling counter back to the
 * first refused entry, frees our copies among the refused, frees and
 * counts the drops that lie before the first refused WR (later ones are
 * the caller's again, untouched), and returns how many burst WRs were
 * taken. free_fn(m) frees an mbuf.
 * (NOT multi-thread safe: the queue's poll thread.)
 */
template <class Free>
inline unsigned settle_send_chain(tx_chain &c, unsigned posted, uint32_t &since, tx_ring &ring,
				  qp_counters &ctr, Free &&free_fn)
{
	unsigned taken = c.taken;
	if (posted < c.n) {
		taken = c.src[posted];
		since = c.since_before[posted];
		const uint64_t first = c.wr[posted].wr_id;
		ring.rollback(first, [&](uint64_t seq, rte_mbuf *m) {
			if (c.fresh[posted + (seq - first)] && m != nullptr)
				free_fn(m);
		});
	}
	for (unsigned d = 0; d < c.ndrops; d++) {
		const tx_drop &x = c.drops[d];
		if (x.idx < taken) {
			switch (x.why) {
			case tx_drop_reason::stale_ah:
				ctr.tx_stale_ah++;
				break;
			case tx_drop_reason::too_long:
				ctr.tx_too_long++;
				break;
			case tx_drop_reason::bad_mbuf:
				ctr.tx_bad_mbuf++;
				break;
			}
			if (x.m != nullptr)
				free_fn(x.m);
		} else if (x.fresh && x.m != nullptr) {
			free_fn(x.m);
		}
	}
	uint64_t bytes = 0;
	for (unsigned k = 0; k < posted; k++)
		bytes += c.len[k];
	ctr.tx_pkts += posted;
	ctr.tx_bytes += bytes;
	return taken;
}

/* -------------------------------------------------------- receive chain */

/*
 * Chains receive WRs for mbufs ms[0..n) (n <= chain_max), one SGE each
 * over the whole data room after the headroom: verbs writes the 40-byte
 * GRH area first, then the payload (ibv_post_recv(3): UD receive buffers
 * start with 40 bytes for the GRH, present or not). wr_id is the mbuf.
 * Returns how many were chained: it stops at the first mbuf outside the
 * registered memory (the caller frees ms[ret..n)).
 * (Any thread: touches only its arguments.)
 */
inline unsigned build_recv_chain(rte_mbuf *const *ms, unsigned n, lkey_map &mrs, ibv_recv_wr *wr,
				 ibv_sge *sge)
{
	unsigned k = 0;
	for (; k < n; k++) {
		rte_mbuf *m = ms[k];
		void *p = rte_pktmbuf_mtod(m, void *);
		const uint32_t room = uint32_t(m->buf_len - m->data_off);
		uint32_t lkey;
		if (unlikely(!mrs.lookup(p, room, &lkey)))
			break;
		sge[k].addr = reinterpret_cast<uintptr_t>(p);
		sge[k].length = room;
		sge[k].lkey = lkey;
		wr[k].wr_id = reinterpret_cast<uintptr_t>(m);
		wr[k].next = nullptr;
		wr[k].sg_list = &sge[k];
		wr[k].num_sge = 1;
		if (k > 0)
			wr[k - 1].next = &wr[k];
	}
	return k;
}

/* ------------------------------------------------------ receive completion */

/*
 * A successful UD receive completion into recv_wc. m is the buffer
 * (wc.wr_id); its data starts with the GRH area. byte_len counts the 40
 * GRH bytes plus the payload, as ibv_wc does for UD. Returns false when
 * byte_len is below 40 or beyond the buffer (the caller drops it).
 *
 * With IBV_WC_GRH, the source and destination GIDs come from the area:
 * on InfiniBand an IB GRH (SGID at byte 8, DGID at 24, IBA 8.3.1); on
 * Ethernet the RoCEv2 rules of ah_from_wc.h (classify_roce_grh: IPv6
 * header, or an IPv4 header in the last 20 bytes), which also give l3.
 * For IPv4 the first 20 bytes, undefined in verbs, are zeroed: recv_wc's
 * contract (ud.h), and what makes a later init_ah_from_wc unambiguous. A
 * RoCEv1 or unrecognised area leaves the GIDs zero and l3 ib_grh
 * ("not reported"). Generic verbs does not report a solicited event bit in
 * ibv_wc; wc_solicited stays clear.
 * (Any thread: touches only its arguments.)
 */
inline bool wc_to_recv(const ibv_wc &w, rte_mbuf *m, bool eth, recv_wc &out)
{
	if (unlikely(w.byte_len < wire::grh_len || w.byte_len > uint32_t(m->buf_len - m->data_off)))
		return false;
	m->data_len = uint16_t(w.byte_len);
	m->pkt_len = w.byte_len;
	m->nb_segs = 1;
	m->next = nullptr;
	out.mbuf = m;
	out.byte_len = w.byte_len;
	out.qp_num = w.qp_num;
	out.src_qp = w.src_qp;
	out.imm_data = (w.wc_flags & IBV_WC_WITH_IMM) ? w.imm_data : 0;
	out.slid = w.slid;
	out.pkey_index = w.pkey_index;
	/* RoCE: the provider's wc.sl is not the VLAN priority (mlx5: the L3
	 * header type, providers/mlx5/cq.c); 0 as for an untagged frame
	 * (ah_from_wc.h, "sl"). */
	out.sl = eth ? 0 : w.sl;
	out.dlid_path_bits = w.dlid_path_bits;
	out.wc_flags = uint8_t(((w.wc_flags & IBV_WC_GRH) ? wc_grh : 0) |
			       ((w.wc_flags & IBV_WC_WITH_IMM) ? wc_with_imm : 0));
	out.l3 = l3_type::ib_grh;
	memset(out.sgid.raw, 0, 16);
	memset(out.dgid.raw, 0, 16);
	if (!(w.wc_flags & IBV_WC_GRH))
		return true;
	auto *area = rte_pktmbuf_mtod(m, uint8_t *);
	if (!eth) {
		memcpy(out.sgid.raw, area + 8, 16);
		memcpy(out.dgid.raw, area + 24, 16);
		return true;
	}
	detail::grh_l3 l3;
	if (detail::classify_roce_grh(out, area, &l3) != 0)
		return true;
	if (l3 == detail::grh_l3::ipv4) {
		const uint8_t *ip4 = area + 20;
		rte_be32_t a;
		memcpy(&a, ip4 + 12, 4);
		out.sgid = wire::gid::from_v4(a);
		memcpy(&a, ip4 + 16, 4);
		out.dgid = wire::gid::from_v4(a);
		memset(area, 0, 20);
		out.l3 = l3_type::ipv4;
	} else {
		memcpy(out.sgid.raw, area + 8, 16);
		memcpy(out.dgid.raw, area + 24, 16);
		out.l3 = l3_type::ipv6;
	}
	return true;
}

/*
 * The ibv_wc a completion was made from, as far as recv_wc keeps it: for
 * libibverbs calls that take one (ibv_init_ah_from_wc(3), beside rdgram's
 * own init_ah_from_wc). status is SUCCESS, opcode RECV; wr_id, vendor_err
 * and the fields wc_to_recv drops are zero. (Any thread.)
 */
inline ibv_wc ibv_wc_of(const recv_wc &r)
{
	ibv_wc w{};
	w.status = IBV_WC_SUCCESS;
	w.opcode = IBV_WC_RECV;
	w.byte_len = r.byte_len;
	w.qp_num = r.qp_num;
	w.src_qp = r.src_qp;
	w.wc_flags = ((r.wc_flags & wc_grh) ? IBV_WC_GRH : 0) | ((r.wc_flags & wc_with_imm) ? IBV_WC_WITH_IMM : 0);
	w.imm_data = r.imm_data;
	w.slid = r.slid;
	w.sl = r.sl;
	w.pkey_index = r.pkey_index;
	w.dlid_path_bits = r.dlid_path_bits;
	return w;
}

} // namespace rdgram::verbs

#endif
