/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/verbs queue state: one UD QP through libibverbs, what it is made
 * of (verbs_queue_parts), the verbs calls it makes (verbs_ops), its send
 * and receive rings (verbs_logic.h) and counters. The per-burst path is in
 * verbs_datapath.h; the set-up and teardown (attach, detach, release_*,
 * drain_once) are out of line in verbs_queue.cc.
 */
#ifndef RDGRAM_VERBS_QUEUE_H
#define RDGRAM_VERBS_QUEUE_H

#include <cstdint>

#include <infiniband/verbs.h>
#include <rte_mempool.h>

#include "rdgram/ah_table.h"
#include "rdgram/ud.h"
#include "verbs_counters.h"
#include "verbs_logic.h"

namespace rdgram::verbs {

/* The AV a verbs AH slot holds: the provider's AH. */
struct verbs_av {
	ibv_ah *ah;
};

/* The verbs calls the data path makes (ibv_post_send(3), ibv_post_recv(3),
 * ibv_poll_cq(3) semantics: 0 or an errno value with *bad set; the number
 * of completions or a negative value). */
struct verbs_ops {
	int (*post_send)(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad);
	int (*post_recv)(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad);
	int (*poll_cq)(ibv_cq *cq, int n, ibv_wc *wc);
};

/* libibverbs itself. */
inline const verbs_ops ibv_ops = {
	[](ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) { return ibv_post_send(qp, wr, bad); },
	[](ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad) { return ibv_post_recv(qp, wr, bad); },
	[](ibv_cq *cq, int n, ibv_wc *wc) { return ibv_poll_cq(cq, n, wc); },
};

/* What a queue is made of (verbs_device::create_queue fills it; a test may
 * fill it with a model's objects). */
struct verbs_queue_parts {
	ibv_qp *qp = nullptr;
	ibv_cq *send_cq = nullptr;
	ibv_cq *recv_cq = nullptr;
	uint32_t qpn = 0;
	uint32_t qkey = 0;
	const verbs_ops *ops = &ibv_ops;
	ah_table<verbs_av>::view ahs{};
	lkey_map mrs{};                    /* every pool the queue sends from or receives into */
	rte_mempool *rx_pool = nullptr;  /* receive buffers; also copies of large inline sends */
	bool ethernet = true;            /* RoCE: parse RoCEv2 GRH areas */
	uint32_t sq_depth = 0, rq_depth = 0; /* as the QP was created (cap) */
	uint32_t recv_batch = 32;
	tx_params tx{};
};

/*
 * One poll thread's UD queue pair over verbs: the ud_driver policy.
 * (NOT multi-thread safe: owned by one poll thread.)
 */
class verbs_queue {
public:
	static constexpr unsigned max_burst = chain_max;

	verbs_queue() = default;
	verbs_queue(const verbs_queue &) = delete;
	verbs_queue &operator=(const verbs_queue &) = delete;

	/* Setup (control path, verbs_queue.cc). 0 or EINVAL (a size out of
	 * range). */
	int attach(const verbs_queue_parts &p);

	/* Forgets the QP and CQs (after verbs_device::destroy_queue). */
	void detach();

	const verbs_counters &counters() const { return ctr_; }
	uint32_t qpn() const { return p_.qpn; }
	uint32_t qkey() const { return p_.qkey; }
	ibv_qp *qp() const { return p_.qp; }
	const verbs_queue_parts &parts() const { return p_; }
	uint32_t max_inline() const { return p_.tx.max_inline; }
	/* Receive WRs posted and not yet completed. */
	uint32_t rx_posted() const { return rx_.outstanding(); }
	/* Send WRs posted whose completion has not been seen (unsignalled
	 * ones included: they are known done only when a later signalled WR
	 * completes). */
	uint32_t tx_outstanding() const { return ring_.outstanding(); }

	/* Sends held in software: none; tx_burst posts everything it takes. */
	unsigned tx_pending() const { return 0; }

	/* Reaps send completions, freeing the mbufs they cover. */
	void tx_flush() { reap_tx(); }

	/* Tops the receive queue up (also done by rx_burst). */
	void post_recvs() { refill(); }

	/* Accepts up to n send WRs; returns how many it took (the caller keeps
	 * the rest). An accepted WR that cannot be sent (stale AH, payload over
	 * the MTU, unusable mbuf) is dropped and counted, its mbuf freed. One
	 * ibv_post_send for the burst. (verbs_datapath.h) */
	uint16_t tx_burst(send_wr *wrs, uint16_t n);

	/* Receives up to n completions (one ibv_poll_cq), then tops the
	 * receive queue up when a batch of room has opened.
	 * (verbs_datapath.h) */
	uint16_t rx_burst(recv_wc *wcs, uint16_t n);

	/* verbs_queue.cc */
	/* Queue teardown (control path, after the QP moved to the error state
	 * and was destroyed): frees the send mbufs still recorded. */
	void release_tx();
	/* Queue teardown (control path, after the QP was destroyed): frees
	 * the receive buffers no flush completion gave back (rx_ring: rxe
	 * flushes none). Returns how many. */
	uint32_t release_rx();
	/* Polls both CQs once, freeing what completes (teardown: flush
	 * completions after the QP entered the error state). Returns how many
	 * completions it saw. */
	unsigned drain_once();

private:
	/* verbs_datapath.h */
	/* One ibv_poll_cq on the send CQ; each completion releases the WRs up
	 * to its wr_id. Returns the completions seen. */
	unsigned reap_tx();
	/* Posts receive buffers in batches of recv_batch (one ibv_post_recv
	 * each) while a whole batch fits. */
	void refill();


	verbs_queue_parts p_{};
	tx_ring ring_;
	tx_chain chain_;
	rx_ring rx_;
	uint32_t since_ = 0;
	verbs_counters ctr_{};
};

} // namespace rdgram::verbs

#endif
