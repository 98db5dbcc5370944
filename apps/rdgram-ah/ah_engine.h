/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-ah's data path: each poll thread's loop over its queue of both
 * devices (and its AH client), with its share of the storm's readiness
 * watch, and bench's dest_cache bulk lookups as a poll thread does them. No syscall, no lock, no
 * allocation in either loop.
 */
#ifndef RDGRAM_AH_ENGINE_H
#define RDGRAM_AH_ENGINE_H

#include <algorithm>
#include <atomic>
#include <cstdint>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include "ah_host.h"

namespace rdgram::ahtool {

/* What a poll thread is given. */
struct worker_arg {
	host *h;
	ah_worker *w;
};

inline uint64_t lookup_until(host &h, const ah_key *keys, uint32_t n, uint64_t end, unsigned tid, uint64_t *hits);

/* inspect on a DPDK port: one datagram to each of h.ping_keys, to the
 * peer's QP c.ping_qpn, through the AH client (a destination not yet
 * resolved waits in its pending queue; one that fails is dropped and
 * counted there). What the port does not take now is given again on the
 * next loop. (Worker 0's poll thread.) */
inline void send_pings(host &h, ah_worker &w, uint64_t now)
{
	static constexpr char payload[] = "rdgram-ah";
	while (w.ping_given < h.ping_n) {
		const uint16_t m = uint16_t(std::min<uint32_t>(32, h.ping_n - w.ping_given));
		send_wr wrs[32];
		for (uint16_t i = 0; i < m; i++)
			wrs[i] = send_wr{ah_null, h.c->ping_qpn, h.c->ping_qkey, nullptr, payload, sizeof(payload), 0,
					 send_inline};
		const uint16_t k = w.cl.send_burst(w.ql, h.ping_keys + w.ping_given, wrs, m, now);
		w.ping_given += k;
		if (k < m)
			return;
	}
	w.ping_done.store(true, std::memory_order_release);
}

/* A poll thread: queue w.index of both devices (and its AH client), its
 * share of the storm's readiness watch, bench's lookups when asked. No
 * syscall, no lock, no allocation in the loop. */
inline int worker_main(void *arg)
{
	auto *a = static_cast<worker_arg *>(arg);
	host *h = a->h;
	ah_worker &w = *a->w;
	h->rt.bind_this_thread(w.where.cpu);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(h->rt.qsbr(), tid);
	recv_wc wc[32];
	uint32_t rd = 0, wr = 0; /* watch: read and write positions in this pass */
	while (!h->stop.load(std::memory_order_acquire)) {
		const uint64_t now = rte_get_tsc_cycles();
		/* The local QP's datagrams are the peer's replies (inspect on a
		 * DPDK port): counted, freed. */
		const uint16_t got = w.ql.rx_burst(wc, 32);
		for (uint16_t i = 0; i < got; i++)
			rte_pktmbuf_free(wc[i].mbuf);
		if (got != 0)
			w.replies.store(w.replies.load(std::memory_order_relaxed) + got, std::memory_order_release);
		w.ql.tx_flush();
		if (w.qp_up) {
			const uint16_t n = w.qp.rx_burst(wc, 32);
			for (uint16_t i = 0; i < n; i++)
				rte_pktmbuf_free(wc[i].mbuf);
			w.qp.tx_flush();
		}
		w.cl.poll(w.ql, now);
		if (w.index == 0 && h->ping_go.load(std::memory_order_acquire) &&
		    !w.ping_done.load(std::memory_order_relaxed))
			send_pings(*h, w, now);
		if (h->watching.load(std::memory_order_acquire) && !w.watch_done.load(std::memory_order_relaxed)) {
			/* One bulk lookup per loop: the queues stay polled while a
			 * large storm is watched. */
			const unsigned n = std::min<uint32_t>(dest_cache::max_bulk, w.watch_n - rd);
			ah_key keys[dest_cache::max_bulk];
			ah_handle out[dest_cache::max_bulk];
			for (unsigned i = 0; i < n; i++)
				keys[i] = h->watch_keys[w.watch_idx[rd + i]];
			uint64_t hit = 0;
			h->svc.cache().lookup_bulk(keys, n, out, &hit);
			const uint64_t t = rte_get_tsc_cycles();
			/* Compacted in place as the pass goes: hits leave the
			 * pending list, the rest move down to wr. */
			for (unsigned i = 0; i < n; i++) {
				const uint32_t k = w.watch_idx[rd + i];
				if (hit >> i & 1) {
					h->ready_tsc[k] = t;
					w.seen++;
				} else {
					w.watch_idx[wr++] = k;
				}
			}
			rd += n;
			if (rd >= w.watch_n) {
				w.watch_n = wr;
				rd = wr = 0;
				w.scans++;
			}
			if (w.watch_n == 0)
				w.watch_done.store(true, std::memory_order_release);
		}
		if (h->bench_go.load(std::memory_order_acquire) && !w.bench_done.load(std::memory_order_relaxed)) {
			/* bench: this poll thread's dest_cache lookups, all at
			 * once, beside the others'. */
			const uint64_t t0 = rte_get_tsc_cycles();
			w.lookups = lookup_until(*h, h->bench_keys, h->bench_n, h->bench_end, tid, &w.hits);
			w.lookup_tsc = rte_get_tsc_cycles() - t0;
			w.bench_done.store(true, std::memory_order_release);
		}
		w.pub_l.maybe_publish(w.ql.counters(), &w.cl, now);
		if (w.qp_up)
			w.pub_p.maybe_publish(w.qp.counters(), nullptr, now);
		rte_rcu_qsbr_quiescent(h->rt.qsbr(), tid);
		/* A plain store (one writer): the modes wait on it to know the
		 * worker has left the watch arrays. */
		w.loops.store(w.loops.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
	}
	w.pub_l.publish(w.ql.counters(), &w.cl, rte_get_tsc_cycles());
	if (w.qp_up)
		w.pub_p.publish(w.qp.counters(), nullptr, rte_get_tsc_cycles());
	poll_thread_offline(h->rt.qsbr(), tid);
	return 0;
}

/* bench: bulk lookups of keys[0, n) in dest_cache::max_bulk chunks until
 * end (TSC), with a quiescent state after each pass over the keys, as a
 * poll thread does them; the caller has gone online on the QSBR variable.
 * Returns the lookups done, and the hits in *hits. (A poll thread.) */
inline uint64_t lookup_until(host &h, const ah_key *keys, uint32_t n, uint64_t end, unsigned tid, uint64_t *hits)
{
	uint64_t lookups = 0, hit_n = 0;
	ah_handle res[dest_cache::max_bulk];
	do {
		for (uint32_t off = 0; off < n; off += dest_cache::max_bulk) {
			const unsigned m = std::min<uint32_t>(dest_cache::max_bulk, n - off);
			uint64_t hit;
			hit_n += h.svc.cache().lookup_bulk(keys + off, m, res, &hit);
			lookups += m;
		}
		rte_rcu_qsbr_quiescent(h.rt.qsbr(), tid);
	} while (rte_get_tsc_cycles() < end);
	*hits = hit_n;
	return lookups;
}

} // namespace rdgram::ahtool

#endif
