/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/verbs data path: one UD QP through libibverbs, any provider.
 * What a poll thread runs per burst is in this file, inline; the decisions
 * are in verbs_logic.h, the queue's state in verbs_queue.h, its set-up and
 * teardown in verbs_queue.cc and verbs_device.cc.
 *
 * Per burst (never per packet) one indirect call each: ibv_post_send with
 * the whole burst chained (postlist), ibv_post_recv with a batch of
 * buffers, ibv_poll_cq for a batch of completions. Those three go through a
 * small table of function pointers (verbs_ops): the real one calls
 * libibverbs; tests plug in an in-memory model of a QP. The provider's own
 * calls are indirect anyway (ibv_context ops), so the table adds one more
 * indirect call per burst, not per packet.
 *
 * Only one send in signal_every asks for a completion; the mbufs of the
 * unsignalled sends before it are released when it completes (tx_ring).
 */
#ifndef RDGRAM_VERBS_DATAPATH_H
#define RDGRAM_VERBS_DATAPATH_H

#include <cstddef>
#include <cstdint>

#include <infiniband/verbs.h>
#include <rte_branch_prediction.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_prefetch.h>

#include "rdgram/ud.h"
#include "rdgram/wire.h"
#include "verbs_logic.h"
#include "verbs_queue.h"

namespace rdgram::verbs {

inline uint16_t verbs_queue::tx_burst(send_wr *wrs, uint16_t n)
{
	if (n > max_burst)
		n = max_burst;
	/* A completion can be due once a signalled WR is in flight. */
	if (ring_.outstanding() >= p_.tx.signal_every || ring_.room() < n)
		reap_tx();
	if (n > ring_.room())
		n = uint16_t(ring_.room());
	if (unlikely(n == 0)) {
		ctr_.tx_port_full++;
		return 0;
	}
	const auto ah_of = [this](ah_handle h) -> ibv_ah * {
		const verbs_av *av = p_.ahs.lookup(h);
		return av != nullptr ? av->ah : nullptr;
	};
	rte_mempool *mp = p_.rx_pool;
	const auto alloc = [mp]() { return rte_pktmbuf_alloc(mp); };
	build_send_chain(wrs, n, p_.tx, since_, ring_, p_.mrs, ah_of, alloc, chain_);

	unsigned posted = chain_.n;
	if (chain_.n != 0) {
		ibv_send_wr *bad = nullptr;
		int rc = p_.ops->post_send(p_.qp, chain_.wr, &bad);
		if (unlikely(rc != 0)) {
			/* ibv_post_send(3): bad_wr is the first WR not
			 * posted; outside the chain, assume none was. */
			const ptrdiff_t k = bad - chain_.wr;
			posted = (bad != nullptr && k >= 0 && unsigned(k) < chain_.n) ? unsigned(k) : 0;
			ctr_.tx_post_refused++;
			ctr_.tx_port_full++;
		}
	}
	if (unlikely(chain_.no_mbuf))
		ctr_.tx_no_mbuf++;
	return uint16_t(settle_send_chain(chain_, posted, since_, ring_, ctr_,
					  [](rte_mbuf *m) { rte_pktmbuf_free(m); }));
}

inline uint16_t verbs_queue::rx_burst(recv_wc *wcs, uint16_t n)
{
	if (n > max_burst)
		n = max_burst;
	ibv_wc wc[max_burst];
	int got = p_.ops->poll_cq(p_.recv_cq, n, wc);
	if (unlikely(got < 0)) {
		ctr_.cq_poll_errors++;
		got = 0;
	}
	uint16_t out = 0;
	for (int i = 0; i < got; i++) {
		auto *m = reinterpret_cast<rte_mbuf *>(uintptr_t(wc[i].wr_id));
		if (unlikely(!rx_.complete(m))) {
			/* Not a buffer of this queue: never free it. */
			ctr_.rx_unknown_wr++;
			continue;
		}
		if (i + 1 < got)
			rte_prefetch0(rte_pktmbuf_mtod(
				reinterpret_cast<rte_mbuf *>(uintptr_t(wc[i + 1].wr_id)), void *));
		if (unlikely(wc[i].status != IBV_WC_SUCCESS)) {
			ctr_.rx_wc_errors++;
			rte_pktmbuf_free(m);
			continue;
		}
		if (unlikely(!wc_to_recv(wc[i], m, p_.ethernet, wcs[out]))) {
			ctr_.rx_bad_length++;
			rte_pktmbuf_free(m);
			continue;
		}
		ctr_.rx_pkts++;
		ctr_.rx_bytes += wc[i].byte_len - wire::grh_len;
		out++;
	}
	if (p_.rq_depth - rx_.outstanding() >= p_.recv_batch)
		refill();
	return out;
}

inline unsigned verbs_queue::reap_tx()
{
	ibv_wc wc[max_burst];
	int got = p_.ops->poll_cq(p_.send_cq, max_burst, wc);
	if (unlikely(got < 0)) {
		ctr_.cq_poll_errors++;
		return 0;
	}
	for (int i = 0; i < got; i++) {
		if (unlikely(wc[i].status != IBV_WC_SUCCESS))
			ctr_.tx_wc_errors++;
		ring_.complete(wc[i].wr_id, [](rte_mbuf *m) { rte_pktmbuf_free(m); });
	}
	ctr_.tx_completions += unsigned(got);
	return unsigned(got);
}

inline void verbs_queue::refill()
{
	while (p_.rq_depth - rx_.outstanding() >= p_.recv_batch && rx_.room() >= p_.recv_batch) {
		const unsigned k = p_.recv_batch;
		rte_mbuf *ms[max_burst];
		if (unlikely(rte_pktmbuf_alloc_bulk(p_.rx_pool, ms, k) != 0)) {
			ctr_.rx_no_mbuf++;
			return;
		}
		ibv_recv_wr wr[max_burst];
		ibv_sge sge[max_burst];
		unsigned c = build_recv_chain(ms, k, p_.mrs, wr, sge);
		if (unlikely(c < k)) {
			ctr_.rx_unregistered += k - c;
			for (unsigned j = c; j < k; j++)
				rte_pktmbuf_free(ms[j]);
			if (c == 0)
				return;
		}
		ibv_recv_wr *bad = nullptr;
		unsigned posted = c;
		if (unlikely(p_.ops->post_recv(p_.qp, wr, &bad) != 0)) {
			const ptrdiff_t b = bad - wr;
			posted = (bad != nullptr && b >= 0 && unsigned(b) < c) ? unsigned(b) : 0;
			ctr_.rx_post_errors++;
			for (unsigned j = posted; j < c; j++)
				rte_pktmbuf_free(ms[j]);
		}
		for (unsigned j = 0; j < posted; j++)
			rx_.push(ms[j]);
		if (posted < k)
			return;
	}
}

static_assert(ud_driver<verbs_queue>);

} // namespace rdgram::verbs

#endif
