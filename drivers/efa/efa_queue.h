/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/efa queue state: one UD or SRD queue pair on an EFA device, its
 * send and receive slot tables and counters. The per-burst path is in
 * efa_datapath.h; efa_device.cc creates the QP and CQs and fills the
 * queue (create_queue), and efa_queue.cc gives back what the slots hold
 * at teardown (release).
 *
 * NEVER RUN ON HARDWARE: see efa_datapath.h.
 */
#ifndef RDGRAM_EFA_QUEUE_H
#define RDGRAM_EFA_QUEUE_H

#include <cstdint>
#include <vector>

#include <infiniband/efadv.h>
#include <infiniband/verbs.h>

#include <rte_common.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "efa_ah.h"
#include "efa_counters.h"
#include "ibv_lkey_map.h"
#include "rdgram/ah_table.h"
#include "rdgram/ud.h"
#include "rdgram/wire.h"

namespace rdgram::efa {

/*
 * One poll thread's EFA queue pair: the ud_driver policy.
 * (NOT multi-thread safe: owned by one poll thread.)
 */
class efa_queue {
public:
	static constexpr unsigned max_burst = 32;
	static constexpr unsigned max_recv_batch = 64;

	efa_queue() = default;
	efa_queue(const efa_queue &) = delete;
	efa_queue &operator=(const efa_queue &) = delete;
	~efa_queue() { release(); }

	const efa_counters &counters() const { return ctr_; }
	uint32_t qp_num() const { return qpn_; }
	uint32_t qkey() const { return qkey_; }
	bool srd() const { return srd_; }
	bool ready() const { return qp_ != nullptr; }
	/* Receive completions can carry the sender's GID (EFADV_WC_EX_WITH_SGID). */
	bool sgid_on_unknown_ah() const { return dv_ != nullptr; }
	uint32_t max_inline() const { return max_inline_; }
	rte_mempool *mempool() const { return mp_; }

	/* Sends posted whose completion has not been reaped yet. */
	unsigned tx_pending() const { return tx_outstanding_; }
	/* Reaps send completions (frees their mbufs). */
	void tx_flush() { reap_sends(); }

	/* Posts receive buffers into every free RQ slot, recv_batch per
	 * ibv_post_recv. rx_burst calls it when a batch has been consumed;
	 * efa_device::create_queue for the first fill. (efa_datapath.h) */
	void post_recvs();

	/* Accepts up to n send WRs; returns how many it took (the caller keeps
	 * the rest: SQ full, or no mbuf for an inline payload over the
	 * device's inline size). An accepted WR that cannot be sent (stale AH,
	 * payload over the MTU, chained or unregistered mbuf) is dropped and
	 * counted, its mbuf freed. (efa_datapath.h) */
	uint16_t tx_burst(send_wr *wrs, uint16_t n);

	/* Receives up to n completions (successful ones; failed ones are
	 * counted and their buffers freed), then refills the RQ when a batch
	 * of slots is free. (efa_datapath.h) */
	uint16_t rx_burst(recv_wc *wcs, uint16_t n);

private:
	friend class efa_device;

	/* efa_datapath.h */
	/* Frees send slots whose completion arrived, and their mbufs. */
	void reap_sends();
	/* The sender has no AH here: its GID, if the CQ can tell. Rare (first
	 * packets from a new peer), so out of line. */
	inline __rte_noinline void read_sgid(recv_wc &wc);

	/* Frees every buffer the queue still holds (set-up/teardown only;
	 * the QP and CQs are the device's to destroy first). (efa_queue.cc) */
	void release();

	ibv_qp *qp_ = nullptr;
	ibv_qp_ex *qpx_ = nullptr;
	ibv_cq_ex *scq_ = nullptr, *rcq_ = nullptr;
	efadv_cq *dv_ = nullptr; /* receive CQ's efadv view, when it has SGIDs */
	ah_table<efa_av>::view ahs_{};
	ibv::lkey_map mrs_{}; /* the lkeys of its mempool (drivers/common/ibv) */
	rte_mempool *mp_ = nullptr;
	uint32_t qpn_ = 0, qkey_ = 0;
	uint32_t mtu_ = 0;        /* largest payload */
	uint32_t max_inline_ = 0;
	uint32_t rx_len_ = 0;     /* bytes per posted receive SGE */
	unsigned batch_ = 32;
	bool srd_ = false;
	wire::gid gid_{};         /* our GID, reported as wc.dgid */
	/* Send slots: wr_id -> mbuf (nullptr: inline), free indices. */
	std::vector<rte_mbuf *> tx_slot_;
	std::vector<uint32_t> tx_free_;
	uint32_t tx_nfree_ = 0;
	uint32_t tx_outstanding_ = 0;
	/* Receive slots: wr_id -> posted mbuf, free indices. */
	std::vector<rte_mbuf *> rx_slot_;
	std::vector<uint32_t> rx_free_;
	uint32_t rx_nfree_ = 0;
	ibv_recv_wr rwr_[max_recv_batch]{};
	ibv_sge rsge_[max_recv_batch]{};
	efa_counters ctr_{};
};

} // namespace rdgram::efa

#endif
