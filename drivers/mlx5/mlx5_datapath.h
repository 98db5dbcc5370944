/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/mlx5 data path: UD sends written straight into the SQ ring and
 * CQE64s parsed straight from the CQ rings (mlx5 direct verbs). Everything
 * a poll thread runs per packet is in this file, inline.
 *
 * Send (one WQE per datagram, rdma-core providers/mlx5/qp.c
 * _mlx5_post_send for IBV_QPT_UD is the reference):
 *   ctrl seg (16)  opcode SEND / SEND_IMM, WQE index, QPN, DS count,
 *                  fm_ce_se (CQ_UPDATE one in N, SOLICITED), immediate
 *   datagram (48)  the AH's AV from the NUMA-local AH table replica, with
 *                  key.qkey and dqp_dct = remote QPN | MLX5_EXTENDED_UD_AV;
 *                  or the compact 16-byte AV (no extended bit) for an AH
 *                  without a GRH when the device supports it
 *   inline (4+n)   byte_count = n | MLX5_INLINE_SEG, data, zero pad to 16
 *   or data (16)   byte_count, lkey of the mempool's memory region, address;
 *                  one per non-empty segment of a chained mbuf (16 each,
 *                  as rdma-core writes one per non-empty SGE), at most
 *                  the QP's max_send_sge
 * in 64-byte basic blocks of a power-of-two ring; a WQE that runs past the
 * ring's end continues at its start. The first block (ctrl + extended AV,
 * or ctrl + compact AV) is prebuilt once per destination and burst (the
 * WQE head: AH handle, remote QPN, Q_Key) and copied whole; the WQE index,
 * DS, fm_ce_se and imm are stored over it. A run of WRs after it that
 * differ only in payload (plain inline SENDs of one length to the same
 * head) is written by one loop that checks signalling, room and the ring's
 * end once for the run and stores little but the WQE index and the payload
 * (inline_run; with AVX-512BW, or AVX2 for whole 4-byte words, in whole
 * aligned blocks: the writer is chosen from the CPU at attach, cpu_isa.h,
 * so a generic build runs them where the CPU has them). Each WQE's
 * stores are preceded by a prefetchw of the next WQE's blocks
 * (prefetch_next). Per burst one doorbell: the doorbell
 * record, then a BlueFlame copy of the burst's last WQE when it fits the
 * BlueFlame buffer (otherwise its first 8 bytes as the doorbell), with the
 * barriers of mlx5_ring.h. rdma-core uses BlueFlame only for one-WQE posts;
 * for a burst the copied WQE is its last one, whose index covers the rest,
 * as DPDK's mlx5 PMD rings with the last WQE of a burst.
 *
 * TX completions: one WQE in signal_every (and optionally the last of each
 * burst) asks for a CQE; a requester CQE's wqe_counter covers every WQE up
 * to it, whose mbufs go back to their pool.
 *
 * Receive: a cyclic RQ of one data segment per WQE, refilled in batches
 * with one doorbell-record update; responder CQE64s decoded by parse_cqe
 * (mlx5_ring.h) into recv_wc with verbs' layout (40-byte GRH area, then
 * the payload). A byte count the CQE reports beyond the posted buffer is
 * never trusted: the buffer is dropped and counted.
 */
#ifndef RDGRAM_MLX5_DATAPATH_H
#define RDGRAM_MLX5_DATAPATH_H

#include <cerrno>
#include <cstring>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_memcpy.h>
#include <rte_mempool.h>
#include <rte_vect.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "mlx5_av.h"
#include "mlx5_ring.h"
#include "rdgram/ah_from_wc.h"
#include "rdgram/ah_table.h"
#include "rdgram/cpu_isa.h"
#include "rdgram/stats.h"
#include "rdgram/ud.h"

namespace rdgram::mlx5 {

/* Counters of this driver beyond qp_counters (stats.h): drops first, each
 * with a name (X-macro, as stats.h), then events that are not drops. */
#define RDGRAM_MLX5_DROPS(X)                                                             \
	X(tx_inline_too_long, "inline send longer than the QP's max_inline_data")       \
	X(tx_too_many_segs, "chained mbuf of more segments than the QP's max_send_sge") \
	X(tx_cqe_err, "requester error CQE (MLX5_CQE_REQ_ERR); its WQEs' mbufs freed")  \
	X(rx_cqe_err, "responder error CQE (MLX5_CQE_RESP_ERR); buffer back to its pool") \
	X(rx_cqe_bad_len, "CQE byte_cnt beyond the posted buffer or under the GRH area") \
	X(rx_cqe_scatter, "responder CQE with data scattered to the CQE (not enabled)") \
	X(rx_cqe_unexpected, "CQE of an opcode or format this queue never asks for")     \
	X(rx_cqe_no_wqe, "responder CQE with no receive WQE outstanding")               \
	X(tx_cqe_stray, "requester CQE whose WQE index is not outstanding")

struct mlx5_counters {
#define X(name, desc) uint64_t name;
	RDGRAM_MLX5_DROPS(X)
#undef X
	uint64_t doorbells;       /* SQ doorbells rung (one per burst) */
	uint64_t bf_copies;       /* of which BlueFlame copies */
	uint64_t tx_cqes;         /* requester CQEs (MLX5_CQE_REQ) */
	uint64_t rq_doorbells;    /* RQ doorbell-record updates (refill batches) */
	uint64_t rq_no_mbuf;      /* refills cut short: mempool empty */
	uint64_t rx_wqe_mismatch; /* responder CQE wqe_counter not the RQ tail */
	uint64_t rx_grh_unparsed; /* GRH area not IPv4/IPv6/IB GRH: GIDs left 0 */

	template <class F> void for_each(F &&f) const
	{
#define X(name, desc) f(#name, desc, name);
		RDGRAM_MLX5_DROPS(X)
#undef X
		f("doorbells", "SQ doorbells rung", doorbells);
		f("bf_copies", "SQ doorbells that were BlueFlame copies", bf_copies);
		f("tx_cqes", "requester CQEs", tx_cqes);
		f("rq_doorbells", "RQ doorbell-record updates", rq_doorbells);
		f("rq_no_mbuf", "RQ refills cut short: mempool empty", rq_no_mbuf);
		f("rx_wqe_mismatch", "responder CQE wqe_counter differs from the RQ tail", rx_wqe_mismatch);
		f("rx_grh_unparsed", "GRH area of unknown layout: GIDs left zero", rx_grh_unparsed);
	}
};

/*
 * Memory regions of the mempools the queue sends from and receives into:
 * [start, end) -> lkey, one per mempool memory chunk (ibv_reg_mr on
 * hardware). Lookup checks the last hit first: mbufs of one pool are
 * usually in one chunk.
 * (NOT multi-thread safe: one per queue.)
 */
class mr_table {
public:
	static constexpr unsigned max_regions = 64;
	int add(uintptr_t start, size_t len, uint32_t lkey)
	{
		if (n_ == max_regions)
			return ENOSPC;
		r_[n_++] = region{start, start + len, lkey};
		return 0;
	}
	void clear() { n_ = last_ = 0; }
	/* The region of the last successful lookup (false if none yet). */
	bool last_region(uintptr_t *start, uintptr_t *end, uint32_t *lkey) const
	{
		if (last_ >= n_)
			return false;
		*start = r_[last_].start;
		*end = r_[last_].end;
		*lkey = r_[last_].lkey;
		return true;
	}
	unsigned size() const { return n_; }
	/* The lkey covering [a, a + len), or false. */
	bool lookup(uintptr_t a, uint32_t len, uint32_t *lkey)
	{
		if (likely(last_ < n_ && a >= r_[last_].start && a + len <= r_[last_].end)) {
			*lkey = r_[last_].lkey;
			return true;
		}
		for (unsigned i = 0; i < n_; i++)
			if (a >= r_[i].start && a + len <= r_[i].end) {
				last_ = i;
				*lkey = r_[i].lkey;
				return true;
			}
		return false;
	}

private:
	struct region {
		uintptr_t start, end;
		uint32_t lkey;
	};
	region r_[max_regions]{};
	unsigned n_ = 0, last_ = 0;
};

/* Per-queue settings (setup). */
struct queue_config {
	uint32_t qkey = 0;            /* the QP's Q_Key */
	bool roce = true;             /* Ethernet port: CQE 27:24 is the L3 type */
	uint32_t mtu = 4096;          /* path MTU: largest UD payload */
	uint32_t max_inline = 0;      /* the QP's cap.max_inline_data */
	uint32_t max_send_sge = 1;    /* the QP's cap.max_send_sge: data segments per WQE */
	uint32_t signal_every = 64;   /* CQ_UPDATE on one WQE in this many */
	bool signal_last = false;     /* also on the last WQE of every burst */
	bool compact_av = false;      /* device supports the 16-byte AV */
	bool use_bf = true;           /* BlueFlame copy when the WQE fits */
	uint32_t rx_buf_len = 0;      /* bytes posted per receive (0: data room) */
	uint32_t rq_refill_batch = 32; /* refill when this many RQ slots are free */
	int socket = SOCKET_ID_ANY;   /* NUMA node of the poll thread */
	/* Widest SIMD the inline run writers may use; the CPU and
	 * RDGRAM_CPU_MAX (cpu_isa_max) cap it further. Tests lower it to
	 * run each writer. */
	cpu_isa isa_cap = cpu_isa::avx512;
};

/*
 * One UD QP on an mlx5 device: the ud_driver policy.
 * (NOT multi-thread safe: owned by one poll thread.)
 */
class mlx5_queue {
public:
	static constexpr unsigned max_burst = 32;
	/* Requester CQEs reaped per tx_burst / tx_flush. */
	static constexpr unsigned tx_cqe_budget = 64;
	/* Most data segments a UD WQE can carry: DS is a 6-bit count of
	 * 16-byte units (qpn_ds 5:0), ctrl and the extended AV take 4. */
	static constexpr uint32_t max_send_sge_limit = (63 * 16 - 16 - 48) / 16;

	mlx5_queue() = default;
	mlx5_queue(const mlx5_queue &) = delete;
	mlx5_queue &operator=(const mlx5_queue &) = delete;
	~mlx5_queue() { detach(); }

	/* Binds the queue to its rings (setup, control path). mp: receive
	 * buffers; mrs: the lkeys of every mempool it sends from or receives
	 * into; ahs: the AH table (this thread's NUMA replica is used).
	 * Returns 0, EINVAL (rings not as this driver needs them: power-of-two
	 * counts, 64-byte stride and CQEs, one RQ entry at least 16 bytes, no
	 * doorbell register, an inline limit or a max_send_sge (0, or above
	 * max_send_sge_limit) whose WQE DS cannot express, a signal interval
	 * that could let an all-unsignalled window fill the SQ), ENOMEM. */
	int attach(const rings &r, const queue_config &c, rte_mempool *mp, const mr_table &mrs,
		   const ah_table<mlx5_av> *ahs)
	{
		detach();
		auto pow2 = [](uint32_t v) { return v != 0 && (v & (v - 1)) == 0; };
		if (r.sq_buf == nullptr || r.rq_buf == nullptr || r.dbrec == nullptr ||
		    !pow2(r.sq_wqe_cnt) || !pow2(r.rq_wqe_cnt) || r.sq_stride != wqe_bb ||
		    r.rq_stride < sizeof(mlx5_wqe_data_seg) || r.rq_stride % sizeof(mlx5_wqe_data_seg) ||
		    !pow2(r.scq.cqe_cnt) || !pow2(r.rcq.cqe_cnt) || r.scq.cqe_size != 64 ||
		    r.rcq.cqe_size != 64 || r.scq.dbrec == nullptr || r.rcq.dbrec == nullptr ||
		    r.bf_reg == nullptr || mp == nullptr || c.signal_every == 0 ||
		    c.max_send_sge == 0 || c.max_send_sge > max_send_sge_limit)
			return EINVAL;
		/* The largest WQE: the inline one or the full gather list,
		 * whichever is longer (rdma-core mlx5_calc_send_wqe sizes the
		 * QP's WQEs the same way). */
		const uint32_t wqe_inl = 16 + 48 + align16(4 + c.max_inline);
		const uint32_t wqe_gather = 16 + 48 + c.max_send_sge * uint32_t(sizeof(mlx5_wqe_data_seg));
		const uint32_t wqe_max = wqe_inl > wqe_gather ? wqe_inl : wqe_gather;
		/* DS is a 6-bit count of 16-byte units (qpn_ds 5:0). */
		if (wqe_max > 63 * ds_unit)
			return EINVAL;
		max_bbs_ = (wqe_max + wqe_bb - 1) / wqe_bb;
		if (max_bbs_ < 2)
			max_bbs_ = 2; /* ctrl + AV fill one block; the data seg needs a second */
		/* At most signal_every - 1 unsignalled WQEs follow the last
		 * signalled one: a full SQ must still hold a signalled WQE,
		 * whose completion frees room. */
		if (uint64_t(c.signal_every) * max_bbs_ >= r.sq_wqe_cnt)
			return EINVAL;
		r_ = r;
		c_ = c;
		mp_ = mp;
		mrs_ = mrs;
		ahs_ = ahs != nullptr ? ahs->for_socket(c.socket) : ah_table<mlx5_av>::view{};
		const uint32_t room = rte_pktmbuf_data_room_size(mp) - RTE_PKTMBUF_HEADROOM;
		rx_len_ = c.rx_buf_len != 0 && c.rx_buf_len < room ? c.rx_buf_len : room;
		if (rx_len_ < grh_len)
			return EINVAL;
		sq_mbuf_ = static_cast<rte_mbuf **>(
			rte_zmalloc_socket("mlx5_sq", sizeof(rte_mbuf *) * r.sq_wqe_cnt, 64, c.socket));
		sq_bbs_ = static_cast<uint8_t *>(rte_zmalloc_socket("mlx5_sqb", r.sq_wqe_cnt, 64, c.socket));
		rq_mbuf_ = static_cast<rte_mbuf **>(
			rte_zmalloc_socket("mlx5_rq", sizeof(rte_mbuf *) * r.rq_wqe_cnt, 64, c.socket));
		chain_ = static_cast<mlx5_wqe_data_seg *>(rte_zmalloc_socket(
			"mlx5_chain", sizeof(mlx5_wqe_data_seg) * c.max_send_sge, 64, c.socket));
		if (sq_mbuf_ == nullptr || sq_bbs_ == nullptr || rq_mbuf_ == nullptr || chain_ == nullptr) {
			detach();
			return ENOMEM;
		}
		sq_end_ = r.sq_buf + size_t(r.sq_wqe_cnt) * wqe_bb;
		sq_pi_ = sq_ci_ = 0;
		sq_nmbuf_ = 0;
		rq_pi_ = rq_ci_ = 0;
		scq_ci_ = rcq_ci_ = 0;
		bf_off_ = 0;
		since_signal_ = 0;
		ctr_ = {};
		xc_ = {};
#if defined(RDGRAM_CPU_ISA_X86)
		isa_ = cpu_isa_min(c.isa_cap, cpu_isa_max());
#else
		isa_ = cpu_isa::portable;
#endif
		return 0;
	}

	/* Frees every mbuf the rings still hold (after the QP is destroyed or
	 * reset on hardware; the model stops reading). (Control path.) */
	void detach()
	{
		if (sq_mbuf_ != nullptr) {
			for (uint32_t i = 0; i < r_.sq_wqe_cnt; i++)
				if (sq_mbuf_[i] != nullptr)
					rte_pktmbuf_free(sq_mbuf_[i]);
		}
		if (rq_mbuf_ != nullptr) {
			for (uint32_t i = 0; i < r_.rq_wqe_cnt; i++)
				if (rq_mbuf_[i] != nullptr)
					rte_pktmbuf_free(rq_mbuf_[i]);
		}
		rte_free(sq_mbuf_);
		rte_free(sq_bbs_);
		rte_free(rq_mbuf_);
		rte_free(chain_);
		sq_mbuf_ = nullptr;
		sq_bbs_ = nullptr;
		rq_mbuf_ = nullptr;
		chain_ = nullptr;
	}

	const qp_counters &counters() const { return ctr_; }
	const mlx5_counters &mlx5_stats() const { return xc_; }
	/* The SIMD level of the inline run writers, chosen at attach:
	 * avx512 (block_writer_avx512), avx2 (block_writer_avx2, whole
	 * 4-byte words), otherwise the portable copy_writer. */
	cpu_isa tx_isa() const { return isa_; }
	uint32_t qpn() const { return r_.qpn; }
	rte_mempool *mempool() const { return mp_; }
	/* WQE basic blocks posted and not yet known complete. */
	uint32_t sq_outstanding() const { return sq_pi_ - sq_ci_; }
	/* Receive WQEs posted and not yet completed. */
	uint32_t rq_posted() const { return rq_pi_ - rq_ci_; }
	/* Largest WQE of this queue in basic blocks. */
	uint32_t max_wqe_bbs() const { return max_bbs_; }
	uint32_t rx_buf_len() const { return rx_len_; }

	/* Nothing is held back in software: every accepted WR is in the SQ
	 * and the doorbell rang with its burst. */
	unsigned tx_pending() const { return 0; }

	/* Reaps requester completions (frees sent mbufs). */
	void tx_flush() { reap_tx(tx_cqe_budget); }

	/* Fills every free RQ slot (one doorbell-record update). */
	void post_recvs() { refill(); }

	/*
	 * Accepts up to n send WRs; returns how many it took (the caller keeps
	 * the rest: the SQ had no room for the next one). A chained mbuf goes
	 * as one data segment per non-empty segment (see gather_chain). An
	 * accepted WR that cannot be sent (stale AH, payload over the MTU or
	 * the inline limit, a chain of more segments than max_send_sge, a
	 * segment outside every registered region) is dropped and counted,
	 * its whole chain freed. One doorbell for the burst.
	 */
	uint16_t tx_burst(send_wr *wrs, uint16_t n)
	{
		if (n > max_burst)
			n = max_burst;
		/* One owner-bit read when nothing completed. */
		reap_tx(tx_cqe_budget);
		/* Everything the loop reads or counts, in locals for the
		 * burst: the ring is written through uint8_t pointers, which
		 * may alias any member, so members used per WQE would be
		 * reloaded (and counters stored back) after every ring store.
		 * And as few as fit in registers: the loop's cost is its
		 * instruction count (bench_mlx5_wqe). */
		tx_state t;
		t.sq = r_.sq_buf;
		t.sq_end = sq_end_;
		t.mask = r_.sq_wqe_cnt - 1;
		t.qpn_be = htobe32(r_.qpn << 8);
		t.own_qkey = c_.qkey;
		const ah_table<mlx5_av>::view ahs = ahs_;
		uint8_t *const sq_bbs = sq_bbs_;
		/* Inline payloads: one test for the inline limit and the MTU
		 * (which one failed is sorted out when counting the drop). */
		const uint32_t inline_max = c_.max_inline < c_.mtu ? c_.max_inline : c_.mtu;
		uint32_t pi = sq_pi_;
		/* Ring room, read once (only this thread posts): the SQ
		 * counter may reach pi_limit. */
		const uint32_t pi_limit = sq_ci_ + r_.sq_wqe_cnt;
		/* WQEs until the next CQ_UPDATE, counting down. */
		uint32_t sig_left = c_.signal_every - since_signal_;
		uint32_t nmbuf = 0, skipped = 0;
		uint64_t bytes = 0;
		/* The head lives for this burst only: an AV changed in place
		 * (ah_table::update) is seen by the next burst. */
		wqe_head head;
		head.key_wr = {ah_null, 0, 0}; /* no WR that passed lookup has it */
		uint8_t *last = nullptr;
		uint32_t last_bbs = 0;
		/* The inline length of the last WQE written, if it was an
		 * inline SEND to the current head (checked against the inline
		 * limit and the MTU then); head_only if it was not inline;
		 * no_run before the first. No 32-bit length equals either. */
		constexpr uint64_t no_run = ~uint64_t(0), head_only = uint64_t(1) << 32;
		uint64_t run_len = no_run;
		send_wr *wr = wrs;
		send_wr *const end = wrs + n;
		for (; wr != end; ++wr) {
			/* A WR that differs from the last WQE's only in its
			 * payload (same head, plain inline SEND of the same
			 * length) starts a run, which inline_run writes with
			 * the checks below made once for all of it; the AH
			 * lookup that built the head holds for it (the head
			 * lives for the burst). Only when the run's WQEs fit
			 * before the next signalled one, the ring's end and
			 * the SQ's limit; the WR otherwise goes on below. */
			const bool same_head = memcmp(wr, head.key, sizeof(head.key)) == 0;
			if (same_head && uint64_t(wr->inline_len) == run_len && wr->flags == send_inline) {
				const uint32_t len = uint32_t(run_len);
				const uint32_t seg_len = align16(inline_hdr_len + len);
				const uint32_t size = 16 + head.av_len + seg_len;
				const uint32_t bbs = (size + wqe_bb - 1) / wqe_bb;
				const uint32_t blocks = run_room(t, pi, pi_limit, sig_left, bbs);
				if (blocks >= bbs) {
					const run_result rr =
						inline_run(t, head, wr, end, pi, len, seg_len, bbs, size / ds_unit, blocks);
					/* rr.n >= 1: wr itself fits and matches. */
					wr += rr.n - 1;
					last = rr.last;
					last_bbs = bbs;
					pi += rr.n * bbs;
					sig_left -= rr.n;
					bytes += rr.bytes;
					continue;
				}
			} else if (same_head && run_len != no_run && wr->flags == 0 && wr->mbuf->nb_segs == 1 &&
				   wr->mbuf->data_len != 0) {
				/* The same for single-segment mbufs (mbuf_run). A
				 * chain or an empty mbuf goes on below, without the
				 * call. */
				const uint32_t size = 16 + head.av_len + uint32_t(sizeof(mlx5_wqe_data_seg));
				const uint32_t bbs = (size + wqe_bb - 1) / wqe_bb;
				const uint32_t blocks = run_room(t, pi, pi_limit, sig_left, bbs);
				if (blocks >= bbs) {
					const run_result rr = mbuf_run(t, head, wr, end, pi, bbs, size / ds_unit, blocks);
					if (rr.n != 0) {
						wr += rr.n - 1;
						last = rr.last;
						last_bbs = bbs;
						pi += rr.n * bbs;
						sig_left -= rr.n;
						nmbuf += rr.n;
						bytes += rr.bytes;
						continue;
					}
				}
			}
			const mlx5_av *av = ahs.lookup(wr->ah);
			if (unlikely(av == nullptr)) {
				ctr_.tx_stale_ah++;
				drop_wr(*wr);
				skipped++;
				continue;
			}
			const uint32_t flags = wr->flags;
			uint32_t len, seg_len;
			uint32_t lkey = 0;
			uintptr_t addr = 0;
			if (likely(flags & send_inline)) {
				len = wr->inline_len;
				if (unlikely(len > inline_max)) {
					if (len > c_.max_inline)
						xc_.tx_inline_too_long++;
					else
						ctr_.tx_too_long++;
					skipped++;
					continue;
				}
				seg_len = align16(inline_hdr_len + len);
			} else {
				rte_mbuf *m = wr->mbuf;
				len = m->data_len;
				addr = rte_pktmbuf_mtod(m, uintptr_t);
				seg_len = sizeof(mlx5_wqe_data_seg);
				if (unlikely(m->nb_segs != 1)) {
					/* Out of line: its data segments go to
					 * chain_, seg_len is 16 per segment, and
					 * a chain of one non-empty segment comes
					 * back as addr and lkey for the
					 * single-segment write below. Returned by
					 * value: no local of this loop has its
					 * address taken (which would keep it in
					 * memory for the whole loop). */
					const chain_gather g = gather_chain(m);
					if (unlikely(g.v != chain_verdict::ok)) {
						count_chain_drop(g.v);
						drop_wr(*wr);
						skipped++;
						continue;
					}
					len = g.len;
					addr = g.addr;
					lkey = g.lkey;
					seg_len = g.seg_len;
				} else if (unlikely(len == 0)) {
					/* No data segment, as rdma-core posts an
					 * SGE of length 0 (_mlx5_post_send skips
					 * it: the provider never hands the device
					 * a data segment of byte_count 0): a
					 * zero-length send, DS 4, as for a chain
					 * of empty segments. */
					seg_len = 0;
				} else {
					if (unlikely(!mrs_.lookup(addr, len, &lkey))) {
						ctr_.tx_bad_mbuf++;
						drop_wr(*wr);
						skipped++;
						continue;
					}
					if (unlikely(len > c_.mtu)) {
						ctr_.tx_too_long++;
						drop_wr(*wr);
						skipped++;
						continue;
					}
				}
			}
			/* The first WR to a destination in this burst builds
			 * its 64-byte head; the rest copy it. Keyed by the
			 * WR's first 16 bytes as given: the handle (slot and
			 * generation, just checked live), the remote QPN and
			 * the Q_Key, from which the head's fields follow. */
			if (unlikely(!same_head))
				build_head(head, t, *wr, *av, c_.compact_av && !av->global);
			const uint32_t size = 16 + head.av_len + seg_len;
			const uint32_t bbs = (size + wqe_bb - 1) / wqe_bb;
			if (unlikely(pi_limit - pi < bbs)) {
				ctr_.tx_port_full++;
				break; /* this WR and the rest stay with the caller */
			}
			bool sig = false;
			if (unlikely(--sig_left == 0)) {
				sig = true;
				sig_left = c_.signal_every;
			}
			uint8_t *ctrl = write_head(t, head, pi, flags, wr->imm_data, sig, size / ds_unit);
			/* The next WQE's blocks, guessing its size is this
			 * one's (see prefetch_next). */
			prefetch_next(t.sq + size_t((pi + bbs) & t.mask) * wqe_bb, bbs);

			uint8_t *seg = ctrl + 16 + head.av_len;
			if (seg == t.sq_end)
				seg = t.sq;
			if (likely(flags & send_inline)) {
				write_inline(t, seg, static_cast<const uint8_t *>(wr->inline_data), len, seg_len);
			} else {
				if (likely(seg_len == sizeof(mlx5_wqe_data_seg))) {
					auto *d = reinterpret_cast<mlx5_wqe_data_seg *>(seg);
					d->byte_count = htobe32(len);
					d->lkey = htobe32(lkey);
					d->addr = htobe64(uint64_t(addr));
				} else {
					write_chain(seg, t.sq, t.sq_end, seg_len / uint32_t(sizeof(mlx5_wqe_data_seg)));
				}
				/* Slots of inline WQEs stay null: complete_to
				 * nulls every slot it frees, so a slot not
				 * holding an outstanding mbuf is null already.
				 * The slot holds the chain's head; its free
				 * (rte_pktmbuf_free) frees every segment. */
				sq_mbuf_[pi & t.mask] = wr->mbuf;
				nmbuf++;
			}
			last = ctrl;
			last_bbs = bbs;
			sq_bbs[pi & t.mask] = uint8_t(bbs);
			pi += bbs;
			bytes += len;
			run_len = (flags & send_inline) ? len : head_only;
		}
		const uint16_t taken = uint16_t(wr - wrs);
		sq_pi_ = pi;
		since_signal_ = c_.signal_every - sig_left;
		sq_nmbuf_ += nmbuf;
		ctr_.tx_pkts += taken - skipped;
		ctr_.tx_bytes += bytes;
		if (last != nullptr) {
			/* signal_last: the burst's last posted WQE asks for a
			 * CQE too, so nothing sent waits for a later burst. */
			auto *cs = reinterpret_cast<mlx5_wqe_ctrl_seg *>(last);
			if (c_.signal_last && !(cs->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE)) {
				cs->fm_ce_se |= MLX5_WQE_CTRL_CQ_UPDATE;
				since_signal_ = 0;
			}
			ring_sq(last, last_bbs);
		}
		return taken;
	}

	/* Receives up to n completions. Every responder CQE is delivered or
	 * dropped under one counter; the RQ is refilled in batches. */
	uint16_t rx_burst(recv_wc *wcs, uint16_t n)
	{
		if (n > max_burst)
			n = max_burst;
		uint16_t out = 0;
		uint32_t polled = 0;
		const uint32_t cnt = r_.rcq.cqe_cnt;
		/* Bounded by the ring: a CQE is looked at once per call. */
		while (out < n && polled < cnt) {
			auto *cqe = reinterpret_cast<const mlx5_cqe64 *>(
				r_.rcq.buf + size_t(rcq_ci_ & (cnt - 1)) * 64);
			if (!cqe_sw_owned(cqe, rcq_ci_, cnt))
				break;
			cqe_owner_before_fields();
			rcq_ci_++;
			polled++;
			if (likely(rx_one(*cqe, wcs[out])))
				out++;
		}
		if (polled != 0) {
			cqe_reads_before_ci();
			store_be32(&r_.rcq.dbrec[cq_set_ci], rcq_ci_ & cq_ci_mask);
		}
		if (r_.rq_wqe_cnt - (rq_pi_ - rq_ci_) >= c_.rq_refill_batch)
			refill();
		return out;
	}

	/* The SQ basic block of counter pi, and the SQ counter (tests read
	 * posted WQEs back). */
	const uint8_t *sq_block(uint32_t pi) const
	{
		return r_.sq_buf + size_t(pi & (r_.sq_wqe_cnt - 1)) * wqe_bb;
	}
	uint32_t sq_head() const { return sq_pi_; }

private:
	static uint32_t align16(uint32_t v) { return (v + 15) & ~15u; }

	/* Frees a dropped WR's mbuf, every segment of its chain. */
	void drop_wr(send_wr &wr)
	{
		if (!(wr.flags & send_inline) && wr.mbuf != nullptr)
			rte_pktmbuf_free(wr.mbuf);
	}

	/* What tx_burst's loop uses, as locals of the burst (see there). */
	struct tx_state {
		uint8_t *sq;      /* ring start */
		uint8_t *sq_end;  /* ring end */
		uint32_t mask;    /* sq_wqe_cnt - 1 */
		uint32_t qpn_be;  /* qpn_ds without DS: htobe32(qpn << 8) */
		uint32_t own_qkey;
	};

	enum class chain_verdict : uint8_t { ok, too_many_segs, bad_mbuf, too_long };
	struct chain_gather {
		uintptr_t addr;    /* the first non-empty segment's */
		uint32_t len;      /* the message: the segments' sum */
		uint32_t lkey;     /* the first non-empty segment's */
		uint32_t seg_len;  /* 16 per data segment in chain_ */
		chain_verdict v;
	};

	/*
	 * The gather list of a chained mbuf (nb_segs != 1), out of line: the
	 * single-segment send never runs it. As rdma-core's _mlx5_post_send
	 * for a WR of several SGEs: at most max_send_sge segments, counted
	 * with the empty ones (it refuses num_sge > max_gs before looking at
	 * lengths), and one mlx5_wqe_data_seg per non-empty segment (it skips
	 * an SGE of length 0: no segment, no DS unit), each with the lkey of
	 * the memory region that covers it. The segments are built here, in
	 * chain_, and copied to the ring by write_chain once the WQE has
	 * room. len is the message length (the segments' sum, at most the
	 * MTU), seg_len 16 bytes per data segment (0 when every segment is
	 * empty: a zero-length send, as rdma-core posts one). A chain of one
	 * non-empty segment is also described by addr and lkey, for the
	 * single-segment write.
	 */
	__rte_noinline chain_gather gather_chain(const rte_mbuf *m)
	{
		chain_gather g{0, 0, 0, 0, chain_verdict::ok};
		const uint32_t max = c_.max_send_sge;
		if (m->nb_segs > max) {
			g.v = chain_verdict::too_many_segs;
			return g;
		}
		uint32_t n = 0, segs = 0;
		for (; m != nullptr; m = m->next) {
			/* Counts what is walked, not nb_segs: a chain longer
			 * than its head says cannot overrun chain_. */
			if (++segs > max) {
				g.v = chain_verdict::too_many_segs;
				return g;
			}
			const uint32_t l = m->data_len;
			if (l == 0)
				continue;
			const uintptr_t a = rte_pktmbuf_mtod(m, uintptr_t);
			uint32_t k;
			if (!mrs_.lookup(a, l, &k)) {
				g.v = chain_verdict::bad_mbuf;
				return g;
			}
			chain_[n].byte_count = htobe32(l);
			chain_[n].lkey = htobe32(k);
			chain_[n].addr = htobe64(uint64_t(a));
			if (n == 0) {
				g.addr = a;
				g.lkey = k;
			}
			n++;
			g.len += l;
		}
		if (g.len > c_.mtu)
			g.v = chain_verdict::too_long;
		g.seg_len = n * uint32_t(sizeof(mlx5_wqe_data_seg));
		return g;
	}

	__rte_noinline void count_chain_drop(chain_verdict v)
	{
		if (v == chain_verdict::too_many_segs)
			xc_.tx_too_many_segs++;
		else if (v == chain_verdict::bad_mbuf)
			ctr_.tx_bad_mbuf++;
		else
			ctr_.tx_too_long++;
	}

	/* Copies n data segments from chain_ to the WQE at seg. A segment is
	 * 16 bytes at a 16-byte offset of a ring of whole 64-byte blocks, so
	 * none straddles the ring's end; the list continues at the ring's
	 * start between two segments (rdma-core: dpseg == qend). Inline in
	 * the loop's cold branch, with the ring's bounds by value: as an
	 * out-of-line call taking the loop's tx_state by reference (and
	 * gather_chain writing through pointers to the loop's locals), the
	 * loop's values went to the stack and the inline send got 6% slower
	 * (bench_mlx5_wqe tx/mlx5_path: 254 against 239 ns per burst). */
	__rte_always_inline void write_chain(uint8_t *seg, uint8_t *ring, const uint8_t *ring_end, uint32_t n)
	{
		for (uint32_t i = 0; i < n; i++) {
			if (seg == ring_end)
				seg = ring;
			memcpy(seg, &chain_[i], sizeof(chain_[i]));
			seg += sizeof(chain_[i]);
		}
	}

	/*
	 * A WQE's first 64-byte block for one destination, prebuilt (VPP's
	 * rdma plugin keeps such a template per queue): the control segment
	 * with what is constant for the QP (QPN; signature and DCI stream 0),
	 * then the datagram segment: the AH's AV with key.qkey and dqp_dct
	 * filled in. Per WQE the block is copied whole and the control
	 * segment's two varying 8-byte halves are stored over it. The AH
	 * table slot cannot hold it (ctrl + AV is 64 bytes, the slot's
	 * generation needs 4 more), and the control segment is per QP while
	 * an AH serves every QP.
	 */
	static_assert(offsetof(send_wr, ah) == 0 && offsetof(send_wr, remote_qpn) == 8 &&
		      offsetof(send_wr, remote_qkey) == 12 && sizeof(ah_handle) == 8);
	struct alignas(64) wqe_head {
		uint8_t block[wqe_bb];
		/* What it was built from: send_wr's first 16 bytes (ah,
		 * remote_qpn, remote_qkey) as the WR gave them. */
		union {
			uint8_t key[16];
			struct {
				ah_handle ah;
				uint32_t remote_qpn, remote_qkey;
			} key_wr;
		};
		uint32_t av_len; /* 48, or 16 for the compact AV */
	};

	static void build_head(wqe_head &h, const tx_state &t, const send_wr &wr, const mlx5_av &av,
			       bool compact)
	{
		const uint32_t rqpn = wr.remote_qpn & cqe_src_qp_mask;
		/* A Q_Key with the high bit set means the QP's own (IBA
		 * 10.2.5); substituted so the WQE always carries the key
		 * used. */
		const uint32_t qkey = (wr.remote_qkey & 0x80000000u) ? t.own_qkey : wr.remote_qkey;
		memset(h.block, 0, sizeof(h.block));
		auto *cs = reinterpret_cast<mlx5_wqe_ctrl_seg *>(h.block);
		cs->qpn_ds = t.qpn_be;
		auto *dg = reinterpret_cast<mlx5_wqe_datagram_seg *>(h.block + sizeof(*cs));
		/* The compact AV is the first 16 bytes (no extended bit);
		 * the rest of the block stays zero and is not copied. */
		memcpy(dg, &av.wqe, compact ? compact_av_len : sizeof(av.wqe));
		dg->av.dqp_dct = htobe32(rqpn | (compact ? 0u : uint32_t(MLX5_EXTENDED_UD_AV)));
		dg->av.key.qkey.qkey = htobe32(qkey);
		dg->av.key.qkey.reserved = 0;
		memcpy(h.key, &wr, sizeof(h.key));
		h.av_len = compact ? compact_av_len : sizeof(av.wqe);
	}

	static_assert(RTE_BYTE_ORDER == RTE_LITTLE_ENDIAN, "write_head packs words for a little-endian host");

	/* Writes the first 64-byte block of the WQE at pi from its
	 * destination's head (a block never wraps: the ring is whole
	 * blocks); returns its control segment. */
	static __rte_always_inline uint8_t *write_head(const tx_state &t, const wqe_head &h, uint32_t pi,
						       uint32_t flags, uint32_t imm_data, bool sig, uint32_t ds)
	{
		uint8_t *ctrl = t.sq + size_t(pi & t.mask) * wqe_bb;
		if (likely(h.av_len == sizeof(mlx5_wqe_av)))
			memcpy(ctrl, h.block, wqe_bb);
		else
			memcpy(ctrl, h.block, 16 + compact_av_len);
		/* The control segment's varying words (mlx5dv_set_ctrl_seg):
		 * opmod_idx_opcode and qpn_ds, then signature, DCI stream and
		 * fm_ce_se (one word, fm_ce_se its last byte) and imm. DS and
		 * fm_ce_se are the low bytes of big-endian words. */
		static_assert(offsetof(mlx5_wqe_ctrl_seg, qpn_ds) == 4);
		static_assert(offsetof(mlx5_wqe_ctrl_seg, fm_ce_se) == 11);
		static_assert(offsetof(mlx5_wqe_ctrl_seg, imm) == 12);
		static_assert(unsigned(MLX5_OPCODE_SEND_IMM) == (unsigned(MLX5_OPCODE_SEND) | unsigned(send_imm)));
		static_assert(unsigned(send_solicited) == MLX5_WQE_CTRL_SOLICITED);
		const uint32_t opcode = MLX5_OPCODE_SEND | (flags & send_imm);
		const uint32_t fm = (sig ? MLX5_WQE_CTRL_CQ_UPDATE : 0) | (flags & send_solicited);
		const uint32_t imm = (flags & send_imm) ? imm_data : 0;
		/* Two 8-byte stores, each word in its own half in memory
		 * order (the host is little-endian: x86-64, AArch64). */
		const uint64_t lo = uint64_t(htobe32((pi & 0xffff) << 8 | opcode)) |
				    uint64_t(t.qpn_be | htobe32(ds)) << 32;
		const uint64_t hi = uint64_t(htobe32(fm)) | uint64_t(imm) << 32;
		memcpy(ctrl, &lo, 8);
		memcpy(ctrl + 8, &hi, 8);
		return ctrl;
	}

	/*
	 * Asks for the bbs blocks from ctrl for writing (prefetchw), one WQE
	 * ahead of the stores. An SQ larger than L1 (1024 blocks are 64 KiB)
	 * has each block evicted since its last lap, and the stores of a WQE
	 * would otherwise wait, in order, for each block's read for
	 * ownership: with it, tx/mlx5_path costs about 0.6x as much
	 * (bench_mlx5_wqe, PERFORMANCE.md). A prefetch never faults: blocks
	 * past the ring's end or not yet free are only fetched, never
	 * written. __builtin_prefetch, not DPDK 22.11's rte_prefetch0_write:
	 * that one is __rte_experimental, so in its own section, so GCC does
	 * not inline it, finds it has no effect and drops the call.
	 */
	static __rte_always_inline void prefetch_next(const uint8_t *ctrl, uint32_t bbs)
	{
		/* Unconditionally the first three (a branch per WQE costs
		 * more than a spare prefetch: bench_mlx5_wqe), and the last. */
		__builtin_prefetch(ctrl, 1, 3);
		__builtin_prefetch(ctrl + wqe_bb, 1, 3);
		__builtin_prefetch(ctrl + 2 * wqe_bb, 1, 3);
		__builtin_prefetch(ctrl + size_t(bbs - 1) * wqe_bb, 1, 3);
	}

	struct run_result {
		uint32_t n;     /* WRs written */
		uint8_t *last;  /* the last one's control segment */
		uint64_t bytes; /* their payloads */
	};

	/* What inline_run's loops need, by value (no local of theirs has its
	 * address taken, so all of it stays in registers). */
	struct run_args {
		send_wr *wr, *end;
		const uint8_t *key; /* the head's 16-byte key */
		uint8_t *ctrl;      /* the first WQE's block */
		uint8_t *limit;     /* how far the ring may be written */
		uint8_t *bbsp;      /* sq_bbs_ at the first WQE */
		uint32_t pi, len, seg_len, bbs, seg_off, hdr;
		bool full;          /* extended AV: the head is a whole block */
		/* mbuf runs (mbuf_writer) */
		uintptr_t mr_start, mr_end; /* the memory region of the run's first mbuf */
		uint32_t lkey_be, mtu;
		rte_mbuf **slots;   /* sq_mbuf_ */
		uint32_t mask;      /* sq_wqe_cnt - 1 */
	};

	/* What every run starts from: blk, the head with the control words
	 * of a plain, unsignalled SEND of ds units (fm_ce_se and imm zero),
	 * and the run's place in the ring (see inline_run for blocks). */
	run_args start_run(const tx_state &t, const wqe_head &h, send_wr *wr, send_wr *end, uint32_t pi,
			   uint32_t bbs, uint32_t ds, uint32_t blocks, uint8_t *blk) const
	{
		memcpy(blk, h.block, wqe_bb);
		const uint32_t op = htobe32(MLX5_OPCODE_SEND);
		const uint32_t qpn_ds = t.qpn_be | htobe32(ds);
		memcpy(blk, &op, 4);
		memcpy(blk + 4, &qpn_ds, 4);
		memset(blk + 8, 0, 8);
		run_args a{};
		a.wr = wr;
		a.end = end;
		a.key = h.key;
		a.ctrl = t.sq + size_t(pi & t.mask) * wqe_bb;
		a.limit = a.ctrl + size_t(blocks) * wqe_bb;
		a.bbsp = sq_bbs_ + (pi & t.mask);
		a.pi = pi;
		a.bbs = bbs;
		a.seg_off = 16 + h.av_len;
		a.full = h.av_len == sizeof(mlx5_wqe_av);
		return a;
	}

	/* How many blocks from pi a run may write: before the next
	 * signalled WQE (sig_left counts down to it), the ring's end and the
	 * SQ's limit. */
	static __rte_always_inline uint32_t run_room(const tx_state &t, uint32_t pi, uint32_t pi_limit,
						     uint32_t sig_left, uint32_t bbs)
	{
		const uint32_t room = pi_limit - pi;
		const uint32_t to_end = t.mask + 1 - (pi & t.mask);
		const uint32_t to_sig = (sig_left - 1) * bbs;
		const uint32_t blocks = room < to_end ? room : to_end;
		return blocks < to_sig ? blocks : to_sig;
	}

	/*
	 * Writes the WRs from wr on that need nothing but their payload
	 * copied: the same 16-byte key as head (so the AH lookup that built
	 * it holds for them: the head lives for the burst, see tx_burst),
	 * flags exactly send_inline (no immediate, not solicited) and
	 * inline_len len, already checked against the inline limit and the
	 * MTU. They are unsignalled and do not wrap: blocks is how far the
	 * ring may be written from pi before the next signalled WQE, the
	 * ring's end or the SQ's room (the caller's checks, made once for
	 * the run). The bytes are write_head's and write_inline's; the WQE
	 * index is the only control word that changes. Stops at the first WR
	 * that differs; returns how many it wrote.
	 */
	__rte_noinline run_result inline_run(const tx_state &t, const wqe_head &h, send_wr *wr,
						  send_wr *const end, uint32_t pi, uint32_t len,
						  uint32_t seg_len, uint32_t bbs, uint32_t ds, uint32_t blocks)
	{
		alignas(64) uint8_t blk[wqe_bb];
		run_args a = start_run(t, h, wr, end, pi, bbs, ds, blocks, blk);
		a.len = len;
		a.seg_len = seg_len;
		a.hdr = htobe32(len | MLX5_INLINE_SEG);
#if defined(RDGRAM_CPU_ISA_X86)
		/* The writer the CPU allows (attach): a branch per run on the
		 * queue's own field. */
		if (a.full && len <= 2 * wqe_bb - inline_hdr_len) {
			if (isa_ >= cpu_isa::avx512)
				return run_loop_avx512<block_writer_avx512>(a, blk);
			if (isa_ >= cpu_isa::avx2 && len % 4 == 0)
				return run_loop_avx2<block_writer_avx2>(a, blk);
		}
#endif
		/* One loop per copy size class, so the class is chosen once. */
		if (len > 128)
			return run_loop<copy_writer<copy_any>>(a, blk);
		if (len > 64)
			return run_loop<copy_writer<copy_two<b64>>>(a, blk);
		if (len > 32)
			return run_loop<copy_writer<copy_two<b32>>>(a, blk);
		if (len > 16)
			return run_loop<copy_writer<copy_two<b16>>>(a, blk);
		if (len >= 8)
			return run_loop<copy_writer<copy_two<uint64_t>>>(a, blk);
		return run_loop<copy_writer<copy_any>>(a, blk);
	}

	struct b16 { uint64_t w[2]; };
	struct b32 { uint64_t w[4]; };
	struct b64 { uint64_t w[8]; };
	/* copy_inline's size classes (two copies of T, the second ending at
	 * len's last byte); the run loop takes one per run. */
	template <class T> struct copy_two {
		static __rte_always_inline void copy(uint8_t *dst, const uint8_t *src, uint32_t len)
		{
			T x, y;
			memcpy(&x, src, sizeof(x));
			memcpy(&y, src + len - sizeof(y), sizeof(y));
			memcpy(dst, &x, sizeof(x));
			memcpy(dst + len - sizeof(y), &y, sizeof(y));
		}
	};
	struct copy_any {
		static __rte_always_inline void copy(uint8_t *dst, const uint8_t *src, uint32_t len)
		{
			copy_inline(dst, src, len);
		}
	};

	/* inline_run's loop; W writes one WQE (built once per run from the
	 * arguments and the head block). run_loop_avx512 and run_loop_avx2
	 * are the same loop compiled for those levels: their writers' methods
	 * carry the level's RDGRAM_TARGET_* and inline only into a function of
	 * that target (flatten makes sure they do, at -O1 too; a generic
	 * build's other code never calls them). */
	template <class W> static __rte_noinline run_result run_loop(run_args a, const uint8_t *blk)
	{
		return run_loop_body<W>(a, blk);
	}
#if defined(RDGRAM_CPU_ISA_X86)
	template <class W>
	RDGRAM_TARGET_AVX512 __attribute__((flatten)) static __rte_noinline run_result
	run_loop_avx512(run_args a, const uint8_t *blk)
	{
		return run_loop_body<W>(a, blk);
	}
	template <class W>
	RDGRAM_TARGET_AVX2 __attribute__((flatten)) static __rte_noinline run_result
	run_loop_avx2(run_args a, const uint8_t *blk)
	{
		return run_loop_body<W>(a, blk);
	}
#endif
	template <class W> static __rte_always_inline run_result run_loop_body(run_args a, const uint8_t *blk)
	{
		const W w(a, blk);
		const size_t step = size_t(a.bbs) * wqe_bb;
		send_wr *const first = a.wr;
		/* The WRs that fit in the blocks allowed, as the loop's one
		 * bound (a division per run, not a compare per WR). */
		const size_t fit = size_t(a.limit - a.ctrl) / step;
		send_wr *const stop = size_t(a.end - first) < fit ? a.end : first + fit;
		send_wr *wr = a.wr;
		uint8_t *ctrl = a.ctrl;
		uint8_t *bbsp = a.bbsp;
		uint32_t pi = a.pi;
		uint64_t bytes = 0;
		for (; wr != stop && w.match(wr); ++wr) {
			prefetch_next(ctrl + step, a.bbs);
			if constexpr (W::same_len)
				w.write(ctrl, wr, pi);
			else
				bytes += w.write(ctrl, wr, pi);
			*bbsp = uint8_t(a.bbs);
			bbsp += a.bbs;
			pi += a.bbs;
			ctrl += step;
		}
		const uint32_t n = uint32_t(wr - first);
		if constexpr (W::same_len)
			bytes = uint64_t(n) * a.len;
		return {n, ctrl - step, bytes};
	}

	/* What every inline writer's run takes: the head's key, plain inline
	 * SEND, the run's length. */
	struct inline_match {
		static constexpr bool same_len = true; /* every WQE a.len bytes */
		const uint8_t *key;
		uint32_t len;
		explicit inline_match(const run_args &a) : key(a.key), len(a.len) {}
		__rte_always_inline bool match(const send_wr *wr) const
		{
			return wr->inline_len == len && wr->flags == send_inline && memcmp(wr, key, 16) == 0;
		}
	};

	/* write_head's and write_inline's stores, C one of the copy classes. */
	template <class C> struct copy_writer : inline_match {
		alignas(64) uint8_t blk[wqe_bb];
		uint32_t seg_off, seg_len, hdr;
		bool full;
		copy_writer(const run_args &a, const uint8_t *b)
			: inline_match(a), seg_off(a.seg_off), seg_len(a.seg_len), hdr(a.hdr), full(a.full)
		{
			memcpy(blk, b, wqe_bb);
		}
		__rte_always_inline uint32_t write(uint8_t *ctrl, const send_wr *wr, uint32_t pi) const
		{
			const auto *src = static_cast<const uint8_t *>(wr->inline_data);
			if (likely(full))
				memcpy(ctrl, blk, wqe_bb);
			else
				memcpy(ctrl, blk, 16 + compact_av_len);
			const uint16_t idx = htobe16(uint16_t(pi));
			memcpy(ctrl + 1, &idx, 2);
			uint8_t *seg = ctrl + seg_off;
			memset(seg + seg_len - 16, 0, 16);
			memcpy(seg, &hdr, 4);
			C::copy(seg + 4, src, len);
			return len;
		}
	};

#if defined(RDGRAM_CPU_ISA_X86)
	/*
	 * For the extended AV and payloads of at most 124 bytes: whole aligned
	 * 64-byte blocks, the head with the WQE index put in, then the inline
	 * header and payload shifted by the header's 4 bytes. The masked
	 * loads read nothing past len and leave the padding zero; the bytes
	 * after the WQE's last 16-byte unit, to the end of its last block, are
	 * zeroed too (the device reads DS units only, and the block is the
	 * WQE's own). AVX-512F/BW (cpu_isa::avx512); only run_loop_avx512
	 * calls it.
	 */
	struct block_writer_avx512 : inline_match {
		__m512i head, hv;
		__mmask64 m0, m1;
		bool two_blocks;
		RDGRAM_TARGET_AVX512 block_writer_avx512(const run_args &a, const uint8_t *blk)
			: inline_match(a), head(_mm512_load_si512(blk)),
			  hv(_mm512_maskz_set1_epi32(__mmask16(1u << 15), int(a.hdr))),
			  m0(a.len >= 64 ? ~__mmask64(0) : (__mmask64(1) << a.len) - 1),
			  m1(a.len <= 64 ? 0 : (__mmask64(1) << (a.len - 64)) - 1), two_blocks(a.bbs == 3)
		{
		}
		/* hi's 4 bytes then lo's first 60 (valignd by 15 dwords); maskz
		 * with every lane set, the same instruction as
		 * _mm512_alignr_epi32, whose _mm512_undefined_epi32 GCC 12 warns
		 * about (-Wmaybe-uninitialized, GCC PR 105593). */
		RDGRAM_TARGET_AVX512 static __m512i shift_in(__m512i lo, __m512i hi)
		{
			return _mm512_maskz_alignr_epi32(__mmask16(0xffff), lo, hi, 15);
		}
		RDGRAM_TARGET_AVX512 uint32_t write(uint8_t *ctrl, const send_wr *wr, uint32_t pi) const
		{
			const auto *src = static_cast<const uint8_t *>(wr->inline_data);
			const uint32_t w0 = htobe32((pi & 0xffff) << 8 | MLX5_OPCODE_SEND);
			_mm512_store_si512(ctrl, _mm512_mask_set1_epi32(head, 1, int(w0)));
			const __m512i d0 = _mm512_maskz_loadu_epi8(m0, src);
			_mm512_store_si512(ctrl + wqe_bb, shift_in(d0, hv));
			if (two_blocks) {
				const __m512i d1 = _mm512_maskz_loadu_epi8(m1, src + wqe_bb);
				_mm512_store_si512(ctrl + 2 * wqe_bb, shift_in(d1, d0));
			}
			return len;
		}
	};
	/*
	 * block_writer_avx512 for AVX2 (no byte-masked loads): payloads of a
	 * whole number of 4-byte words, at most 124 bytes. Each 32-byte half
	 * of the inline blocks is its payload words rotated by one (vpermd)
	 * with the word before it (the header, or the last word of the
	 * previous half) blended in; the dword-masked loads (vpmaskmovd) read
	 * nothing past len and leave the padding zero. The index goes into the
	 * head's first word the same way, so every store is an aligned 32-byte
	 * half. AVX2 (cpu_isa::avx2); only run_loop_avx2 calls it.
	 */
	struct block_writer_avx2 : inline_match {
		__m256i head0, head1, hv, rot;
		__m256i m[4];
		bool two_blocks, none;
		RDGRAM_TARGET_AVX2 block_writer_avx2(const run_args &a, const uint8_t *blk)
			: inline_match(a), head0(_mm256_load_si256(reinterpret_cast<const __m256i *>(blk))),
			  head1(_mm256_load_si256(reinterpret_cast<const __m256i *>(blk + 32))),
			  hv(_mm256_set1_epi32(int(a.hdr))), rot(_mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6)),
			  two_blocks(a.bbs == 3), none(a.len == 0)
		{
			const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
			const int words = int(a.len / 4);
			for (int k = 0; k < 4; k++) /* lane j of half k loads word 8k + j */
				m[k] = _mm256_cmpgt_epi32(_mm256_set1_epi32(words - 8 * k), lane);
		}
		RDGRAM_TARGET_AVX2 uint32_t write(uint8_t *ctrl, const send_wr *wr, uint32_t pi) const
		{
			const auto *src = static_cast<const uint8_t *>(wr->inline_data);
			const int w0 = int(htobe32((pi & 0xffff) << 8 | MLX5_OPCODE_SEND));
			auto *d = reinterpret_cast<__m256i *>(ctrl);
			_mm256_store_si256(d, _mm256_blend_epi32(head0, _mm256_set1_epi32(w0), 0x01));
			_mm256_store_si256(d + 1, head1);
			/* A zero-length payload may have no buffer: read nothing. */
			const auto *p = reinterpret_cast<const int *>(none ? ctrl : src);
			const __m256i y0 = _mm256_permutevar8x32_epi32(_mm256_maskload_epi32(p, m[0]), rot);
			const __m256i y1 = _mm256_permutevar8x32_epi32(_mm256_maskload_epi32(p + 8, m[1]), rot);
			_mm256_store_si256(d + 2, _mm256_blend_epi32(y0, hv, 0x01));
			_mm256_store_si256(d + 3, _mm256_blend_epi32(y1, y0, 0x01));
			if (two_blocks) {
				const __m256i y2 =
					_mm256_permutevar8x32_epi32(_mm256_maskload_epi32(p + 16, m[2]), rot);
				const __m256i y3 =
					_mm256_permutevar8x32_epi32(_mm256_maskload_epi32(p + 24, m[3]), rot);
				_mm256_store_si256(d + 4, _mm256_blend_epi32(y2, y1, 0x01));
				_mm256_store_si256(d + 5, _mm256_blend_epi32(y3, y2, 0x01));
			}
			return len;
		}
	};
#endif

	/*
	 * The mbuf counterpart of inline_run: the WRs from wr on that are plain
	 * SENDs (no flag: no immediate, not solicited) of a single-segment,
	 * non-empty mbuf of at most the MTU, in the memory region of the
	 * burst's last mbuf lookup, to the head's key. Each is the head with
	 * its WQE index and one data segment; its mbuf goes to its SQ slot as
	 * in tx_burst. The caller's checks, as for inline_run (blocks).
	 * Stops at the first WR that is not such a send (tx_burst's loop then
	 * takes it, drops included); returns how many it wrote.
	 */
	__rte_noinline run_result mbuf_run(const tx_state &t, const wqe_head &h, send_wr *wr, send_wr *const end,
					    uint32_t pi, uint32_t bbs, uint32_t ds, uint32_t blocks)
	{
		uintptr_t start, stop;
		uint32_t lkey;
		if (!mrs_.last_region(&start, &stop, &lkey))
			return {0, nullptr, 0};
		alignas(64) uint8_t blk[wqe_bb];
		run_args a = start_run(t, h, wr, end, pi, bbs, ds, blocks, blk);
		a.mr_start = start;
		a.mr_end = stop;
		a.lkey_be = htobe32(lkey);
		a.mtu = c_.mtu;
		a.slots = sq_mbuf_;
		a.mask = t.mask;
		return run_loop<mbuf_writer>(a, blk);
	}

	struct mbuf_writer {
		static constexpr bool same_len = false;
		alignas(64) uint8_t blk[wqe_bb];
		const uint8_t *key;
		uintptr_t mr_start, mr_end;
		rte_mbuf **slots;
		uint32_t seg_off, lkey_be, mtu, mask;
		bool full;
		mbuf_writer(const run_args &a, const uint8_t *b)
			: key(a.key), mr_start(a.mr_start), mr_end(a.mr_end), slots(a.slots), seg_off(a.seg_off),
			  lkey_be(a.lkey_be), mtu(a.mtu), mask(a.mask), full(a.full)
		{
			memcpy(blk, b, wqe_bb);
		}
		__rte_always_inline bool match(const send_wr *wr) const
		{
			if (wr->flags != 0 || memcmp(wr, key, 16) != 0)
				return false;
			const rte_mbuf *m = wr->mbuf;
			const uintptr_t addr = rte_pktmbuf_mtod(m, uintptr_t);
			const uint32_t len = m->data_len;
			/* len - 1 < mtu: 1 <= len <= mtu in one compare. */
			return m->nb_segs == 1 && len - 1 < mtu && addr >= mr_start && addr + len <= mr_end;
		}
		__rte_always_inline uint32_t write(uint8_t *ctrl, const send_wr *wr, uint32_t pi) const
		{
			rte_mbuf *m = wr->mbuf;
			const uint32_t len = m->data_len;
			if (likely(full))
				memcpy(ctrl, blk, wqe_bb);
			else
				memcpy(ctrl, blk, 16 + compact_av_len);
			const uint16_t idx = htobe16(uint16_t(pi));
			memcpy(ctrl + 1, &idx, 2);
			auto *d = reinterpret_cast<mlx5_wqe_data_seg *>(ctrl + seg_off);
			d->byte_count = htobe32(len);
			d->lkey = lkey_be;
			d->addr = htobe64(uint64_t(rte_pktmbuf_mtod(m, uintptr_t)));
			slots[pi & mask] = m;
			return len;
		}
	};

	/* The inline segment at seg: header, data, zero padding to seg_len
	 * (mlx5_wqe_inline_seg; rdma-core set_data_inl_seg). */
	__rte_always_inline void write_inline(const tx_state &t, uint8_t *seg, const uint8_t *src,
					      uint32_t len, uint32_t seg_len)
	{
		const uint32_t hdr = htobe32(len | MLX5_INLINE_SEG);
		if (likely(uint32_t(t.sq_end - seg) >= seg_len)) {
			/* Not wrapping (the common case): zero the last
			 * 16-byte unit, then header and data over it; no
			 * libc call for the variable-length parts
			 * (bench_mlx5_wqe). */
			memset(seg + seg_len - 16, 0, 16);
			memcpy(seg, &hdr, 4);
			copy_inline(seg + 4, src, len);
		} else {
			memcpy(seg, &hdr, 4);
			/* Data and zero padding up to the 16-byte unit, split
			 * where the ring ends. */
			copy_wrapped(t, seg + 4, src, len, seg_len - 4);
		}
	}

	/* Copies the len bytes of an inline payload to dst (not wrapping).
	 * Up to 128 bytes, the common inline sizes: two fixed-size loads
	 * and stores of the length's size class, the second ending at the
	 * last byte (they overlap unless len is twice the class), with no
	 * alignment dispatch; src is never read past len. Longer: rte_memcpy. */
	static __rte_always_inline void copy_inline(uint8_t *dst, const uint8_t *src, uint32_t len)
	{
		if (len > 128) {
			rte_memcpy(dst, src, len);
		} else if (len > 64) {
			copy_two<b64>::copy(dst, src, len);
		} else if (len > 32) {
			copy_two<b32>::copy(dst, src, len);
		} else if (len > 16) {
			copy_two<b16>::copy(dst, src, len);
		} else if (len >= 8) {
			copy_two<uint64_t>::copy(dst, src, len);
		} else if (len >= 4) {
			copy_two<uint32_t>::copy(dst, src, len);
		} else if (len != 0) {
			/* 1 to 3 bytes: first, middle and last (may coincide). */
			const uint8_t a = src[0], b = src[len / 2], c = src[len - 1];
			dst[0] = a;
			dst[len / 2] = b;
			dst[len - 1] = c;
		}
	}

	/* Copies len bytes to dst and zeroes up to total, continuing at the
	 * ring's start when dst reaches its end. */
	void copy_wrapped(const tx_state &t, uint8_t *dst, const uint8_t *src, uint32_t len, uint32_t total)
	{
		uint8_t *const ring = t.sq;
		const uint32_t first = uint32_t(t.sq_end - dst);
		/* The part before the ring's end, then the rest at its start;
		 * len 0 copies nothing (src may then be null). */
		const uint32_t a = len < first ? len : first;
		if (a != 0)
			memcpy(dst, src, a);
		if (len > a)
			memcpy(ring, src + a, len - a);
		/* Zero padding from len to total, split the same way. */
		if (total <= first) {
			memset(dst + len, 0, total - len);
		} else if (len < first) {
			memset(dst + len, 0, first - len);
			memset(ring, 0, total - first);
		} else {
			memset(ring + (len - first), 0, total - len);
		}
	}

	/* One doorbell for everything posted since the last (post_send_db). */
	void ring_sq(const uint8_t *ctrl, uint32_t bbs)
	{
		wqes_before_sq_dbrec();
		store_be32(&r_.dbrec[MLX5_SND_DBR], sq_pi_ & 0xffff);
		sq_dbrec_before_doorbell();
		auto *dst = reinterpret_cast<volatile uint64_t *>(r_.bf_reg + bf_off_);
		if (c_.use_bf && r_.bf_size != 0 && bbs * wqe_bb <= r_.bf_size) {
			/* 8-byte stores in address order (mlx5_bf_copy avoids
			 * memcpy for the same reason: string moves do not keep
			 * the order); the source wraps with the ring. */
			const uint8_t *src = ctrl;
			for (uint32_t b = 0; b < bbs; b++) {
				const auto *s = reinterpret_cast<const uint64_t *>(src);
				for (unsigned w = 0; w < wqe_bb / 8; w++)
					dst[b * 8 + w] = s[w];
				src += wqe_bb;
				if (src == sq_end_)
					src = r_.sq_buf;
			}
			xc_.bf_copies++;
		} else {
			*dst = *reinterpret_cast<const uint64_t *>(ctrl);
		}
		flush_doorbell();
		bf_off_ ^= r_.bf_size;
		xc_.doorbells++;
	}

	/* Requester CQEs: free the mbufs of every WQE up to the one each
	 * reports. */
	void reap_tx(unsigned budget)
	{
		const uint32_t cnt = r_.scq.cqe_cnt;
		unsigned polled = 0;
		while (polled < budget) {
			auto *cqe = reinterpret_cast<const mlx5_cqe64 *>(
				r_.scq.buf + size_t(scq_ci_ & (cnt - 1)) * 64);
			if (!cqe_sw_owned(cqe, scq_ci_, cnt))
				break;
			cqe_owner_before_fields();
			scq_ci_++;
			polled++;
			cqe_fields f;
			const cqe_class k = parse_cqe(*cqe, &f);
			if (k == cqe_class::req)
				xc_.tx_cqes++;
			else if (k == cqe_class::req_err)
				xc_.tx_cqe_err++;
			else {
				xc_.rx_cqe_unexpected++;
				continue;
			}
			complete_to(f.wqe_counter);
		}
		if (polled != 0) {
			cqe_reads_before_ci();
			store_be32(&r_.scq.dbrec[cq_set_ci], scq_ci_ & cq_ci_mask);
		}
	}

	/* Retires the outstanding WQEs up to and including the one whose
	 * 16-bit index is wc. */
	void complete_to(uint16_t wc)
	{
		const uint32_t out = sq_pi_ - sq_ci_;
		if (unlikely(uint16_t(wc - uint16_t(sq_ci_)) >= out)) {
			xc_.tx_cqe_stray++;
			return;
		}
		const uint32_t mask = r_.sq_wqe_cnt - 1;
		if (sq_nmbuf_ == 0) {
			/* Only inline WQEs outstanding: nothing to free, so
			 * jump to the reported WQE instead of walking to it
			 * (sq_bbs_ is nonzero exactly at outstanding WQE
			 * starts, which keeps the stray check). */
			const uint32_t tgt = sq_ci_ + uint16_t(wc - uint16_t(sq_ci_));
			const uint32_t b = sq_bbs_[tgt & mask];
			if (unlikely(b == 0)) {
				xc_.tx_cqe_stray++;
				return;
			}
			const uint32_t from = sq_ci_ & mask, to = tgt & mask;
			if (from <= to) {
				memset(sq_bbs_ + from, 0, to - from + 1);
			} else {
				memset(sq_bbs_ + from, 0, r_.sq_wqe_cnt - from);
				memset(sq_bbs_, 0, to + 1);
			}
			sq_ci_ = tgt + b;
			return;
		}
		/* The sent mbufs go back in batches (rte_pktmbuf_free_bulk:
		 * one mempool put per batch and pool, every segment of a
		 * chain freed), as DPDK's PMDs free theirs. */
		rte_mbuf *batch[free_batch];
		unsigned nb = 0;
		for (;;) {
			const uint32_t idx = sq_ci_ & mask;
			const bool last = uint16_t(sq_ci_) == wc;
			if (sq_mbuf_[idx] != nullptr) {
				batch[nb++] = sq_mbuf_[idx];
				sq_mbuf_[idx] = nullptr;
				sq_nmbuf_--;
				if (nb == free_batch) {
					rte_pktmbuf_free_bulk(batch, nb);
					nb = 0;
				}
			}
			const uint32_t b = sq_bbs_[idx];
			if (unlikely(b == 0)) {
				/* WQE index not at a WQE start: stop, count. */
				xc_.tx_cqe_stray++;
				break;
			}
			sq_bbs_[idx] = 0;
			sq_ci_ += b;
			if (last || sq_ci_ == sq_pi_)
				break;
		}
		if (nb != 0)
			rte_pktmbuf_free_bulk(batch, nb);
	}
	static constexpr unsigned free_batch = 64;

	/* One responder-CQ entry; true when wc was filled. */
	bool rx_one(const mlx5_cqe64 &cqe, recv_wc &wc)
	{
		cqe_fields f;
		const cqe_class k = parse_cqe(cqe, &f);
		if (unlikely(k != cqe_class::recv && k != cqe_class::resp_err &&
			     k != cqe_class::inline_scatter)) {
			xc_.rx_cqe_unexpected++;
			return false;
		}
		/* A responder CQE consumes the RQ's oldest WQE (UD RQs complete
		 * in order). */
		if (unlikely(rq_ci_ == rq_pi_)) {
			xc_.rx_cqe_no_wqe++;
			return false;
		}
		const uint32_t idx = rq_ci_ & (r_.rq_wqe_cnt - 1);
		if (unlikely(f.wqe_counter != uint16_t(rq_ci_)))
			xc_.rx_wqe_mismatch++;
		rte_mbuf *m = rq_mbuf_[idx];
		rq_mbuf_[idx] = nullptr;
		rq_ci_++;
		if (unlikely(k != cqe_class::recv)) {
			if (k == cqe_class::resp_err)
				xc_.rx_cqe_err++;
			else
				xc_.rx_cqe_scatter++;
			rte_pktmbuf_free(m);
			return false;
		}
		if (unlikely(f.byte_cnt > rx_len_ || f.byte_cnt < grh_len)) {
			xc_.rx_cqe_bad_len++;
			rte_pktmbuf_free(m);
			return false;
		}
		m->data_len = uint16_t(f.byte_cnt);
		m->pkt_len = f.byte_cnt;
		fill_wc(f, m, wc);
		ctr_.rx_pkts++;
		ctr_.rx_bytes += f.byte_cnt - grh_len;
		return true;
	}

	void fill_wc(const cqe_fields &f, rte_mbuf *m, recv_wc &wc)
	{
		wc.mbuf = m;
		wc.byte_len = f.byte_cnt;
		wc.qp_num = f.qpn;
		wc.src_qp = f.src_qp;
		wc.imm_data = f.with_imm ? f.imm : 0;
		wc.pkey_index = f.with_imm ? 0 : f.pkey_index;
		wc.dlid_path_bits = f.ml_path & 0x7f;
		wc.wc_flags = uint8_t((f.grh ? wc_grh : 0) | (f.with_imm ? wc_with_imm : 0) |
				      (f.solicited ? wc_solicited : 0));
		if (c_.roce) {
			/* 27:24 is the L3 header type, not an SL (rdma-core
			 * reports it as wc.sl; the kernel does not). */
			wc.slid = 0;
			wc.sl = 0;
			const uint8_t t = f.l3_or_sl & 3;
			wc.l3 = t == roce_l3_ipv4 ? l3_type::ipv4 : t == roce_l3_ipv6 ? l3_type::ipv6
										    : l3_type::ib_grh;
		} else {
			wc.slid = f.slid;
			wc.sl = f.l3_or_sl;
			wc.l3 = l3_type::ib_grh;
		}
		memset(wc.sgid.raw, 0, 16);
		memset(wc.dgid.raw, 0, 16);
		if (!f.grh)
			return;
		const auto *area = rte_pktmbuf_mtod(m, const uint8_t *);
		bool v4 = false;
		if (c_.roce) {
			detail::grh_l3 l3;
			if (detail::classify_roce_grh(wc, area, &l3) != 0) {
				xc_.rx_grh_unparsed++;
				return;
			}
			v4 = l3 == detail::grh_l3::ipv4;
		}
		if (v4) {
			rte_be32_t a;
			memcpy(&a, area + 20 + 12, 4);
			wc.sgid = wire::gid::from_v4(a);
			memcpy(&a, area + 20 + 16, 4);
			wc.dgid = wire::gid::from_v4(a);
		} else {
			memcpy(wc.sgid.raw, area + 8, 16);
			memcpy(wc.dgid.raw, area + 24, 16);
		}
	}

	/* Fills the free RQ slots, one doorbell-record update. */
	void refill()
	{
		uint32_t want = r_.rq_wqe_cnt - (rq_pi_ - rq_ci_);
		if (want == 0)
			return;
		rte_mbuf *ms[64];
		bool posted = false;
		while (want != 0) {
			const uint32_t k = want < 64 ? want : 64;
			if (rte_pktmbuf_alloc_bulk(mp_, ms, k) != 0) {
				xc_.rq_no_mbuf++;
				break;
			}
			for (uint32_t i = 0; i < k; i++) {
				rte_mbuf *m = ms[i];
				const uintptr_t a = rte_pktmbuf_mtod(m, uintptr_t);
				uint32_t lkey = MLX5_INVALID_LKEY;
				mrs_.lookup(a, rx_len_, &lkey); /* registered at setup */
				const uint32_t idx = rq_pi_ & (r_.rq_wqe_cnt - 1);
				auto *d = reinterpret_cast<mlx5_wqe_data_seg *>(
					r_.rq_buf + size_t(idx) * r_.rq_stride);
				d->byte_count = htobe32(rx_len_);
				d->lkey = htobe32(lkey);
				d->addr = htobe64(uint64_t(a));
				/* A list longer than one entry ends with the
				 * invalid-lkey terminator (set_data_ptr_seg_end). */
				if (r_.rq_stride > sizeof(*d)) {
					d[1].byte_count = 0;
					d[1].lkey = htobe32(MLX5_INVALID_LKEY);
					d[1].addr = 0;
				}
				rq_mbuf_[idx] = m;
				rq_pi_++;
			}
			want -= k;
			posted = true;
		}
		if (posted) {
			rwqes_before_rq_dbrec();
			store_be32(&r_.dbrec[MLX5_RCV_DBR], rq_pi_ & 0xffff);
			xc_.rq_doorbells++;
		}
	}

	rings r_{};
	queue_config c_{};
	rte_mempool *mp_ = nullptr;
	mr_table mrs_;
	ah_table<mlx5_av>::view ahs_{};
	uint8_t *sq_end_ = nullptr;
	rte_mbuf **sq_mbuf_ = nullptr; /* by WQE start block: the mbuf it sends */
	uint8_t *sq_bbs_ = nullptr;    /* by WQE start block: its size in blocks */
	rte_mbuf **rq_mbuf_ = nullptr;
	uint32_t sq_pi_ = 0, sq_ci_ = 0; /* basic blocks posted / retired */
	uint32_t sq_nmbuf_ = 0;          /* outstanding WQEs that hold an mbuf */
	uint32_t rq_pi_ = 0, rq_ci_ = 0; /* receive WQEs posted / completed */
	uint32_t scq_ci_ = 0, rcq_ci_ = 0;
	uint32_t bf_off_ = 0;
	uint32_t since_signal_ = 0;
	uint32_t max_bbs_ = 2;
	cpu_isa isa_ = cpu_isa::portable; /* the run writers' level (attach) */
	uint32_t rx_len_ = 0;
	qp_counters ctr_{};
	mlx5_counters xc_{};
	/* max_send_sge data segments: those of the chained mbuf being sent
	 * (gather_chain), beside the rings on the queue's NUMA node. */
	mlx5_wqe_data_seg *chain_ = nullptr;
};

static_assert(ud_driver<mlx5_queue>);

} // namespace rdgram::mlx5

#endif
