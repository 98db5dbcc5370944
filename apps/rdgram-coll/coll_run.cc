/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll's phases beside the running poll threads (coll_poll.h):
 * the address exchange, the AH storm, then the collectives and, procs,
 * the end barrier.
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <rte_cycles.h>

#include "coll_job.h"
#include "coll_rank_init.h"

namespace rdgram::coll {

template <class Dev> double ahs_ms(const local_rank<Dev> &lr, uint64_t t_start)
{
	return lr.storm_end > t_start ? double(lr.storm_end - t_start) * 1e3 / double(rte_get_tsc_hz()) : 0;
}

template <class Dev> int run_storm(job<Dev> &j, job_ctl &k)
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

template <class Dev> int run_collectives(const coll_config &c, job<Dev> &j, job_ctl &k)
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
	while (!j.local_done() && !j.timed_out())
		rte_delay_us_sleep(1000);
	/* procs: everyone keeps polling (answering retransmissions
	 * and ARP) until all are done; rank 0 stops polling once
	 * every rank arrived, before it lets them go. */
	std::vector<double> figs;
	if (k.procs && !j.timed_out() &&
	    k.boot->finish(c.timeout_s, {j.ranks[0]->storm_ms, ahs_ms(*j.ranks[0], k.t_start)}, &figs,
			   [&] { k.stop_workers(); }) != 0) {
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
	if (k.procs && j.timed_out()) {
		const std::string gone = k.boot->absent_ranks(c.timeout_s);
		if (!gone.empty())
			fprintf(stderr, "rdgram-coll: rank %u: collectives timed out after %.1f s: %s\n", my_rank,
				c.timeout_s, gone.c_str());
	}
	return status;
}

template <class Dev> int run_phases(const coll_config &c, job<Dev> &j, job_ctl &k)
{
	const bool procs = k.procs;
	const uint32_t nranks = k.nranks, my_rank = k.my_rank;
	const double hz = double(rte_get_tsc_hz());

	/* Address exchange. procs: through the bootstrap, while this rank's
	 * worker answers ARP (soft); threads: the ranks here. A record holds
	 * the rank's GID and QPN (soft: both follow from the rank, and the
	 * MAC its port uses, which peers resolve by ARP anyway; RDMA
	 * drivers: the port's GID and the QPN the device gave). */
	std::vector<rank_addr> &table = k.table;
	table.resize(nranks);
	int status = 0;
	const uint64_t tx0 = rte_get_tsc_cycles();
	if (procs) {
		job_bootstrap *boot = k.boot.get();
		/* The soft driver's MTU is the job's setting; an RDMA
		 * device's is its port's (the record carries none). */
		endpoint_record self{endpoint_magic, endpoint_format, uint16_t(apps::is_soft<Dev> ? c.port.mtu : 0),
				     job_key(c.job.empty() ? boot->job_name() : c.job), rank_record(c, *j.ranks[0])};
		std::vector<endpoint_record> recs;
		if (boot->exchange(self, c.timeout_s, &recs) != 0) {
			fprintf(stderr, "rdgram-coll: rank %u: %s\n", my_rank, boot->error().c_str());
			status = 1;
		}
		for (size_t r = 0; r < recs.size() && r < nranks; r++)
			table[r] = recs[r].addr;
	} else {
		for (uint32_t r = 0; r < nranks; r++)
			table[r] = rank_record(c, *j.ranks[r]);
	}
	/* The job's start: the start barrier's return (PMIx: the
	 * fence's, before the peers' records were read and checked). */
	uint64_t t_start = rte_get_tsc_cycles();
	if (procs && status == 0) {
		const std::chrono::duration<double> since = std::chrono::steady_clock::now() - k.boot->started();
		t_start -= std::min(t_start - tx0, uint64_t(since.count() * hz));
	}
	k.t_start = t_start;
	k.exchange_ms = double(t_start - tx0) * 1e3 / hz;
	if (status != 0)
		return status;
	status = run_storm(j, k);
	print_storm(c, j, k);
	if (status == 0)
		status = run_collectives(c, j, k);
	return status;
}

#define RDGRAM_COLL_RUN_INST(D)                                                                        \
	template double ahs_ms<D>(const local_rank<D> &, uint64_t);                                    \
	template int run_phases<D>(const coll_config &, job<D> &, job_ctl &);
RDGRAM_COLL_DRIVERS(RDGRAM_COLL_RUN_INST)

} // namespace rdgram::coll
