/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll's phases once set up (main thread): the AH storm, then the
 * collectives on the poll lcore (coll_poll.h) and, procs, the end
 * barrier.
 */
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <rte_cycles.h>

#include "coll_job.h"
#include "coll_rank_init.h"

namespace rdgram::coll {

double ahs_ms(const local_rank &lr, uint64_t t_start)
{
	return lr.storm_end > t_start ? double(lr.storm_end - t_start) * 1e3 / double(rte_get_tsc_hz()) : 0;
}

int run_storm(job &j, job_ctl &k)
{
	std::vector<std::thread> th;
	for (auto &lr : j.ranks)
		th.emplace_back([&, p = lr.get()] { storm(*p, k.table); });
	for (auto &t : th)
		t.join();
	int status = 0;
	for (auto &lr : j.ranks)
		if (lr->storm_ok != k.nranks - 1)
			status = 1;
	return status;
}

int run_collectives(const coll_config &c, job &j, job_ctl &k)
{
	const uint32_t nranks = k.nranks, my_rank = k.my_rank;
	const std::vector<rank_addr> &table = k.table;
	const double hz = double(rte_get_tsc_hz());
	int status = 0;
	for (auto &lr : j.ranks) {
		std::vector<peer_addr> peers(nranks);
		for (uint32_t r = 0; r < nranks; r++)
			peers[r] = peer_addr{lr->ahs[r], table[r].qpn, table[r].qkey};
		rank_params p{};
		p.rank = uint16_t(lr->rank);
		p.nranks = uint16_t(nranks);
		p.size = c.size;
		p.iters = c.iters;
		p.rto_cyc = uint64_t(double(c.rto_us) * hz / 1e6);
		p.drop_rate = c.drop_rate;
		p.seed = c.seed;
		lr->eng.init(p, &lr->q, peers);
	}
	j.deadline = rte_get_tsc_cycles() + uint64_t(c.timeout_s * hz);
	j.started.store(true, std::memory_order_release);
	while (!j.local_done.load(std::memory_order_acquire) && !j.timed_out.load(std::memory_order_acquire))
		rte_delay_us_sleep(1000);
	/* procs: everyone keeps polling (answering retransmissions
	 * and ARP) until all are done; rank 0 stops polling once
	 * every rank arrived, before it lets them go. */
	std::vector<double> figs;
	if (k.procs && !j.timed_out.load() &&
	    k.boot->finish(c.timeout_s, {j.ranks[0]->storm_ms, ahs_ms(*j.ranks[0], k.t_start)}, &figs,
			   [&] { stop_worker(j, k); }) != 0) {
		fprintf(stderr, "rdgram-coll: rank %u: %s\n", my_rank, k.boot->error().c_str());
		status = 1;
	}
	for (size_t i = 0; i + 1 < figs.size(); i += 2) {
		k.storm_all.push_back(figs[i]);
		k.ahs_all.push_back(figs[i + 1]);
	}
	/* A rank gave up: the bootstrap may tell who never got
	 * this far. Each rank's deadline counts from its own
	 * start of the collectives, so the others get as long
	 * again to say they gave up too. */
	if (k.procs && j.timed_out.load()) {
		const std::string gone = k.boot->absent_ranks(c.timeout_s);
		if (!gone.empty())
			fprintf(stderr, "rdgram-coll: rank %u: collectives timed out after %.1f s: %s\n", my_rank,
				c.timeout_s, gone.c_str());
	}
	return status;
}

} // namespace rdgram::coll
