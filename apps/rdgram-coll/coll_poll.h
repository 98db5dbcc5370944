/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll's poll threads: each serves its own ranks' queues round
 * robin (each rank a state machine, coll_engine.h), worker 0 also the
 * switch of threads mode; before the collectives start, it keeps the
 * queues moving and holds what arrives. No syscall, lock, allocation or
 * virtual call in the loop (held is reserved before it starts; the queue
 * is the driver's own type, Dev::queue_type).
 */
#ifndef RDGRAM_COLL_POLL_H
#define RDGRAM_COLL_POLL_H

#include <atomic>
#include <cstdint>
#include <cstdio>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include "coll_job.h"
#include "lcore_placement.h"

namespace rdgram::coll {

/* What a poll thread is given: the job and its share of it. */
template <class Dev> struct worker_arg {
	job<Dev> *j;
	worker_state *w;
};

/* Before the collectives: keeps the worker's queues moving (soft: ARP/ND
 * in and out, through rx_burst and tx_flush), holds the datagrams. */
template <class Dev> inline bool poll_before_start(job<Dev> &j, worker_state &w)
{
	bool did = false;
	for (size_t i : w.ranks) {
		auto &q = j.ranks[i]->q;
		recv_wc wc[32];
		const uint16_t n = q.rx_burst(wc, 32);
		for (uint16_t k = 0; k < n; k++) {
			if (j.held[i].size() < held_max) {
				j.held[i].push_back(wc[k]);
				w.held_total++;
			} else {
				rte_pktmbuf_free(wc[k].mbuf);
				w.held_overflow++;
			}
		}
		q.tx_flush();
		did |= n != 0;
	}
	return did;
}

/* A poll thread: the switch (worker 0, soft threads mode) and the
 * worker's ranks, round robin. */
template <class Dev> inline int worker_main(void *arg)
{
	auto *a = static_cast<worker_arg<Dev> *>(arg);
	job<Dev> *j = a->j;
	worker_state &w = *a->w;
	j->rt->bind_this_thread(w.where.cpu);
	/* Where the thread really is, for the report (before the loop:
	 * this_thread_cpus allocates). */
	snprintf(w.cpus, sizeof(w.cpus), "%s", apps::this_thread_cpus().c_str());
	const unsigned tid = rte_lcore_id();
	poll_thread_online(j->rt->qsbr(), tid);
	const uint64_t linger = rte_get_tsc_hz() / 2;
	uint64_t all_finished_at = 0;
	bool running = false;
	while (!j->stop.load(std::memory_order_acquire)) {
		const uint64_t now = rte_get_tsc_cycles();
		bool did = w.polls_switch && j->sw.poll();
		if (!running && j->started.load(std::memory_order_acquire)) {
			running = true;
			for (size_t i : w.ranks) {
				j->ranks[i]->eng.deliver(j->held[i].data(), unsigned(j->held[i].size()));
				j->held[i].clear();
			}
		}
		if (!running) {
			did |= poll_before_start(*j, w);
		} else if (!w.timed_out.load(std::memory_order_relaxed)) {
			bool fin = true, quiet = true;
			for (size_t i : w.ranks) {
				auto &r = j->ranks[i];
				did |= r->eng.poll(now);
				fin &= r->eng.finished();
				quiet &= r->eng.quiet();
			}
			if (fin && all_finished_at == 0)
				all_finished_at = now;
			/* Finished ranks keep answering retransmissions (their
			 * peers may be on other workers or in other processes)
			 * until told to stop; quiet (all of their own DATA
			 * acknowledged) or a short linger marks the worker
			 * done. */
			if (fin && (quiet || now - all_finished_at > linger))
				w.done.store(true, std::memory_order_release);
			if (now > j->deadline)
				w.timed_out.store(true, std::memory_order_release);
		}
		/* The switch keeps moving after a timeout, so that the
		 * other workers' ranks are not cut off by this one. */
		if (did)
			w.idle.work();
		else
			w.idle.idle();
		rte_rcu_qsbr_quiescent(j->rt->qsbr(), tid);
	}
	/* Anything still held goes back to its pool. */
	for (size_t i : w.ranks) {
		for (recv_wc &wc : j->held[i])
			rte_pktmbuf_free(wc.mbuf);
		j->held[i].clear();
	}
	poll_thread_offline(j->rt->qsbr(), tid);
	return 0;
}

} // namespace rdgram::coll

#endif
