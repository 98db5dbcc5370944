/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/mlx5 queue set-up (control path, out of line): attach binds an
 * mlx5_queue to the rings of its QP and CQs and allocates its per-slot
 * arrays on the poll thread's NUMA node; detach returns what the rings
 * hold and frees them.
 */
#include "mlx5_datapath.h"

#include <cerrno>

#include <rte_malloc.h>
#include <rte_mbuf.h>

namespace rdgram::mlx5 {

int mlx5_queue::attach(const rings &r, const queue_config &c, rte_mempool *mp, const ibv::lkey_map &mrs,
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
	txq_.max_bbs = (wqe_max + wqe_bb - 1) / wqe_bb;
	if (txq_.max_bbs < 2)
		txq_.max_bbs = 2; /* ctrl + AV fill one block; the data seg needs a second */
	/* At most signal_every - 1 unsignalled WQEs follow the last
	 * signalled one: a full SQ must still hold a signalled WQE,
	 * whose completion frees room. */
	if (uint64_t(c.signal_every) * txq_.max_bbs >= r.sq_wqe_cnt)
		return EINVAL;
	r_ = r;
	c_ = c;
	mp_ = mp;
	mrs_ = mrs;
	ahs_ = ahs != nullptr ? ahs->for_socket(c.socket) : ah_table<mlx5_av>::view{};
	const uint32_t room = rte_pktmbuf_data_room_size(mp) - RTE_PKTMBUF_HEADROOM;
	rxq_.rx_len = c.rx_buf_len != 0 && c.rx_buf_len < room ? c.rx_buf_len : room;
	if (rxq_.rx_len < grh_len)
		return EINVAL;
	txq_.sq_mbuf = static_cast<rte_mbuf **>(
		rte_zmalloc_socket("mlx5_sq", sizeof(rte_mbuf *) * r.sq_wqe_cnt, 64, c.socket));
	txq_.sq_bbs = static_cast<uint8_t *>(rte_zmalloc_socket("mlx5_sqb", r.sq_wqe_cnt, 64, c.socket));
	rxq_.rq_mbuf = static_cast<rte_mbuf **>(
		rte_zmalloc_socket("mlx5_rq", sizeof(rte_mbuf *) * r.rq_wqe_cnt, 64, c.socket));
	txq_.chain = static_cast<mlx5_wqe_data_seg *>(rte_zmalloc_socket(
		"mlx5_chain", sizeof(mlx5_wqe_data_seg) * c.max_send_sge, 64, c.socket));
	if (txq_.sq_mbuf == nullptr || txq_.sq_bbs == nullptr || rxq_.rq_mbuf == nullptr || txq_.chain == nullptr) {
		detach();
		return ENOMEM;
	}
	txq_.sq_end = r.sq_buf + size_t(r.sq_wqe_cnt) * wqe_bb;
	txq_.sq_pi = txq_.sq_ci = 0;
	txq_.sq_nmbuf = 0;
	rxq_.rq_pi = rxq_.rq_ci = 0;
	txq_.scq_ci = rxq_.rcq_ci = 0;
	txq_.bf_off = 0;
	txq_.since_signal = 0;
	ctr_ = {};
#if defined(RDGRAM_CPU_ISA_X86)
	txq_.isa = cpu_isa_min(c.isa_cap, cpu_isa_max());
#else
	txq_.isa = cpu_isa::portable;
#endif
	return 0;
}

void mlx5_queue::detach()
{
	if (txq_.sq_mbuf != nullptr) {
		for (uint32_t i = 0; i < r_.sq_wqe_cnt; i++)
			if (txq_.sq_mbuf[i] != nullptr)
				rte_pktmbuf_free(txq_.sq_mbuf[i]);
	}
	if (rxq_.rq_mbuf != nullptr) {
		for (uint32_t i = 0; i < r_.rq_wqe_cnt; i++)
			if (rxq_.rq_mbuf[i] != nullptr)
				rte_pktmbuf_free(rxq_.rq_mbuf[i]);
	}
	rte_free(txq_.sq_mbuf);
	rte_free(txq_.sq_bbs);
	rte_free(rxq_.rq_mbuf);
	rte_free(txq_.chain);
	txq_.sq_mbuf = nullptr;
	txq_.sq_bbs = nullptr;
	rxq_.rq_mbuf = nullptr;
	txq_.chain = nullptr;
}

} // namespace rdgram::mlx5
