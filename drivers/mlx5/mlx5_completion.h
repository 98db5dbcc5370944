/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/mlx5 completions and receive: the requester CQ (reap_tx,
 * complete_to: the sent mbufs back to their pool) and the responder CQ
 * (rx_burst, rx_one, fill_wc: CQE64s decoded by parse_cqe, mlx5_ring.h,
 * into recv_wc with verbs' layout), and the cyclic RQ's refill. A byte
 * count the CQE reports beyond the posted buffer is never trusted: the
 * buffer is dropped and counted. Inline: one poll thread calls these per
 * burst.
 */
#ifndef RDGRAM_MLX5_COMPLETION_H
#define RDGRAM_MLX5_COMPLETION_H

#include <cstring>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include "mlx5_queue.h"
#include "mlx5_ring.h"
#include "rdgram/ah_from_wc.h"

namespace rdgram::mlx5 {

/* Receives up to n completions. Every responder CQE is delivered or
 * dropped under one counter; the RQ is refilled in batches. */
inline uint16_t mlx5_queue::rx_burst(recv_wc *wcs, uint16_t n)
{
	if (n > max_burst)
		n = max_burst;
	uint16_t out = 0;
	uint32_t polled = 0;
	const uint32_t cnt = r_.rcq.cqe_cnt;
	/* Bounded by the ring: a CQE is looked at once per call. */
	while (out < n && polled < cnt) {
		auto *cqe = reinterpret_cast<const mlx5_cqe64 *>(
			r_.rcq.buf + size_t(rxq_.rcq_ci & (cnt - 1)) * 64);
		if (!cqe_sw_owned(cqe, rxq_.rcq_ci, cnt))
			break;
		cqe_owner_before_fields();
		rxq_.rcq_ci++;
		polled++;
		if (likely(rx_one(*cqe, wcs[out])))
			out++;
	}
	if (polled != 0) {
		cqe_reads_before_ci();
		store_be32(&r_.rcq.dbrec[cq_set_ci], rxq_.rcq_ci & cq_ci_mask);
	}
	if (r_.rq_wqe_cnt - (rxq_.rq_pi - rxq_.rq_ci) >= c_.rq_refill_batch)
		refill();
	return out;
}

/* Requester CQEs: free the mbufs of every WQE up to the one each
 * reports. */
inline void mlx5_queue::reap_tx(unsigned budget)
{
	const uint32_t cnt = r_.scq.cqe_cnt;
	unsigned polled = 0;
	while (polled < budget) {
		auto *cqe = reinterpret_cast<const mlx5_cqe64 *>(
			r_.scq.buf + size_t(txq_.scq_ci & (cnt - 1)) * 64);
		if (!cqe_sw_owned(cqe, txq_.scq_ci, cnt))
			break;
		cqe_owner_before_fields();
		txq_.scq_ci++;
		polled++;
		cqe_fields f;
		const cqe_class k = parse_cqe(*cqe, &f);
		if (k == cqe_class::req)
			ctr_.tx_cqes++;
		else if (k == cqe_class::req_err)
			ctr_.tx_cqe_err++;
		else {
			ctr_.rx_cqe_unexpected++;
			continue;
		}
		complete_to(f.wqe_counter);
	}
	if (polled != 0) {
		cqe_reads_before_ci();
		store_be32(&r_.scq.dbrec[cq_set_ci], txq_.scq_ci & cq_ci_mask);
	}
}

/* Retires the outstanding WQEs up to and including the one whose
 * 16-bit index is wc. */
inline void mlx5_queue::complete_to(uint16_t wc)
{
	const uint32_t out = txq_.sq_pi - txq_.sq_ci;
	if (unlikely(uint16_t(wc - uint16_t(txq_.sq_ci)) >= out)) {
		ctr_.tx_cqe_stray++;
		return;
	}
	const uint32_t mask = r_.sq_wqe_cnt - 1;
	if (txq_.sq_nmbuf == 0) {
		/* Only inline WQEs outstanding: nothing to free, so
		 * jump to the reported WQE instead of walking to it
		 * (txq_.sq_bbs is nonzero exactly at outstanding WQE
		 * starts, which keeps the stray check). */
		const uint32_t tgt = txq_.sq_ci + uint16_t(wc - uint16_t(txq_.sq_ci));
		const uint32_t b = txq_.sq_bbs[tgt & mask];
		if (unlikely(b == 0)) {
			ctr_.tx_cqe_stray++;
			return;
		}
		const uint32_t from = txq_.sq_ci & mask, to = tgt & mask;
		if (from <= to) {
			memset(txq_.sq_bbs + from, 0, to - from + 1);
		} else {
			memset(txq_.sq_bbs + from, 0, r_.sq_wqe_cnt - from);
			memset(txq_.sq_bbs, 0, to + 1);
		}
		txq_.sq_ci = tgt + b;
		return;
	}
	/* The sent mbufs go back in batches (rte_pktmbuf_free_bulk:
	 * one mempool put per batch and pool, every segment of a
	 * chain freed), as DPDK's PMDs free theirs. */
	rte_mbuf *batch[free_batch];
	unsigned nb = 0;
	for (;;) {
		const uint32_t idx = txq_.sq_ci & mask;
		const bool last = uint16_t(txq_.sq_ci) == wc;
		if (txq_.sq_mbuf[idx] != nullptr) {
			batch[nb++] = txq_.sq_mbuf[idx];
			txq_.sq_mbuf[idx] = nullptr;
			txq_.sq_nmbuf--;
			if (nb == free_batch) {
				rte_pktmbuf_free_bulk(batch, nb);
				nb = 0;
			}
		}
		const uint32_t b = txq_.sq_bbs[idx];
		if (unlikely(b == 0)) {
			/* WQE index not at a WQE start: stop, count. */
			ctr_.tx_cqe_stray++;
			break;
		}
		txq_.sq_bbs[idx] = 0;
		txq_.sq_ci += b;
		if (last || txq_.sq_ci == txq_.sq_pi)
			break;
	}
	if (nb != 0)
		rte_pktmbuf_free_bulk(batch, nb);
}

/* One responder-CQ entry; true when wc was filled. */
inline bool mlx5_queue::rx_one(const mlx5_cqe64 &cqe, recv_wc &wc)
{
	cqe_fields f;
	const cqe_class k = parse_cqe(cqe, &f);
	if (unlikely(k != cqe_class::recv && k != cqe_class::resp_err &&
		     k != cqe_class::inline_scatter)) {
		ctr_.rx_cqe_unexpected++;
		return false;
	}
	/* A responder CQE consumes the RQ's oldest WQE (UD RQs complete
	 * in order). */
	if (unlikely(rxq_.rq_ci == rxq_.rq_pi)) {
		ctr_.rx_cqe_no_wqe++;
		return false;
	}
	const uint32_t idx = rxq_.rq_ci & (r_.rq_wqe_cnt - 1);
	if (unlikely(f.wqe_counter != uint16_t(rxq_.rq_ci)))
		ctr_.rx_wqe_mismatch++;
	rte_mbuf *m = rxq_.rq_mbuf[idx];
	rxq_.rq_mbuf[idx] = nullptr;
	rxq_.rq_ci++;
	if (unlikely(k != cqe_class::recv)) {
		if (k == cqe_class::resp_err)
			ctr_.rx_cqe_err++;
		else
			ctr_.rx_cqe_scatter++;
		rte_pktmbuf_free(m);
		return false;
	}
	if (unlikely(f.byte_cnt > rxq_.rx_len || f.byte_cnt < grh_len)) {
		ctr_.rx_cqe_bad_len++;
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

inline void mlx5_queue::fill_wc(const cqe_fields &f, rte_mbuf *m, recv_wc &wc)
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
			ctr_.rx_grh_unparsed++;
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
inline void mlx5_queue::refill()
{
	uint32_t want = r_.rq_wqe_cnt - (rxq_.rq_pi - rxq_.rq_ci);
	if (want == 0)
		return;
	rte_mbuf *ms[64];
	bool posted = false;
	while (want != 0) {
		const uint32_t k = want < 64 ? want : 64;
		if (rte_pktmbuf_alloc_bulk(mp_, ms, k) != 0) {
			ctr_.rq_no_mbuf++;
			break;
		}
		for (uint32_t i = 0; i < k; i++) {
			rte_mbuf *m = ms[i];
			const uintptr_t a = rte_pktmbuf_mtod(m, uintptr_t);
			uint32_t lkey = MLX5_INVALID_LKEY;
			mrs_.lookup(a, rxq_.rx_len, &lkey); /* registered at setup */
			const uint32_t idx = rxq_.rq_pi & (r_.rq_wqe_cnt - 1);
			auto *d = reinterpret_cast<mlx5_wqe_data_seg *>(
				r_.rq_buf + size_t(idx) * r_.rq_stride);
			d->byte_count = htobe32(rxq_.rx_len);
			d->lkey = htobe32(lkey);
			d->addr = htobe64(uint64_t(a));
			/* A list longer than one entry ends with the
			 * invalid-lkey terminator (set_data_ptr_seg_end). */
			if (r_.rq_stride > sizeof(*d)) {
				d[1].byte_count = 0;
				d[1].lkey = htobe32(MLX5_INVALID_LKEY);
				d[1].addr = 0;
			}
			rxq_.rq_mbuf[idx] = m;
			rxq_.rq_pi++;
		}
		want -= k;
		posted = true;
	}
	if (posted) {
		rwqes_before_rq_dbrec();
		store_be32(&r_.dbrec[MLX5_RCV_DBR], rxq_.rq_pi & 0xffff);
		ctr_.rq_doorbells++;
	}
}

} // namespace rdgram::mlx5

#endif
