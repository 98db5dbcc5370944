/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/mlx5 send path: tx_burst and the routines it dispatches to, each
 * returning a tx_code as the routines of DPDK's mlx5_tx.h return an enum
 * mlx5_txcmp_code:
 *   tx_run     a run of WRs that differ only in payload, written by the run
 *              writers (inline_run, mbuf_run; mlx5_tx_writers.h)
 *   tx_check   a WR's checks (AH, lengths, chain, memory region): its drop
 *              reason, or what its WQE needs
 *   tx_single  one WQE: the destination's prebuilt head (build_head,
 *              write_head), then the inline segment or data segments
 *   tx_end     the burst's state back to the queue, and its one doorbell
 *              (ring_sq)
 * Inline, as DPDK keeps its burst functions: one poll thread calls it per
 * burst. See mlx5_datapath.h for the WQE layout and the reference code.
 */
#ifndef RDGRAM_MLX5_TX_H
#define RDGRAM_MLX5_TX_H

#include <cstring>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include "mlx5_queue.h"
#include "mlx5_ring.h"
#include "mlx5_tx_writers.h"

namespace rdgram::mlx5 {

/*
 * What a step of tx_burst did with the WR at its cursor, as the routines of
 * DPDK's mlx5_tx.h return an enum mlx5_txcmp_code: tx_burst's loop is a
 * dispatch on these.
 */
enum class mlx5_queue::tx_code : uint8_t {
	done,    /* written (tx_run: a run of WRs written): on to the next */
	single,  /* tx_run: not a run; tx_check: checked, write it alone */
	dropped, /* dropped and counted, its mbuf chain freed: on to the next */
	full,    /* no SQ room for it: stop; it and the rest stay with the caller */
};

/* tx_burst's running values (see tx_begin). */
struct mlx5_queue::tx_burst_state {
	uint32_t pi;       /* the next WQE's basic block counter */
	uint32_t pi_limit; /* the SQ counter may reach this (room, read once) */
	uint32_t sig_left; /* WQEs until the next CQ_UPDATE, counting down */
	uint32_t inline_max; /* min(max_inline, mtu): one test for both */
	uint32_t nmbuf, skipped;
	uint64_t bytes;
	uint8_t *last;     /* the last WQE written (its control segment) */
	uint32_t last_bbs;
	/* The inline length of the last WQE written, if it was an inline
	 * SEND to the current head (checked against the inline limit and the
	 * MTU then); head_only if it was not inline; no_run before the
	 * first. No 32-bit length equals either. */
	uint64_t run_len;
	static constexpr uint64_t no_run = ~uint64_t(0), head_only = uint64_t(1) << 32;
};

/* A WR tx_check passed: its payload's length, where its data segments go
 * and how long they are (seg_len 0: a zero-length send). */
struct mlx5_queue::tx_wqe {
	const mlx5_av *av;
	uintptr_t addr;
	uint32_t len, seg_len, lkey;
};

inline uint16_t mlx5_queue::tx_burst(send_wr *wrs, uint16_t n)
{
	if (n > max_burst)
		n = max_burst;
	/* One owner-bit read when nothing completed. */
	reap_tx(tx_cqe_budget);
	/* Everything the loop reads or counts, in locals for the burst (t
	 * and b): the ring is written through uint8_t pointers, which may
	 * alias any member, so members used per WQE would be reloaded (and
	 * counters stored back) after every ring store. And as few as fit in
	 * registers: the loop's cost is its instruction count
	 * (bench_mlx5_wqe). */
	const tx_state t = tx_begin();
	tx_burst_state b;
	b.pi = txq_.sq_pi;
	b.pi_limit = txq_.sq_ci + r_.sq_wqe_cnt;
	b.sig_left = c_.signal_every - txq_.since_signal;
	b.inline_max = c_.max_inline < c_.mtu ? c_.max_inline : c_.mtu;
	b.nmbuf = b.skipped = 0;
	b.bytes = 0;
	b.last = nullptr;
	b.last_bbs = 0;
	b.run_len = tx_burst_state::no_run;
	/* The head lives for this burst only: an AV changed in place
	 * (ah_table::update) is seen by the next burst. */
	wqe_head head;
	head.key_wr = {ah_null, 0, 0}; /* no WR that passed lookup has it */
	send_wr *wr = wrs;
	send_wr *const end = wrs + n;
	for (; wr != end; ++wr) {
		const bool same_head = memcmp(wr, head.key, sizeof(head.key)) == 0;
		if (same_head && tx_run(t, b, head, wr, end) == tx_code::done)
			continue;
		tx_wqe w;
		if (tx_check(b, *wr, w) == tx_code::dropped)
			continue;
		/* The first WR to a destination in this burst builds its
		 * 64-byte head; the rest copy it. Keyed by the WR's first 16
		 * bytes as given: the handle (slot and generation, just
		 * checked live), the remote QPN and the Q_Key, from which the
		 * head's fields follow. */
		if (unlikely(!same_head))
			build_head(head, t, *wr, *w.av, c_.compact_av && !w.av->global);
		if (unlikely(tx_single(t, b, head, *wr, w) == tx_code::full))
			break; /* this WR and the rest stay with the caller */
	}
	tx_end(b, uint16_t(wr - wrs));
	return uint16_t(wr - wrs);
}

/* The ring's constants for a burst (tx_state). */
__rte_always_inline tx_state mlx5_queue::tx_begin() const
{
	tx_state t;
	t.sq = r_.sq_buf;
	t.sq_end = txq_.sq_end;
	t.mask = r_.sq_wqe_cnt - 1;
	t.qpn_be = htobe32(r_.qpn << 8);
	t.own_qkey = c_.qkey;
	return t;
}

/*
 * A WR that differs from the last WQE's only in its payload (same head,
 * plain inline SEND of the same length, or a plain single-segment mbuf
 * SEND after any WQE to the head) starts a run, which inline_run or
 * mbuf_run writes with the checks made once for all of it; the AH lookup
 * that built the head holds for it (the head lives for the burst). Only
 * when the run's WQEs fit before the next signalled one, the ring's end
 * and the SQ's limit. done: wr is the run's last WR; single: nothing
 * written, the WR goes to tx_check. A chain or an empty mbuf is never a
 * run, and costs no call.
 */
__rte_always_inline mlx5_queue::tx_code mlx5_queue::tx_run(const tx_state &t, tx_burst_state &b,
							     const wqe_head &h, send_wr *&wr, send_wr *end)
{
	run_result rr;
	uint32_t bbs;
	if (uint64_t(wr->inline_len) == b.run_len && wr->flags == send_inline) {
		const uint32_t len = uint32_t(b.run_len);
		const uint32_t seg_len = align16(inline_hdr_len + len);
		const uint32_t size = 16 + h.av_len + seg_len;
		bbs = (size + wqe_bb - 1) / wqe_bb;
		const uint32_t blocks = run_room(t, b.pi, b.pi_limit, b.sig_left, bbs);
		if (blocks < bbs)
			return tx_code::single;
		rr = inline_run(t, h, wr, end, b.pi, len, seg_len, bbs, size / ds_unit, blocks);
		/* rr.n >= 1: wr itself fits and matches. */
	} else if (b.run_len != tx_burst_state::no_run && wr->flags == 0 && wr->mbuf->nb_segs == 1 &&
		   wr->mbuf->data_len != 0) {
		const uint32_t size = 16 + h.av_len + uint32_t(sizeof(mlx5_wqe_data_seg));
		bbs = (size + wqe_bb - 1) / wqe_bb;
		const uint32_t blocks = run_room(t, b.pi, b.pi_limit, b.sig_left, bbs);
		if (blocks < bbs)
			return tx_code::single;
		rr = mbuf_run(t, h, wr, end, b.pi, bbs, size / ds_unit, blocks);
		if (rr.n == 0)
			return tx_code::single;
		b.nmbuf += rr.n;
	} else {
		return tx_code::single;
	}
	wr += rr.n - 1;
	b.last = rr.last;
	b.last_bbs = bbs;
	b.pi += rr.n * bbs;
	b.sig_left -= rr.n;
	b.bytes += rr.bytes;
	return tx_code::done;
}

/*
 * The per-WR checks of a WR that is not part of a run: a live AH, the
 * payload within the inline limit or the MTU, a chain within max_send_sge
 * and every segment in a registered region (gather_chain). single: w
 * describes it; dropped: counted under its reason, its mbuf chain freed.
 */
__rte_always_inline mlx5_queue::tx_code mlx5_queue::tx_check(tx_burst_state &b, send_wr &wr, tx_wqe &w)
{
	w.av = ahs_.lookup(wr.ah);
	if (unlikely(w.av == nullptr)) {
		ctr_.tx_stale_ah++;
		drop_wr(wr);
		b.skipped++;
		return tx_code::dropped;
	}
	w.lkey = 0;
	w.addr = 0;
	if (likely(wr.flags & send_inline)) {
		w.len = wr.inline_len;
		if (unlikely(w.len > b.inline_max)) {
			if (w.len > c_.max_inline)
				ctr_.tx_inline_too_long++;
			else
				ctr_.tx_too_long++;
			b.skipped++;
			return tx_code::dropped;
		}
		w.seg_len = align16(inline_hdr_len + w.len);
		return tx_code::single;
	}
	rte_mbuf *m = wr.mbuf;
	w.len = m->data_len;
	w.addr = rte_pktmbuf_mtod(m, uintptr_t);
	w.seg_len = sizeof(mlx5_wqe_data_seg);
	if (unlikely(m->nb_segs != 1)) {
		/* Out of line: its data segments go to txq_.chain, seg_len is
		 * 16 per segment, and a chain of one non-empty segment comes
		 * back as addr and lkey for the single-segment write. Returned
		 * by value: no local of tx_burst's loop has its address taken
		 * (which would keep it in memory for the whole loop). */
		const chain_gather g = gather_chain(m);
		if (unlikely(g.v != chain_verdict::ok)) {
			count_chain_drop(g.v);
			drop_wr(wr);
			b.skipped++;
			return tx_code::dropped;
		}
		w.len = g.len;
		w.addr = g.addr;
		w.lkey = g.lkey;
		w.seg_len = g.seg_len;
	} else if (unlikely(w.len == 0)) {
		/* No data segment, as rdma-core posts an SGE of length 0
		 * (_mlx5_post_send skips it: the provider never hands the
		 * device a data segment of byte_count 0): a zero-length send,
		 * DS 4, as for a chain of empty segments. */
		w.seg_len = 0;
	} else {
		if (unlikely(!mrs_.lookup(w.addr, w.len, &w.lkey))) {
			ctr_.tx_bad_mbuf++;
			drop_wr(wr);
			b.skipped++;
			return tx_code::dropped;
		}
		if (unlikely(w.len > c_.mtu)) {
			ctr_.tx_too_long++;
			drop_wr(wr);
			b.skipped++;
			return tx_code::dropped;
		}
	}
	return tx_code::single;
}

/*
 * One WQE for a checked WR (tx_check) to the head h: the head's block
 * with the WR's control words, then its inline segment or data segments.
 * done, or full when the SQ has no room for it (nothing written).
 */
__rte_always_inline mlx5_queue::tx_code mlx5_queue::tx_single(const tx_state &t, tx_burst_state &b,
								const wqe_head &h, const send_wr &wr,
								const tx_wqe &w)
{
	const uint32_t flags = wr.flags;
	const uint32_t size = 16 + h.av_len + w.seg_len;
	const uint32_t bbs = (size + wqe_bb - 1) / wqe_bb;
	if (unlikely(b.pi_limit - b.pi < bbs)) {
		ctr_.tx_port_full++;
		return tx_code::full;
	}
	bool sig = false;
	if (unlikely(--b.sig_left == 0)) {
		sig = true;
		b.sig_left = c_.signal_every;
	}
	uint8_t *ctrl = write_head(t, h, b.pi, flags, wr.imm_data, sig, size / ds_unit);
	/* The next WQE's blocks, guessing its size is this one's (see
	 * prefetch_next). */
	prefetch_next(t.sq + size_t((b.pi + bbs) & t.mask) * wqe_bb, bbs);

	uint8_t *seg = ctrl + 16 + h.av_len;
	if (seg == t.sq_end)
		seg = t.sq;
	if (likely(flags & send_inline)) {
		write_inline(t, seg, static_cast<const uint8_t *>(wr.inline_data), w.len, w.seg_len);
	} else {
		if (likely(w.seg_len == sizeof(mlx5_wqe_data_seg))) {
			auto *d = reinterpret_cast<mlx5_wqe_data_seg *>(seg);
			d->byte_count = htobe32(w.len);
			d->lkey = htobe32(w.lkey);
			d->addr = htobe64(uint64_t(w.addr));
		} else {
			write_chain(seg, t.sq, t.sq_end, w.seg_len / uint32_t(sizeof(mlx5_wqe_data_seg)));
		}
		/* Slots of inline WQEs stay null: complete_to nulls every
		 * slot it frees, so a slot not holding an outstanding mbuf is
		 * null already. The slot holds the chain's head; its free
		 * (rte_pktmbuf_free) frees every segment. */
		txq_.sq_mbuf[b.pi & t.mask] = wr.mbuf;
		b.nmbuf++;
	}
	b.last = ctrl;
	b.last_bbs = bbs;
	txq_.sq_bbs[b.pi & t.mask] = uint8_t(bbs);
	b.pi += bbs;
	b.bytes += w.len;
	b.run_len = (flags & send_inline) ? w.len : tx_burst_state::head_only;
	return tx_code::done;
}

/* The burst's values back to the queue, and its one doorbell. */
__rte_always_inline void mlx5_queue::tx_end(tx_burst_state &b, uint16_t taken)
{
	txq_.sq_pi = b.pi;
	txq_.since_signal = c_.signal_every - b.sig_left;
	txq_.sq_nmbuf += b.nmbuf;
	ctr_.tx_pkts += taken - b.skipped;
	ctr_.tx_bytes += b.bytes;
	if (b.last == nullptr)
		return;
	/* signal_last: the burst's last posted WQE asks for a CQE too, so
	 * nothing sent waits for a later burst. */
	auto *cs = reinterpret_cast<mlx5_wqe_ctrl_seg *>(b.last);
	if (c_.signal_last && !(cs->fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE)) {
		cs->fm_ce_se |= MLX5_WQE_CTRL_CQ_UPDATE;
		txq_.since_signal = 0;
	}
	ring_sq(b.last, b.last_bbs);
}

/* Frees a dropped WR's mbuf, every segment of its chain. */
inline void mlx5_queue::drop_wr(send_wr &wr)
{
	if (!(wr.flags & send_inline) && wr.mbuf != nullptr)
		rte_pktmbuf_free(wr.mbuf);
}

/*
 * The gather list of a chained mbuf (nb_segs != 1), out of line: the
 * single-segment send never runs it. As rdma-core's _mlx5_post_send
 * for a WR of several SGEs: at most max_send_sge segments, counted
 * with the empty ones (it refuses num_sge > max_gs before looking at
 * lengths), and one mlx5_wqe_data_seg per non-empty segment (it skips
 * an SGE of length 0: no segment, no DS unit), each with the lkey of
 * the memory region that covers it. The segments are built here, in
 * txq_.chain, and copied to the ring by write_chain once the WQE has
 * room. len is the message length (the segments' sum, at most the
 * MTU), seg_len 16 bytes per data segment (0 when every segment is
 * empty: a zero-length send, as rdma-core posts one). A chain of one
 * non-empty segment is also described by addr and lkey, for the
 * single-segment write.
 */
chain_gather mlx5_queue::gather_chain(const rte_mbuf *m)
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
		 * than its head says cannot overrun txq_.chain. */
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
		txq_.chain[n].byte_count = htobe32(l);
		txq_.chain[n].lkey = htobe32(k);
		txq_.chain[n].addr = htobe64(uint64_t(a));
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

void mlx5_queue::count_chain_drop(chain_verdict v)
{
	if (v == chain_verdict::too_many_segs)
		ctr_.tx_too_many_segs++;
	else if (v == chain_verdict::bad_mbuf)
		ctr_.tx_bad_mbuf++;
	else
		ctr_.tx_too_long++;
}

/* Copies n data segments from txq_.chain to the WQE at seg. A segment is
 * 16 bytes at a 16-byte offset of a ring of whole 64-byte blocks, so
 * none straddles the ring's end; the list continues at the ring's
 * start between two segments (rdma-core: dpseg == qend). Inline in
 * the loop's cold branch, with the ring's bounds by value: as an
 * out-of-line call taking the loop's tx_state by reference (and
 * gather_chain writing through pointers to the loop's locals), the
 * loop's values went to the stack and the inline send got 6% slower
 * (bench_mlx5_wqe tx/mlx5_path: 254 against 239 ns per burst). */
__rte_always_inline void mlx5_queue::write_chain(uint8_t *seg, uint8_t *ring, const uint8_t *ring_end, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (seg == ring_end)
			seg = ring;
		memcpy(seg, &txq_.chain[i], sizeof(txq_.chain[i]));
		seg += sizeof(txq_.chain[i]);
	}
}

/* Builds the head of a destination: see wqe_head (mlx5_queue.h). */
inline void mlx5_queue::build_head(wqe_head &h, const tx_state &t, const send_wr &wr, const mlx5_av &av,
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
__rte_always_inline uint8_t *mlx5_queue::write_head(const tx_state &t, const wqe_head &h, uint32_t pi,
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

/* What every run starts from: blk, the head with the control words
 * of a plain, unsignalled SEND of ds units (fm_ce_se and imm zero),
 * and the run's place in the ring (see inline_run for blocks). */
inline run_args mlx5_queue::start_run(const tx_state &t, const wqe_head &h, send_wr *wr, send_wr *end, uint32_t pi,
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
	a.bbsp = txq_.sq_bbs + (pi & t.mask);
	a.pi = pi;
	a.bbs = bbs;
	a.seg_off = 16 + h.av_len;
	a.full = h.av_len == sizeof(mlx5_wqe_av);
	return a;
}

/* How many blocks from pi a run may write: before the next
 * signalled WQE (sig_left counts down to it), the ring's end and the
 * SQ's limit. */
__rte_always_inline uint32_t mlx5_queue::run_room(const tx_state &t, uint32_t pi, uint32_t pi_limit,
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
run_result mlx5_queue::inline_run(const tx_state &t, const wqe_head &h, send_wr *wr,
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
		if (txq_.isa >= cpu_isa::avx512)
			return run_loop_avx512<block_writer_avx512>(a, blk);
		if (txq_.isa >= cpu_isa::avx2 && len % 4 == 0)
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
run_result mlx5_queue::mbuf_run(const tx_state &t, const wqe_head &h, send_wr *wr, send_wr *const end,
				    uint32_t pi, uint32_t bbs, uint32_t ds, uint32_t blocks)
{
	uintptr_t start, stop;
	uint32_t lkey;
	if (!mrs_.last_range(&start, &stop, &lkey))
		return {0, nullptr, 0};
	alignas(64) uint8_t blk[wqe_bb];
	run_args a = start_run(t, h, wr, end, pi, bbs, ds, blocks, blk);
	a.mr_start = start;
	a.mr_end = stop;
	a.lkey_be = htobe32(lkey);
	a.mtu = c_.mtu;
	a.slots = txq_.sq_mbuf;
	a.mask = t.mask;
	return run_loop<mbuf_writer>(a, blk);
}

/* The inline segment at seg: header, data, zero padding to seg_len
 * (mlx5_wqe_inline_seg; rdma-core set_data_inl_seg). */
__rte_always_inline void mlx5_queue::write_inline(const tx_state &t, uint8_t *seg, const uint8_t *src,
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

/* Copies len bytes to dst and zeroes up to total, continuing at the
 * ring's start when dst reaches its end. */
inline void mlx5_queue::copy_wrapped(const tx_state &t, uint8_t *dst, const uint8_t *src, uint32_t len, uint32_t total)
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
inline void mlx5_queue::ring_sq(const uint8_t *ctrl, uint32_t bbs)
{
	wqes_before_sq_dbrec();
	store_be32(&r_.dbrec[MLX5_SND_DBR], txq_.sq_pi & 0xffff);
	sq_dbrec_before_doorbell();
	auto *dst = reinterpret_cast<volatile uint64_t *>(r_.bf_reg + txq_.bf_off);
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
			if (src == txq_.sq_end)
				src = r_.sq_buf;
		}
		ctr_.bf_copies++;
	} else {
		*dst = *reinterpret_cast<const uint64_t *>(ctrl);
	}
	flush_doorbell();
	txq_.bf_off ^= r_.bf_size;
	ctr_.doorbells++;
}

} // namespace rdgram::mlx5

#endif
