/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/verbs data path: one UD QP through libibverbs, any provider.
 * Everything a poll thread runs is in this file, inline; the decisions are
 * in verbs_logic.h, the set-up in verbs_device.cc.
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

#include <cerrno>
#include <cstring>

#include <infiniband/verbs.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_prefetch.h>

#include "rdgram/ah_table.h"
#include "rdgram/stats.h"
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

	/* Setup (control path). 0 or EINVAL (a size out of range). */
	int attach(const verbs_queue_parts &p)
	{
		if (p.sq_depth == 0 || p.rq_depth == 0 || p.recv_batch == 0 || p.recv_batch > max_burst ||
		    p.recv_batch > p.rq_depth || p.tx.signal_every == 0 || p.tx.signal_every > p.sq_depth ||
		    p.rx_pool == nullptr || p.ops == nullptr)
			return EINVAL;
		p_ = p;
		p_.tx.own_qkey = p.qkey;
		if (int e = ring_.init(p.sq_depth); e != 0)
			return e;
		if (int e = rx_.init(p.rq_depth); e != 0)
			return e;
		since_ = 0;
		ctr_ = verbs_counters{};
		return 0;
	}

	/* Forgets the QP and CQs (after verbs_device::destroy_queue). */
	void detach() { p_ = verbs_queue_parts{}; }

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
	 * ibv_post_send for the burst. */
	uint16_t tx_burst(send_wr *wrs, uint16_t n)
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

	/* Receives up to n completions (one ibv_poll_cq), then tops the
	 * receive queue up when a batch of room has opened. */
	uint16_t rx_burst(recv_wc *wcs, uint16_t n)
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

	/* Queue teardown (control path, after the QP moved to the error state
	 * and was destroyed): frees the send mbufs still recorded. */
	void release_tx()
	{
		ring_.drain([](rte_mbuf *m) { rte_pktmbuf_free(m); });
	}
	/* Queue teardown (control path, after the QP was destroyed): frees
	 * the receive buffers no flush completion gave back (rx_ring: rxe
	 * flushes none). Returns how many. */
	uint32_t release_rx()
	{
		const uint32_t n = rx_.drain([](rte_mbuf *m) { rte_pktmbuf_free(m); });
		ctr_.rx_reclaimed += n;
		return n;
	}
	/* Polls both CQs once, freeing what completes (teardown: flush
	 * completions after the QP entered the error state). Returns how many
	 * completions it saw. */
	unsigned drain_once()
	{
		unsigned seen = reap_tx();
		ibv_wc wc[max_burst];
		int got = p_.ops->poll_cq(p_.recv_cq, max_burst, wc);
		for (int i = 0; i < got; i++) {
			auto *m = reinterpret_cast<rte_mbuf *>(uintptr_t(wc[i].wr_id));
			if (rx_.complete(m))
				rte_pktmbuf_free(m);
			else
				ctr_.rx_unknown_wr++;
		}
		return seen + unsigned(got > 0 ? got : 0);
	}

private:
	/* One ibv_poll_cq on the send CQ; each completion releases the WRs up
	 * to its wr_id. Returns the completions seen. */
	unsigned reap_tx()
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

	/* Posts receive buffers in batches of recv_batch (one ibv_post_recv
	 * each) while a whole batch fits. */
	void refill()
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

	verbs_queue_parts p_{};
	tx_ring ring_;
	tx_chain chain_;
	rx_ring rx_;
	uint32_t since_ = 0;
	verbs_counters ctr_{};
};

static_assert(ud_driver<verbs_queue>);

} // namespace rdgram::verbs

#endif
