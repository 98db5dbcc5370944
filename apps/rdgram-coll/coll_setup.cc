/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll's set-up and close (main thread): the job's bootstrap and
 * EAL arguments, the poll threads and the fabric, the run of the workers
 * beside the phases, and at the end the ranks' counters and their devices
 * closed.
 */
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "coll_job.h"
#include "soft_port.h"
#include "coll_poll.h"
#include "job_bootstrap.h"
#include "lcore_placement.h"
#include "workers.h"

namespace rdgram::coll {

namespace {

idle_mode idle_of(const std::string &s)
{
	idle_mode m = idle_mode::busy;
	parse_idle_mode(s.c_str(), &m); /* checked by the CLI and the config */
	return m;
}

/* Procs mode: the job's bootstrap (--bootstrap), decided once, before the
 * EAL starts. nullptr with *err (one line) on a refusal. */
std::unique_ptr<job_bootstrap> open_bootstrap(const coll_config &c, const cli::parser &app, std::string *err)
{
	const std::string how = c.bootstrap == "auto" ? auto_bootstrap() : c.bootstrap;
	if (how == "pmix") {
		auto b = pmix_bootstrap(err);
		if (!b)
			return nullptr;
		if ((app.count("--ranks") != 0 && int(c.ranks) != b->size()) ||
		    (app.count("--rank") != 0 && c.rank >= 0 && c.rank != b->rank())) {
			*err = "--rank/--ranks disagree with PMIx (rank " + std::to_string(b->rank()) + " of " +
			       std::to_string(b->size()) + "): leave them out under a PMIx launcher";
			return nullptr;
		}
		return b;
	}
	launch_env le;
	if (!detect_launcher(&le, err))
		return nullptr;
	const int size = le.size > 0 ? le.size : int(c.ranks);
	const int rank = c.rank >= 0 ? c.rank : le.rank;
	if (rank < 0) {
		*err = "procs mode needs --rank (no mpirun or PMIx rank in the environment)";
		return nullptr;
	}
	std::string h;
	uint16_t p;
	if (!split_hostport(c.rendezvous, &h, &p)) {
		*err = "--rendezvous: expected host:port, got '" + c.rendezvous + "'";
		return nullptr;
	}
	return tcp_bootstrap(c.rendezvous, unsigned(rank), unsigned(size),
			     le.launcher.empty() ? "command line" : le.launcher);
}

} // namespace

int prepare_job(const coll_config &c, const cli::parser &app, std::vector<std::string> eal, job_ctl *k)
{
	const bool procs = c.mode == "procs";
	uint32_t nranks = c.ranks, my_rank = 0;
	k->procs = procs;
	if (procs && c.workers > 1) {
		fprintf(stderr, "rdgram-coll: --workers %u: procs mode runs one rank per process on one poll thread "
				"(--workers spreads the ranks of threads mode)\n", c.workers);
		return 2;
	}
	if (procs) {
		std::string err;
		if (std::string e = soft::need_devargs(c.port); !e.empty() && c.driver == "soft") {
			fprintf(stderr, "rdgram-coll: procs mode: %s, or --port (this rank's DPDK port, e.g. "
					"net_af_packet{rank},iface=veth{rank})\n", e.c_str());
			return 2;
		}
		if (!(k->boot = open_bootstrap(c, app, &err))) {
			fprintf(stderr, "rdgram-coll: %s\n", err.c_str());
			return 2;
		}
		job_bootstrap *boot = k->boot.get();
		nranks = uint32_t(boot->size());
		my_rank = uint32_t(boot->rank());
		if (nranks < 2 || nranks > max_procs_ranks || my_rank >= nranks) {
			fprintf(stderr, "rdgram-coll: rank %u of %u (%s): need 2..%u ranks and rank < ranks\n", my_rank,
				nranks, boot->name().c_str(), max_procs_ranks);
			return 2;
		}
		/* Every rank of a launcher gets the same EAL arguments: its
		 * lcores move to CPUs of their own among the task's, by local
		 * rank (lcore_placement.h), */
		if (!eal.empty()) {
			std::string line;
			if (!apps::place_eal_lcores(&eal, boot->local_rank(), boot->local_size(), apps::task_cpus(),
						    apps::host_cpus(), &line)) {
				fprintf(stderr, "rdgram-coll: %s\n", line.c_str());
				return 2;
			}
			printf("rdgram-coll: rank %u: %s\n", my_rank, line.c_str());
		}
		/* {rank} in them is this rank, and a private --file-prefix
		 * per rank is added unless one was given. */
		for (std::string &a : eal)
			for (size_t at; (at = a.find("{rank}")) != std::string::npos;)
				a.replace(at, 6, std::to_string(my_rank));
		const bool has_prefix = std::any_of(eal.begin(), eal.end(), [](const std::string &a) {
			return a.rfind("--file-prefix", 0) == 0;
		});
		if (!eal.empty() && !has_prefix && !boot->job_name().empty()) {
			std::string ns = boot->job_name();
			for (char &ch : ns)
				if (!isalnum((unsigned char)ch) && ch != '-' && ch != '_' && ch != '.')
					ch = '_';
			eal.push_back("--file-prefix=rdgram-coll-" + ns + "-" + std::to_string(my_rank));
		}
	} else if (nranks > max_threads_ranks && c.driver == "soft") {
		fprintf(stderr, "rdgram-coll: threads mode takes at most %u ranks (one net_ring port each; DPDK was "
				"built with RTE_MAX_ETHPORTS %u)\n", max_threads_ranks, unsigned(RTE_MAX_ETHPORTS));
		return 2;
	}
	if (!procs && c.workers > nranks) {
		fprintf(stderr, "rdgram-coll: --workers %u: more poll threads than the %u ranks they serve\n", c.workers,
			nranks);
		return 2;
	}
	k->nranks = nranks;
	k->my_rank = my_rank;
	k->eal = std::move(eal);
	return 0;
}

template <class Dev> int set_up_job(const coll_config &c, runtime &rt, job<Dev> &j, job_ctl &k)
{
	const bool procs = k.procs;
	const uint32_t nranks = k.nranks, my_rank = k.my_rank;
	j.c = &c;
	j.rt = &rt;
	j.nranks = nranks;
	j.deadline = UINT64_MAX;

	/* 1. The poll threads: --workers of the EAL's lcores, the main
	 * lcore last (apps/common/workers.h). A worker serves ranks: procs
	 * mode has one per process, threads mode spreads its ranks over
	 * the workers (rank r on worker r % workers; prepare_job checked
	 * the count against the ranks). */
	std::vector<lcore_cpu> lcores;
	if (std::string err; apps::pick_workers(rt, SOCKET_ID_ANY, c.workers, &lcores, &err) != 0) {
		fprintf(stderr, "rdgram-coll: %s\n", err.c_str());
		return 2;
	}
	const int node = replica_nodes(rt.topology(), lcores)[0];
	for (unsigned w = 0; w < lcores.size(); w++) {
		auto ws = std::make_unique<worker_state>();
		ws->index = w;
		ws->where = lcores[w];
		ws->idle = poll_idle(poll_idle_config{idle_of(c.idle), c.idle_spins, c.idle_sleep_us});
		ws->polls_switch = !procs && apps::is_soft<Dev> && w == 0;
		j.workers.push_back(std::move(ws));
	}

	/* 2. The fabric: procs, this rank's device (soft: on its port);
	 * threads, every rank's (soft: net_ring ports on the in-process
	 * switch, the peers static neighbours by rank; RDMA drivers: one
	 * open of the device per rank). */
	int status = 0;
	if (procs) {
		auto lr = std::make_unique<local_rank<Dev>>();
		lr->rank = my_rank;
		if constexpr (apps::is_soft<Dev>)
			status = open_user_port(c.port, my_rank, lr->owner);
		if (status == 0)
			status = open_rank(c, rt, nranks, *lr, {}, node);
		j.ranks.push_back(std::move(lr));
	} else {
		std::vector<rank_addr> statics;
		if constexpr (apps::is_soft<Dev>) {
			j.has_switch = true;
			for (uint32_t r = 0; r < nranks; r++) {
				rank_addr a{};
				a.rank = r;
				memcpy(a.gid, gid_of(r).raw, 16);
				a.qpn = qpn_base + r;
				a.qkey = c.qkey;
				memcpy(a.mac, mac_of(r).addr_bytes, 6);
				statics.push_back(a);
			}
		}
		for (uint32_t r = 0; r < nranks && status == 0; r++) {
			auto lr = std::make_unique<local_rank<Dev>>();
			lr->rank = r;
			if constexpr (apps::is_soft<Dev>)
				status = make_ring_port(j.sw, r, node, c.port, lr->owner);
			if (status == 0)
				status = open_rank(c, rt, nranks, *lr, statics, node);
			j.ranks.push_back(std::move(lr));
		}
	}
	for (size_t i = 0; i < j.ranks.size(); i++) {
		j.ranks[i]->worker = unsigned(i % j.workers.size());
		j.workers[i % j.workers.size()]->ranks.push_back(i);
	}
	j.held.resize(j.ranks.size());
	for (auto &h : j.held)
		h.reserve(held_max);
	return status;
}

template <class Dev> int run_job(const coll_config &c, runtime &rt, job_ctl &k)
{
	job<Dev> j;
	k.main_cpus = apps::this_thread_cpus(); /* the main lcore's thread */
	int status = set_up_job(c, rt, j, k);
	if (status == 0) {
		std::vector<worker_arg<Dev>> args;
		std::vector<lcore_cpu> lcores;
		for (auto &w : j.workers) {
			args.push_back(worker_arg<Dev>{&j, w.get()});
			lcores.push_back(w->where);
		}
		std::vector<void *> ptrs;
		for (auto &a : args)
			ptrs.push_back(&a);
		int phases = 0;
		/* The workers poll from here on (procs: answering ARP and
		 * holding early datagrams during the exchange); the phases run
		 * beside them, on this thread or, when the main lcore is a
		 * worker, on a plain thread. */
		const int wrc = apps::run_workers(lcores, worker_main<Dev>, ptrs, [&](const std::atomic<unsigned> &running) {
			k.stop_workers = [&] {
				j.stop.store(true, std::memory_order_release);
				while (running.load(std::memory_order_acquire) != 0)
					rte_delay_us_sleep(1000);
			};
			phases = run_phases(c, j, k);
			k.stop_workers();
			k.stop_workers = [] {};
		});
		if (wrc < 0)
			fprintf(stderr, "rdgram-coll: cannot launch a poll thread: %s\n", strerror(-wrc));
		status = phases != 0 ? phases : wrc != 0 ? 1 : 0;
	}
	const close_stats<Dev> cs = close_job(rt, j, k, status);
	if (status == 0)
		status = report_job(c, j, k, cs);
	fflush(stdout);
	return status;
}

template <class Dev> close_stats<Dev> close_job(runtime &rt, job<Dev> &j, job_ctl &k, int status)
{
	/* Threads mode, soft: ranks stop once they are done, not once the
	 * switch is empty; acknowledgements and retransmissions still on
	 * their way go back to their pools, counted. */
	if (j.has_switch)
		j.sw.drain();

	/* Every rank's device closes: its mbufs must all be back. */
	close_stats<Dev> cs;
	cs.qctr.resize(j.ranks.size());
	cs.pstats.resize(j.ranks.size());
	for (size_t i = 0; i < j.ranks.size(); i++) {
		local_rank<Dev> &lr = *j.ranks[i];
		cs.qctr[i] = lr.q.counters();
		cs.pstats[i] = rte_eth_stats{};
		if constexpr (apps::is_soft<Dev>) {
			if (lr.opened)
				soft::port_stats(lr.owner.port_id(), &cs.pstats[i]);
			if (k.procs && status == 0)
				cs.arp_matched += count_arp_matches(rt, lr, k.table);
		}
		unsigned u = 0;
		close_rank(lr, &u);
		cs.in_use += u;
		cs.pmd_held += lr.pmd_held;
		cs.leaked += u > lr.pmd_held ? u - lr.pmd_held : 0;
	}
	return cs;
}

#define RDGRAM_COLL_SETUP_INST(D)                                                                      \
	template int run_job<D>(const coll_config &, runtime &, job_ctl &);
RDGRAM_COLL_DRIVERS(RDGRAM_COLL_SETUP_INST)

} // namespace rdgram::coll
