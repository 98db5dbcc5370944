/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll's poll lcore: the switch and every local rank's queue, round
 * robin (each rank a state machine, coll_engine.h); before the collectives
 * start, it keeps the queues moving and holds what arrives. No syscall,
 * lock or allocation in the loop (held is reserved before it starts).
 */
#ifndef RDGRAM_COLL_POLL_H
#define RDGRAM_COLL_POLL_H

#include <atomic>
#include <cstdint>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include "coll_job.h"

namespace rdgram::coll {

/* Before the collectives: keeps the queues moving (ARP/ND in and out,
 * through rx_burst and tx_flush), holds the datagrams. */
inline bool poll_before_start(job &j)
{
	bool did = false;
	for (size_t i = 0; i < j.ranks.size(); i++) {
		soft::soft_queue &q = j.ranks[i]->q;
		recv_wc wc[32];
		const uint16_t n = q.rx_burst(wc, 32);
		for (uint16_t k = 0; k < n; k++) {
			if (j.held[i].size() < held_max) {
				j.held[i].push_back(wc[k]);
				j.held_total++;
			} else {
				rte_pktmbuf_free(wc[k].mbuf);
				j.held_overflow++;
			}
		}
		q.tx_flush();
		did |= n != 0;
	}
	return did;
}

/* The poll lcore: the switch and every local rank, round robin. */
inline int worker_main(void *arg)
{
	auto *j = static_cast<job *>(arg);
	j->rt->bind_this_thread(j->worker.cpu);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(j->rt->qsbr(), tid);
	const uint64_t linger = rte_get_tsc_hz() / 2;
	uint64_t all_finished_at = 0;
	bool running = false;
	while (!j->stop.load(std::memory_order_acquire)) {
		const uint64_t now = rte_get_tsc_cycles();
		bool did = j->has_switch && j->sw.poll();
		if (!running && j->started.load(std::memory_order_acquire)) {
			running = true;
			for (size_t i = 0; i < j->ranks.size(); i++) {
				j->ranks[i]->eng.deliver(j->held[i].data(), unsigned(j->held[i].size()));
				j->held[i].clear();
			}
		}
		if (!running) {
			did |= poll_before_start(*j);
		} else {
			bool fin = true, quiet = true;
			for (auto &r : j->ranks) {
				did |= r->eng.poll(now);
				fin &= r->eng.finished();
				quiet &= r->eng.quiet();
			}
			if (fin && all_finished_at == 0)
				all_finished_at = now;
			/* Finished ranks keep answering retransmissions; quiet
			 * (all of their own DATA acknowledged) or a short linger
			 * ends it. */
			if (fin && (quiet || now - all_finished_at > linger))
				j->local_done.store(true, std::memory_order_release);
			if (now > j->deadline) {
				j->timed_out.store(true, std::memory_order_release);
				break;
			}
		}
		if (did)
			j->idle.work();
		else
			j->idle.idle();
		rte_rcu_qsbr_quiescent(j->rt->qsbr(), tid);
	}
	/* Anything still held goes back to its pool. */
	for (auto &h : j->held) {
		for (recv_wc &wc : h)
			rte_pktmbuf_free(wc.mbuf);
		h.clear();
	}
	poll_thread_offline(j->rt->qsbr(), tid);
	return 0;
}

} // namespace rdgram::coll

#endif
