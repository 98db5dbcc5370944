/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll's set-up and close (main thread): the job's bootstrap and
 * EAL arguments, the poll lcore, the fabric and the address exchange, and
 * at the end the ranks' counters and their devices closed.
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
#include "coll_poll.h"
#include "job_bootstrap.h"

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
	if (procs) {
		std::string err;
		if (c.port.empty()) {
			fprintf(stderr, "rdgram-coll: procs mode needs --port (this rank's DPDK port, e.g. "
					"net_af_packet{rank},iface=veth{rank})\n");
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
		/* Every rank of a launcher gets the same EAL arguments:
		 * {rank} in them is this rank, and a private --file-prefix
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
	} else if (nranks > max_threads_ranks) {
		fprintf(stderr, "rdgram-coll: threads mode takes at most %u ranks (one net_ring port each; DPDK was "
				"built with RTE_MAX_ETHPORTS %u)\n", max_threads_ranks, unsigned(RTE_MAX_ETHPORTS));
		return 2;
	}
	k->nranks = nranks;
	k->my_rank = my_rank;
	k->eal = std::move(eal);
	return 0;
}

int start_worker(job &j, job_ctl &k)
{
	j.held.resize(j.ranks.size());
	for (auto &h : j.held)
		h.reserve(held_max);
	j.deadline = UINT64_MAX;
	if (launch_on_lcore(worker_main, &j, j.worker.lcore) != 0) {
		fprintf(stderr, "rdgram-coll: cannot launch the poll lcore %u\n", j.worker.lcore);
		return 1;
	}
	k.worker_up = true;
	return 0;
}

void stop_worker(job &j, job_ctl &k)
{
	if (!k.worker_up)
		return;
	j.stop.store(true, std::memory_order_release);
	wait_on_lcore(j.worker.lcore);
	k.worker_up = false;
}

int set_up_job(const coll_config &c, runtime &rt, job &j, job_ctl &k)
{
	const bool procs = k.procs;
	const uint32_t nranks = k.nranks, my_rank = k.my_rank;
	j.c = &c;
	j.rt = &rt;
	j.nranks = nranks;
	const double hz = double(rte_get_tsc_hz());
	auto lcores = rt.poll_lcores(SOCKET_ID_ANY);
	for (const auto &l : lcores)
		if (l.lcore != rte_get_main_lcore()) {
			j.worker = l;
			break;
		}
	if (lcores.size() < 2) {
		fprintf(stderr, "rdgram-coll: needs two lcores (EAL -l with two CPUs): one polls every rank\n");
		return 2;
	}
	const int node = replica_nodes(rt.topology(), {j.worker})[0];

	/* 1. The fabric. procs: this rank's device opens on its port
	 * first, and the poll lcore starts, so that it answers ARP as
	 * soon as its address is published. */
	j.idle = poll_idle(poll_idle_config{idle_of(c.idle), c.idle_spins, c.idle_sleep_us});
	int status = 0;
	if (procs) {
		auto lr = std::make_unique<local_rank>();
		lr->rank = my_rank;
		status = open_user_port(c.port, my_rank, &lr->port, &lr->port_probed);
		if (status == 0)
			status = open_rank(c, rt, nranks, *lr, {}, node);
		j.ranks.push_back(std::move(lr));
		if (status == 0)
			status = start_worker(j, k);
	}

	/* 2. Address exchange. A rank's GID and QPN follow from its
	 * rank; procs: its MAC is its port's (published, but peers
	 * resolve it by ARP); threads: fixed by the rank, static
	 * neighbours of the in-process switch. */
	std::vector<rank_addr> &table = k.table;
	table.resize(nranks);
	auto addr = [&](uint32_t r) {
		if (procs)
			return rank_record(c, *j.ranks[0]);
		rank_addr a{};
		a.rank = r;
		memcpy(a.gid, gid_of(r).raw, 16);
		a.qpn = qpn_base + r;
		a.qkey = c.qkey;
		memcpy(a.mac, mac_of(r).addr_bytes, 6);
		return a;
	};
	const uint64_t tx0 = rte_get_tsc_cycles();
	if (procs && status == 0) {
		job_bootstrap *boot = k.boot.get();
		endpoint_record self{endpoint_magic, endpoint_format, uint16_t(c.mtu),
				     job_key(c.job.empty() ? boot->job_name() : c.job), addr(my_rank)};
		std::vector<endpoint_record> recs;
		if (boot->exchange(self, c.timeout_s, &recs) != 0) {
			fprintf(stderr, "rdgram-coll: rank %u: %s\n", my_rank, boot->error().c_str());
			status = 1;
		}
		for (size_t r = 0; r < recs.size(); r++)
			table[r] = recs[r].addr;
	} else {
		for (uint32_t r = 0; r < nranks; r++)
			table[r] = addr(r);
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

	if (status == 0 && !procs) {
		j.has_switch = true;
		for (uint32_t r = 0; r < nranks && status == 0; r++) {
			auto lr = std::make_unique<local_rank>();
			lr->rank = r;
			status = make_ring_port(j.sw, r, node, &lr->port);
			if (status == 0)
				status = open_rank(c, rt, nranks, *lr, table, node);
			j.ranks.push_back(std::move(lr));
		}
		if (status == 0)
			status = start_worker(j, k);
	}
	return status;
}

close_stats close_job(runtime &rt, job &j, job_ctl &k, int status)
{
	stop_worker(j, k);
	/* Threads mode: ranks stop once they are done, not once the
	 * switch is empty; acknowledgements and retransmissions still
	 * on their way go back to their pools, counted. */
	if (j.has_switch)
		j.sw.drain();

	/* Every rank's device closes: its mbufs must all be back. */
	close_stats cs;
	cs.qctr.resize(j.ranks.size());
	cs.pstats.resize(j.ranks.size());
	for (size_t i = 0; i < j.ranks.size(); i++) {
		local_rank &lr = *j.ranks[i];
		cs.qctr[i] = lr.q.counters();
		rte_eth_stats_get(lr.port, &cs.pstats[i]);
		if (k.procs && status == 0)
			cs.arp_matched += count_arp_matches(rt, lr, k.table);
		unsigned u = 0;
		close_rank(lr, &u);
		cs.in_use += u;
		cs.pmd_held += lr.pmd_held;
		cs.leaked += u > lr.pmd_held ? u - lr.pmd_held : 0;
	}
	return cs;
}

} // namespace rdgram::coll
