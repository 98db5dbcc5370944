/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/efa data path: one UD or SRD queue pair on an EFA device, through
 * libibverbs' extended send API (ibv_wr_*) and extended CQ polling
 * (ibv_start_poll / ibv_next_poll / ibv_end_poll). Everything a poll
 * thread runs is in this file, inline; the queue's state is in
 * efa_queue.h, its set-up in efa_device.cc (create_queue) and its
 * teardown in efa_queue.cc.
 *
 * NEVER RUN ON HARDWARE: no EFA device exists where rdgram is built and
 * tested. This file compiles against rdma-core 44 and follows its man pages
 * and its EFA provider's behaviour; the AH logic it relies on is tested
 * against a device model (tests/unit/test_efa_ah.cc), the data path itself
 * only by tests/hw/test_efa_hw.cc on a machine with a device.
 *
 * What the verbs API costs, and why it is accepted here: each completion
 * field is read through a provider function pointer (ibv_wc_read_*), and
 * libefa takes an (uncontended: one owner per queue) spinlock per
 * ibv_start_poll..ibv_end_poll and per ibv_wr_start..ibv_wr_complete, i.e.
 * per burst, not per packet. No syscall, no heap allocation, no C++
 * virtual call. A direct-ring EFA path (as drivers/mlx5 does for mlx5)
 * would remove the indirect calls; it is not written.
 *
 * Send completions: libefa 44 refuses unsignalled send WRs (EINVAL from
 * its post-send validation unless IBV_SEND_SIGNALED or sq_sig_all), so
 * every send is signalled; completions are reaped in bulk by tx_burst (when
 * the SQ is short of room) and tx_flush. wr_id is a slot index into the
 * queue's own table of in-flight mbufs, so nothing leaks at teardown.
 *
 * SQ room: a failure inside an ibv_wr_* session makes libefa drop the
 * whole session at ibv_wr_complete, so tx_burst never starts more WRs than
 * the SQ has free slots (counted here, not discovered by failing).
 *
 * Receive layout, as recv_wc (ud.h) defines it: the mbuf data starts with
 * the 40-byte GRH area, then the payload, and byte_len counts both. A UD
 * receive buffer is posted from the area's start (verbs UD semantics; EFA
 * leaves the area undefined and never sets IBV_WC_GRH, and libfabric's EFA
 * DGRAM endpoint asks for the same 40-byte prefix). SRD places no GRH: its
 * buffer is posted 40 bytes in and 40 is added to byte_len, so callers see
 * one layout. wc_grh is never set.
 *
 * Attribution: wc.slid is the receiver's AH number for the sender (EFA),
 * 0xFFFF when the receiver has none; only then is the sender's GID read
 * (efadv_wc_read_sgid, CQ created with EFADV_WC_EX_WITH_SGID) into wc.sgid.
 * Mapping (ahn, src_qp) to a peer is the caller's (ahn_map.h).
 */
#ifndef RDGRAM_EFA_DATAPATH_H
#define RDGRAM_EFA_DATAPATH_H


#include <cstdint>
#include <cstring>

#include <infiniband/efadv.h>
#include <infiniband/verbs.h>

#include <rte_branch_prediction.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "efa_ah.h"
#include "efa_queue.h"
#include "rdgram/ud.h"
#include "rdgram/wire.h"

namespace rdgram::efa {

inline void efa_queue::post_recvs()
{
	while (rx_nfree_ != 0) {
		const unsigned k = rx_nfree_ < batch_ ? rx_nfree_ : batch_;
		rte_mbuf *ms[max_recv_batch];
		if (unlikely(rte_pktmbuf_alloc_bulk(mp_, ms, k) != 0)) {
			ctr_.rx_no_mbuf++;
			return;
		}
		for (unsigned i = 0; i < k; i++) {
			const uint32_t slot = rx_free_[--rx_nfree_];
			rte_mbuf *m = ms[i];
			rx_slot_[slot] = m;
			const uintptr_t a = rte_pktmbuf_mtod(m, uintptr_t) + (srd_ ? wire::grh_len : 0);
			uint32_t lkey = 0;
			/* Every buffer comes from the registered pool. */
			mrs_.lookup(a, rx_len_, &lkey);
			rsge_[i] = ibv_sge{a, rx_len_, lkey};
			rwr_[i].wr_id = slot;
			rwr_[i].next = i + 1 < k ? &rwr_[i + 1] : nullptr;
			rwr_[i].sg_list = &rsge_[i];
			rwr_[i].num_sge = 1;
		}
		ibv_recv_wr *bad = nullptr;
		if (unlikely(ibv_post_recv(qp_, rwr_, &bad) != 0)) {
			/* WRs from bad on were not posted (ibv_post_recv(3)). */
			for (ibv_recv_wr *w = bad; w != nullptr; w = w->next) {
				const uint32_t slot = uint32_t(w->wr_id);
				rte_pktmbuf_free(rx_slot_[slot]);
				rx_slot_[slot] = nullptr;
				rx_free_[rx_nfree_++] = slot;
				ctr_.rx_post_errors++;
			}
			return;
		}
	}
}

inline uint16_t efa_queue::tx_burst(send_wr *wrs, uint16_t n)
{
	if (n > max_burst)
		n = max_burst;
	if (tx_nfree_ < n)
		reap_sends();
	if (n > tx_nfree_) {
		n = uint16_t(tx_nfree_);
		ctr_.tx_port_full++;
	}
	uint32_t used[max_burst];
	unsigned posted = 0;
	uint64_t bytes = 0;
	uint16_t i = 0;
	for (; i < n; i++) {
		send_wr &wr = wrs[i];
		const bool inl = (wr.flags & send_inline) != 0;
		const efa_av *av = ahs_.lookup(wr.ah);
		if (unlikely(av == nullptr)) {
			ctr_.tx_stale_ah++;
			if (!inl)
				rte_pktmbuf_free(wr.mbuf);
			continue;
		}
		const uint32_t len = inl ? wr.inline_len : wr.mbuf->pkt_len;
		if (unlikely(len > mtu_)) {
			ctr_.tx_too_long++;
			if (!inl)
				rte_pktmbuf_free(wr.mbuf);
			continue;
		}
		rte_mbuf *m = nullptr;
		uint32_t lkey = 0;
		uintptr_t addr = 0;
		if (!inl) {
			m = wr.mbuf;
			addr = rte_pktmbuf_mtod(m, uintptr_t);
			if (unlikely(m->nb_segs != 1 || !mrs_.lookup(addr, len, &lkey))) {
				ctr_.tx_bad_mbuf++;
				rte_pktmbuf_free(m);
				continue;
			}
		} else if (unlikely(len > max_inline_)) {
			/* Too long for the WQE: copy into a registered buffer. */
			m = rte_pktmbuf_alloc(mp_);
			if (unlikely(m == nullptr)) {
				ctr_.tx_no_mbuf++;
				break; /* not taken: the caller keeps it */
			}
			memcpy(rte_pktmbuf_append(m, uint16_t(len)), wr.inline_data, len);
			addr = rte_pktmbuf_mtod(m, uintptr_t);
			mrs_.lookup(addr, len, &lkey);
		}
		if (posted == 0)
			ibv_wr_start(qpx_);
		const uint32_t slot = tx_free_[--tx_nfree_];
		tx_slot_[slot] = m;
		used[posted++] = slot;
		qpx_->wr_id = slot;
		qpx_->wr_flags = IBV_SEND_SIGNALED;
		if (wr.flags & send_imm)
			ibv_wr_send_imm(qpx_, wr.imm_data);
		else
			ibv_wr_send(qpx_);
		/* A Q_Key with the high bit set means the QP's own
		 * (ibv_post_send(3) wr.ud.remote_qkey, IBA 10.2.5). */
		ibv_wr_set_ud_addr(qpx_, av->ah, wr.remote_qpn,
				   (wr.remote_qkey & 0x80000000u) ? qkey_ : wr.remote_qkey);
		if (m == nullptr)
			ibv_wr_set_inline_data(qpx_, const_cast<void *>(wr.inline_data), len);
		else
			ibv_wr_set_sge(qpx_, lkey, addr, len);
		bytes += len;
	}
	if (posted != 0) {
		if (unlikely(ibv_wr_complete(qpx_) != 0)) {
			/* libefa dropped the whole session: none went out. */
			for (unsigned j = 0; j < posted; j++) {
				if (tx_slot_[used[j]] != nullptr)
					rte_pktmbuf_free(tx_slot_[used[j]]);
				tx_slot_[used[j]] = nullptr;
				tx_free_[tx_nfree_++] = used[j];
			}
			ctr_.tx_post_lost += posted;
		} else {
			tx_outstanding_ += posted;
			ctr_.tx_pkts += posted;
			ctr_.tx_bytes += bytes;
		}
	}
	return i;
}

inline uint16_t efa_queue::rx_burst(recv_wc *wcs, uint16_t n)
{
	if (n > max_burst)
		n = max_burst;
	uint16_t out = 0;
	ibv_poll_cq_attr pa{};
	/* Non-zero: empty (ENOENT) or an error; ibv_end_poll must then
	 * not be called (ibv_create_cq_ex(3)). */
	if (n != 0 && ibv_start_poll(rcq_, &pa) == 0) {
		do {
			const uint32_t slot = uint32_t(rcq_->wr_id);
			rte_mbuf *m = rx_slot_[slot];
			rx_slot_[slot] = nullptr;
			rx_free_[rx_nfree_++] = slot;
			if (unlikely(rcq_->status != IBV_WC_SUCCESS)) {
				ctr_.rx_cqe_errors++;
				rte_pktmbuf_free(m);
				continue;
			}
			const uint32_t got = ibv_wc_read_byte_len(rcq_);
			const uint32_t total = srd_ ? got + uint32_t(wire::grh_len) : got;
			if (unlikely(total < wire::grh_len || total - wire::grh_len > mtu_)) {
				ctr_.rx_bad_length++;
				rte_pktmbuf_free(m);
				continue;
			}
			recv_wc &wc = wcs[out++];
			m->data_len = uint16_t(total);
			m->pkt_len = total;
			wc.mbuf = m;
			wc.byte_len = total;
			wc.qp_num = qpn_;
			wc.src_qp = ibv_wc_read_src_qp(rcq_);
			wc.wc_flags = 0;
			wc.imm_data = 0;
			if (ibv_wc_read_wc_flags(rcq_) & IBV_WC_WITH_IMM) {
				wc.wc_flags = wc_with_imm;
				wc.imm_data = ibv_wc_read_imm_data(rcq_);
			}
			wc.slid = uint16_t(ibv_wc_read_slid(rcq_));
			wc.pkey_index = 0;
			wc.sl = 0;
			wc.l3 = l3_type::ib_grh;
			wc.dlid_path_bits = 0;
			wc.dgid = gid_;
			memset(wc.sgid.raw, 0, sizeof(wc.sgid.raw));
			if (unlikely(wc.slid == ahn_unknown))
				read_sgid(wc);
			ctr_.rx_pkts++;
			ctr_.rx_bytes += total - wire::grh_len;
		} while (out < n && ibv_next_poll(rcq_) == 0);
		ibv_end_poll(rcq_);
	}
	if (rx_nfree_ >= batch_)
		post_recvs();
	return out;
}

inline void efa_queue::reap_sends()
{
	if (tx_outstanding_ == 0)
		return;
	ibv_poll_cq_attr pa{};
	if (ibv_start_poll(scq_, &pa) != 0)
		return;
	do {
		const uint32_t slot = uint32_t(scq_->wr_id);
		if (unlikely(scq_->status != IBV_WC_SUCCESS))
			ctr_.tx_cqe_errors++;
		if (tx_slot_[slot] != nullptr)
			rte_pktmbuf_free(tx_slot_[slot]);
		tx_slot_[slot] = nullptr;
		tx_free_[tx_nfree_++] = slot;
		tx_outstanding_--;
	} while (ibv_next_poll(scq_) == 0);
	ibv_end_poll(scq_);
}

void efa_queue::read_sgid(recv_wc &wc)
{
	ibv_gid g;
	if (dv_ != nullptr && efadv_wc_read_sgid(dv_, &g) == 0) {
		memcpy(wc.sgid.raw, g.raw, 16);
		ctr_.rx_sgid_read++;
	} else {
		ctr_.rx_sgid_unavailable++;
	}
}

static_assert(ud_driver<efa_queue>);

} // namespace rdgram::efa

#endif
