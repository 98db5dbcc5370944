/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll: the HPC collectives test over UD on the soft RoCEv2 driver.
 *
 *   rdgram-coll [EAL args --] [--mode threads|procs] [options]
 *
 * Every rank is one soft RoCEv2 device (its own port, GID, MAC, UD QP, AH
 * service), on a fabric (coll_fabric.h):
 *
 *   threads  all ranks in one process, on net_ring ports joined by an
 *            Ethernet switch in software (static neighbours).
 *   procs    one rank per process, on a real DPDK port (--port: e.g.
 *            net_af_packet on a veth plugged into a Linux bridge, or a
 *            NIC); the peers' MACs are resolved by ARP through the fabric.
 *            Rank, size and every rank's endpoint record come from the
 *            launcher's PMIx server (mpirun, srun --mpi=pmix) or a TCP
 *            rendezvous at rank 0 (--bootstrap, job_bootstrap.h).
 *
 * One poll lcore drives the switch and every local rank's queue round
 * robin (each rank a state machine, coll_engine.h), so 8 ranks need no 8
 * cores; --idle says what it does when nothing arrives (poll_idle.h), so
 * that many ranks can share few cores. It polls from the moment the
 * devices open (answering ARP, holding early datagrams for the engine).
 * Phases: address exchange; the AH storm (each rank creates AHs to all
 * N - 1 peers in one create_ah_batch, timed per rank); then --iters
 * barriers, allgathers and alltoalls, verified, with per-op latency.
 */
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "cli.h"
#include "coll_config.h"
#include "coll_engine.h"
#include "coll_fabric.h"
#include "job_bootstrap.h"
#include "rdgram/ah_service.h"
#include "rdgram/config.h"
#include "rdgram/poll_idle.h"
#include "rdgram/runtime.h"
#include "soft_device.h"

using namespace rdgram;
using namespace rdgram::coll;

namespace {

idle_mode idle_of(const std::string &s)
{
	idle_mode m = idle_mode::busy;
	parse_idle_mode(s.c_str(), &m); /* checked by the CLI and the config */
	return m;
}

/* Datagrams a rank's queue received before its engine started (a peer
 * that finished its AH storm first): held, then handed to the engine. */
constexpr unsigned held_max = 1024;

struct job {
	const coll_config *c = nullptr;
	runtime *rt = nullptr;
	uint32_t nranks = 0;
	std::vector<std::unique_ptr<local_rank>> ranks; /* local ranks */
	eth_switch sw;
	bool has_switch = false;
	lcore_cpu worker{};
	poll_idle idle;
	std::vector<std::vector<recv_wc>> held; /* per local rank, held_max reserved */
	uint64_t held_total = 0, held_overflow = 0;
	std::atomic<bool> stop{false};
	std::atomic<bool> started{false};    /* engines set up (main thread) */
	std::atomic<bool> local_done{false}; /* every local rank finished and quiet */
	std::atomic<bool> timed_out{false};
	uint64_t deadline = 0; /* written before started */
};

/* Before the collectives: keeps the queues moving (ARP/ND in and out,
 * through rx_burst and tx_flush), holds the datagrams. */
bool poll_before_start(job &j)
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
int worker_main(void *arg)
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

/* From t_start (TSC) to the end of lr's AH storm, ms. */
double ahs_ms(const local_rank &lr, uint64_t t_start)
{
	return lr.storm_end > t_start ? double(lr.storm_end - t_start) * 1e3 / double(rte_get_tsc_hz()) : 0;
}

double pct(std::vector<double> &v, double p)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

} // namespace

int main(int argc, char **argv)
{
	split_args sa = split_command_line(argc, argv);
	coll_config c;

	cli::parser app{"rdgram-coll",
			"rdgram-coll: HPC collectives over UD on the soft RoCEv2 driver: address exchange, the AH "
			"storm (timed per rank), then barrier (dissemination), allgather (ring) and alltoall "
			"(pairwise) with the app's own loss recovery, verified results and per-op latency.\n"
			"Usage: rdgram-coll [EAL args --] [options]",
			34};
	std::string cfg_path;
	app.add("-c,--config", cfg_path, "TOML config file (see config/rdgram-coll.toml); options override it");
	app.add("--mode", c.mode,
		"threads: all ranks in this process over a net_ring switch; procs: this process is one "
		"rank, on the DPDK port --port (peers found by ARP) [threads]")
		.one_of({"threads", "procs"});
	app.add("--ranks", c.ranks,
		"number of ranks (threads: at most 32, DPDK's RTE_MAX_ETHPORTS; procs: at most 64, taken from mpirun's "
		"OMPI_COMM_WORLD_SIZE when set) [8]")
		.range(1u, max_procs_ranks);
	app.add("--rank", c.rank, "procs: this process's rank (-1: from OMPI_COMM_WORLD_RANK or PMIX_RANK) [-1]")
		.range(-1, int(max_procs_ranks) - 1);
	app.add("--bootstrap", c.bootstrap,
		"procs: how ranks find each other: pmix (the launcher's PMIx server: rank, size and endpoint "
		"records through PMIx), tcp (--rendezvous at rank 0), auto (pmix when a PMIx server is in the "
		"environment) [auto]")
		.one_of({"auto", "pmix", "tcp"});
	app.add("--job", c.job,
		"procs: the job's name in every endpoint record; a record of another name is refused "
		"[the PMIx namespace]");
	app.add("--rendezvous", c.rendezvous,
		"procs, tcp: host:port where rank 0 listens for the address exchange [127.0.0.1:18515]");
	app.add("--port", c.port,
		"procs: this rank's DPDK port, as devargs (a vdev, e.g. net_af_packet{rank},iface=veth{rank}, "
		"probed here) or the name of a port given to the EAL (--vdev, -a); {rank} is replaced by the rank");
	app.add("--idle", c.idle,
		"what the poll lcore does after --idle-spins empty polls: busy (spin), yield (sched_yield), "
		"sleep (nanosleep, 1 us doubling up to --idle-sleep-us) [busy]")
		.one_of({"busy", "yield", "sleep"});
	app.add("--idle-spins", c.idle_spins, "empty polls in a row before --idle yield/sleep gives the core up [64]")
		.range(0u, 100000000u);
	app.add("--idle-sleep-us", c.idle_sleep_us, "--idle sleep: the longest nap, us [100]").range(1u, 1000000u);
	app.add("--iters", c.iters, "iterations of each collective [100]").range(1u, 1000000u);
	app.add("--size", c.size, "bytes per rank block in allgather and alltoall (one datagram) [64]")
		.range(1u, max_size);
	app.add("--rto-us", c.rto_us, "retransmission timeout of an unacknowledged message, us [200]")
		.range(1u, 10000000u);
	app.add("--drop-rate", c.drop_rate,
		"fraction of received datagrams each rank throws away, to exercise loss recovery [0]")
		.range(0.0, 0.5);
	app.add("--seed", c.seed, "seed of the drop pattern (per rank: seed and rank) [1]");
	app.add("--json", c.json, "also write the results (storm per rank, each collective's p50/p99/max, "
				  "counters, PASS/FAIL; procs, rank 0: every rank's storm) as one JSON object to FILE ({rank}: "
				  "this process's rank); - for stdout [none]");
	app.add("--timeout", c.timeout_s, "deadline of each phase (exchange, storm, collectives), s [30]")
		.range(0.1, 3600.0);
	app.add("--qkey", c.qkey, "Q_Key of every rank's QP (below 0x80000000) [0x11110000]").range(0u, 0x7fffffffu);
	app.add("--mtu", c.mtu, "path MTU of every rank's device: 256, 512, 1024, 2048 or 4096 [2048]")
		.range(256u, 4096u);

	/* A config file is applied first, so options (which CLI11 writes into c
	 * while parsing) must win: parse twice, the second time over the
	 * file's values. */
	if (int rc = app.parse(sa.app); rc >= 0)
		return rc;
	if (!cfg_path.empty()) {
		try {
			load_coll_config(cfg_path, c);
		} catch (const config_error &e) {
			fprintf(stderr, "rdgram-coll: %s\n", e.what());
			return 2;
		}
		if (int rc = app.parse(sa.app); rc >= 0)
			return rc;
	}

	const bool procs = c.mode == "procs";
	uint32_t nranks = c.ranks, my_rank = 0;
	if ((c.mtu & (c.mtu - 1)) != 0) {
		fprintf(stderr, "rdgram-coll: --mtu %u: expected 256, 512, 1024, 2048 or 4096\n", c.mtu);
		return 2;
	}
	std::unique_ptr<job_bootstrap> boot;
	std::vector<std::string> eal = sa.eal_given ? sa.eal : c.eal_args;
	if (procs) {
		std::string err;
		if (c.port.empty()) {
			fprintf(stderr, "rdgram-coll: procs mode needs --port (this rank's DPDK port, e.g. "
					"net_af_packet{rank},iface=veth{rank})\n");
			return 2;
		}
		if (!(boot = open_bootstrap(c, app, &err))) {
			fprintf(stderr, "rdgram-coll: %s\n", err.c_str());
			return 2;
		}
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

	runtime rt;
	if (rt.init(eal, argv[0]) != 0) {
		fprintf(stderr, "rdgram-coll: %s\n", rt.error().c_str());
		return 1;
	}
	int status = 0;
	{
		job j;
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
			rt.fini();
			return 2;
		}
		const int node = replica_nodes(rt.topology(), {j.worker})[0];

		/* 1. The fabric. procs: this rank's device opens on its port
		 * first, and the poll lcore starts, so that it answers ARP as
		 * soon as its address is published. */
		j.idle = poll_idle(poll_idle_config{idle_of(c.idle), c.idle_spins, c.idle_sleep_us});
		bool worker_up = false;
		auto start_worker = [&] {
			j.held.resize(j.ranks.size());
			for (auto &h : j.held)
				h.reserve(held_max);
			j.deadline = UINT64_MAX;
			if (launch_on_lcore(worker_main, &j, j.worker.lcore) != 0) {
				fprintf(stderr, "rdgram-coll: cannot launch the poll lcore %u\n", j.worker.lcore);
				return 1;
			}
			worker_up = true;
			return 0;
		};
		auto stop_worker = [&] {
			if (!worker_up)
				return;
			j.stop.store(true, std::memory_order_release);
			wait_on_lcore(j.worker.lcore);
			worker_up = false;
		};
		if (procs) {
			auto lr = std::make_unique<local_rank>();
			lr->rank = my_rank;
			status = open_user_port(c.port, my_rank, &lr->port, &lr->port_probed);
			if (status == 0)
				status = open_rank(c, rt, nranks, *lr, {}, node);
			j.ranks.push_back(std::move(lr));
			if (status == 0)
				status = start_worker();
		}

		/* 2. Address exchange. A rank's GID and QPN follow from its
		 * rank; procs: its MAC is its port's (published, but peers
		 * resolve it by ARP); threads: fixed by the rank, static
		 * neighbours of the in-process switch. */
		std::vector<rank_addr> table(nranks);
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
		std::vector<double> storm_all, ahs_all; /* procs, rank 0: every rank's figures */
		const uint64_t tx0 = rte_get_tsc_cycles();
		if (procs && status == 0) {
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
			const std::chrono::duration<double> since = std::chrono::steady_clock::now() - boot->started();
			t_start -= std::min(t_start - tx0, uint64_t(since.count() * hz));
		}
		const double exchange_ms = double(t_start - tx0) * 1e3 / hz;

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
				status = start_worker();
		}

		/* 3. The AH storm: every local rank at once (one thread each,
		 * as N processes would at job start). */
		if (status == 0) {
			std::vector<std::thread> th;
			for (auto &lr : j.ranks)
				th.emplace_back([&, p = lr.get()] { storm(*p, table); });
			for (auto &t : th)
				t.join();
			std::vector<double> st;
			printf("rdgram-coll: %u ranks, mode %s (%s), exchange %.3f ms%s%s\n", nranks, c.mode.c_str(),
			       procs ? boot->launcher().c_str() : "in-memory", exchange_ms, procs ? ", bootstrap " : "",
			       procs ? boot->name().c_str() : "");
			printf("AH storm (create_ah_batch of %u AHs per rank):\n", nranks - 1);
			for (auto &lr : j.ranks) {
				printf("  rank %3u  %8.3f ms  %u/%u created%s%s\n", lr->rank, lr->storm_ms, lr->storm_ok,
				       nranks - 1, lr->storm_err ? ", error: " : "",
				       lr->storm_err ? strerror(lr->storm_err) : "");
				st.push_back(lr->storm_ms);
				if (lr->storm_ok != nranks - 1)
					status = 1;
			}
			const double mn = *std::min_element(st.begin(), st.end());
			const double mx = *std::max_element(st.begin(), st.end());
			printf("  storm ms: min %.3f  median %.3f  max %.3f\n", mn, pct(st, 0.5), mx);
			if (procs)
				printf("  start barrier (%s) to AHs to all peers: %.3f ms\n",
				       boot->name() == "PMIx" ? "PMIx fence" : "rendezvous", ahs_ms(*j.ranks[0], t_start));
			fflush(stdout);
		}

		/* 4. Collectives on the poll lcore. */
		if (status == 0) {
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
			if (procs && !j.timed_out.load() &&
			    boot->finish(c.timeout_s, {j.ranks[0]->storm_ms, ahs_ms(*j.ranks[0], t_start)}, &figs,
					 stop_worker) != 0) {
				fprintf(stderr, "rdgram-coll: rank %u: %s\n", my_rank, boot->error().c_str());
				status = 1;
			}
			for (size_t i = 0; i + 1 < figs.size(); i += 2) {
				storm_all.push_back(figs[i]);
				ahs_all.push_back(figs[i + 1]);
			}
			/* A rank gave up: the bootstrap may tell who never got
			 * this far. Each rank's deadline counts from its own
			 * start of the collectives, so the others get as long
			 * again to say they gave up too. */
			if (procs && j.timed_out.load()) {
				const std::string gone = boot->absent_ranks(c.timeout_s);
				if (!gone.empty())
					fprintf(stderr, "rdgram-coll: rank %u: collectives timed out after %.1f s: %s\n", my_rank,
						c.timeout_s, gone.c_str());
			}
		}
		stop_worker();
		/* Threads mode: ranks stop once they are done, not once the
		 * switch is empty; acknowledgements and retransmissions still
		 * on their way go back to their pools, counted. */
		if (j.has_switch)
			j.sw.drain();

		/* Every rank's device closes: its mbufs must all be back. */
		std::vector<soft::soft_counters> qctr(j.ranks.size());
		std::vector<rte_eth_stats> pstats(j.ranks.size());
		unsigned arp_matched = 0, in_use = 0, pmd_held = 0, leaked = 0;
		for (size_t i = 0; i < j.ranks.size(); i++) {
			local_rank &lr = *j.ranks[i];
			qctr[i] = lr.q.counters();
			rte_eth_stats_get(lr.port, &pstats[i]);
			if (procs && status == 0)
				arp_matched += count_arp_matches(rt, lr, table);
			unsigned u = 0;
			close_rank(lr, &u);
			in_use += u;
			pmd_held += lr.pmd_held;
			leaked += u > lr.pmd_held ? u - lr.pmd_held : 0;
		}

		/* 5. Report. */
		if (status == 0) {
			rank_stats tot{};
			bool all_fin = true;
			for (auto &lr : j.ranks) {
				const rank_stats &s = lr->eng.stats();
				tot.data_sent += s.data_sent;
				tot.acks_sent += s.acks_sent;
				tot.retransmits += s.retransmits;
				tot.tx_refused += s.tx_refused;
				tot.data_recv += s.data_recv;
				tot.acks_recv += s.acks_recv;
				tot.duplicates += s.duplicates;
				tot.stale_acks += s.stale_acks;
				tot.dropped += s.dropped;
				tot.bad_msgs += s.bad_msgs;
				tot.verified += s.verified;
				tot.verify_fail += s.verify_fail;
				if (!lr->eng.finished()) {
					all_fin = false;
					fprintf(stderr, "rdgram-coll: rank %u stopped at collective %u of %u (%s)\n", lr->rank,
						lr->eng.cseq(), c.iters * nb_ops,
						op_name(lr->eng.op_of(std::min(lr->eng.cseq(), c.iters * nb_ops - 1))));
				}
			}
			/* The same results as JSON (--json). */
			std::string js;
			char b[512];
			snprintf(b, sizeof(b),
				 "{\"ranks\":%u,\"local_ranks\":%zu,\"mode\":\"%s\",\"launcher\":\"%s\",\"bootstrap\":\"%s\","
				 "\"exchange_ms\":%.3f,"
				 "\"iters\":%u,\"size\":%u,\"rto_us\":%u,\"drop_rate\":%.4f,\"seed\":%lu,\"storm\":[",
				 nranks, j.ranks.size(), c.mode.c_str(), procs ? boot->launcher().c_str() : "in-memory",
				 procs ? boot->name().c_str() : "in-memory", exchange_ms,
				 c.iters, c.size, c.rto_us, c.drop_rate, (unsigned long)c.seed);
			js += b;
			for (size_t i = 0; i < j.ranks.size(); i++) {
				snprintf(b, sizeof(b), "%s{\"rank\":%u,\"ms\":%.3f,\"created\":%u,\"start_to_ahs_ms\":%.3f}",
					 i ? "," : "", j.ranks[i]->rank, j.ranks[i]->storm_ms, j.ranks[i]->storm_ok,
					 ahs_ms(*j.ranks[i], t_start));
				js += b;
			}
			/* Procs, rank 0: every rank's figures from the end barrier. */
			js += "],\"job_storm\":[";
			for (size_t r = 0; r < storm_all.size() && r < ahs_all.size(); r++) {
				snprintf(b, sizeof(b), "%s{\"rank\":%zu,\"ms\":%.3f,\"start_to_ahs_ms\":%.3f}", r ? "," : "", r,
					 storm_all[r], ahs_all[r]);
				js += b;
			}
			js += "],\"collectives\":{";
			printf("collectives: %u iterations each, %u-byte blocks, rto %u us, drop rate %.3f (seed %lu)\n",
			       c.iters, c.size, c.rto_us, c.drop_rate, (unsigned long)c.seed);
			printf("  %-10s %10s %10s %10s %10s   (us per op per rank, %zu rank(s) here)\n", "op", "p50", "p99",
			       "max", "verified", j.ranks.size());
			for (unsigned o = 0; o < nb_ops && all_fin; o++) {
				std::vector<double> v;
				for (auto &lr : j.ranks)
					for (uint32_t i = 0; i < c.iters; i++)
						v.push_back(double(lr->eng.latency(o * c.iters + i)) * 1e6 / hz);
				const double p50 = pct(v, 0.5), p99 = pct(v, 0.99), mx = v.back();
				printf("  %-10s %10.1f %10.1f %10.1f %10zu\n", op_name(op_kind(o)), p50, p99, mx, v.size());
				snprintf(b, sizeof(b), "%s\"%s\":{\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,\"samples\":%zu}",
					 o ? "," : "", op_name(op_kind(o)), p50, p99, mx, v.size());
				js += b;
			}
			snprintf(b, sizeof(b),
				 "},\"verified\":%lu,\"verify_failed\":%lu,\"data_sent\":%lu,\"retransmits\":%lu,"
				 "\"dropped\":%lu,\"duplicates\":%lu,\"acks_sent\":%lu,\"acks_received\":%lu,"
				 "\"stale_acks\":%lu,\"tx_refused\":%lu,\"bad_messages\":%lu",
				 (unsigned long)tot.verified, (unsigned long)tot.verify_fail, (unsigned long)tot.data_sent,
				 (unsigned long)tot.retransmits, (unsigned long)tot.dropped, (unsigned long)tot.duplicates,
				 (unsigned long)tot.acks_sent, (unsigned long)tot.acks_recv, (unsigned long)tot.stale_acks,
				 (unsigned long)tot.tx_refused, (unsigned long)tot.bad_msgs);
			js += b;
			if (j.has_switch) {
				snprintf(b, sizeof(b), ",\"switch\":{\"forwarded\":%lu,\"unknown_destination\":%lu,\"output_full\":%lu,"
					 "\"in_flight_at_stop\":%lu}",
					 (unsigned long)j.sw.st.forwarded, (unsigned long)j.sw.st.unknown_dst,
					 (unsigned long)j.sw.st.full, (unsigned long)j.sw.st.in_flight_at_stop);
				js += b;
			}
			printf("  verified: %lu  failed: %lu\n", (unsigned long)tot.verified, (unsigned long)tot.verify_fail);
			printf("  data sent: %lu  retransmits: %lu  dropped (--drop-rate): %lu  duplicates: %lu\n",
			       (unsigned long)tot.data_sent, (unsigned long)tot.retransmits, (unsigned long)tot.dropped,
			       (unsigned long)tot.duplicates);
			printf("  acks sent: %lu  acks received: %lu  stale acks: %lu  tx refused: %lu  bad messages: %lu\n",
			       (unsigned long)tot.acks_sent, (unsigned long)tot.acks_recv, (unsigned long)tot.stale_acks,
			       (unsigned long)tot.tx_refused, (unsigned long)tot.bad_msgs);
			if (procs && my_rank == 0 && storm_all.size() == nranks) {
				/* The storm times every rank brought to the final
				 * barrier. */
				printf("AH storm, all ranks (gathered at the end), ms:");
				for (uint32_t r = 0; r < nranks; r++)
					printf("%s %.3f", r % 8 ? "" : "\n ", storm_all[r]);
				const double mn = *std::min_element(storm_all.begin(), storm_all.end());
				const double mx = *std::max_element(storm_all.begin(), storm_all.end());
				printf("\n  storm ms: min %.3f  median %.3f  max %.3f\n", mn, pct(storm_all, 0.5), mx);
				/* The job's AH storm end to end: from the start
				 * barrier's return (PMIx: the fence) to this rank
				 * holding AHs to all peers; the job's figure is the
				 * last rank's. */
				printf("start barrier (%s) to AHs to all peers, all ranks, ms:",
				       boot->name() == "PMIx" ? "PMIx fence" : "rendezvous");
				for (uint32_t r = 0; r < nranks; r++)
					printf("%s %.3f", r % 8 ? "" : "\n ", ahs_all[r]);
				printf("\n  start to AHs ms: min %.3f  median %.3f  max %.3f\n",
				       *std::min_element(ahs_all.begin(), ahs_all.end()), pct(ahs_all, 0.5),
				       *std::max_element(ahs_all.begin(), ahs_all.end()));
			}
			if (j.has_switch)
				printf("  switch: forwarded %lu  unknown destination %lu  output full %lu  in flight at stop %lu\n",
				       (unsigned long)j.sw.st.forwarded, (unsigned long)j.sw.st.unknown_dst,
				       (unsigned long)j.sw.st.full, (unsigned long)j.sw.st.in_flight_at_stop);
			/* The port's side of the same messages, and the
			 * accounting that must close in every process: what the
			 * app sent is what the port took plus what it refused or
			 * dropped by name; what the port delivered is what the
			 * app received plus its named drops; every mbuf back. */
			soft::soft_counters q{};
			uint64_t imissed = 0;
			for (size_t i = 0; i < qctr.size(); i++) {
				q += qctr[i];
				imissed += pstats[i].imissed;
			}
			std::string reasons, jreasons;
			q.for_each([&](const xstat_name &n, uint64_t v) {
				if (v == 0 || n.kind == counter_kind::traffic)
					return;
				const char *name = n.name;
				reasons += std::string(" ") + name + "=" + std::to_string(v);
				jreasons += std::string(jreasons.empty() ? "" : ",") + "\"" + name + "\":" + std::to_string(v);
			});
			const uint64_t app_tx = tot.data_sent + tot.acks_sent + tot.retransmits;
			const uint64_t app_rx = tot.data_recv + tot.acks_recv + tot.dropped + tot.bad_msgs + j.held_overflow;
			const bool tx_ok = app_tx == q.tx_pkts + tot.tx_refused + q.tx_drops();
			const bool rx_ok = q.rx_pkts == app_rx;
			const bool arp_ok = !procs || arp_matched == nranks - 1;
			const bool closed = tx_ok && rx_ok && leaked == 0;
			printf("  port: sent %lu  received %lu  rx drops %lu  tx drops %lu  missed by the port %lu  "
			       "held before start %lu (overflow %lu)\n",
			       (unsigned long)q.tx_pkts, (unsigned long)q.rx_pkts, (unsigned long)q.rx_drops(),
			       (unsigned long)q.tx_drops(), (unsigned long)imissed, (unsigned long)j.held_total,
			       (unsigned long)j.held_overflow);
			printf("  port counters:%s\n", reasons.empty() ? " (none other than sent/received)" : reasons.c_str());
			if (procs)
				printf("  neighbours: %u/%u resolved by ARP to the MAC the peer published\n", arp_matched,
				       nranks - 1);
			const poll_idle_stats &is = j.idle.stats();
			printf("  idle %s (after %u empty polls, naps up to %u us): empty polls %lu  yields %lu  sleeps %lu  "
			       "asked to sleep %.1f ms\n",
			       idle_mode_name(j.idle.config().mode), c.idle_spins, c.idle_sleep_us, (unsigned long)is.empty,
			       (unsigned long)is.yields, (unsigned long)is.sleeps, double(is.slept_ns) / 1e6);
			printf("  accounting: app sent %lu = port sent %lu + refused %lu + tx drops %lu%s; port received "
			       "%lu = app received %lu + dropped %lu + bad %lu + held overflow %lu%s; mbufs in use after "
			       "stop %u (the port's own at start %u), leaked %u: %s\n",
			       (unsigned long)app_tx, (unsigned long)q.tx_pkts, (unsigned long)tot.tx_refused,
			       (unsigned long)q.tx_drops(), tx_ok ? "" : " (NO)", (unsigned long)q.rx_pkts,
			       (unsigned long)(tot.data_recv + tot.acks_recv), (unsigned long)tot.dropped,
			       (unsigned long)tot.bad_msgs, (unsigned long)j.held_overflow, rx_ok ? "" : " (NO)", in_use,
			       pmd_held, leaked, closed ? "closed" : "OPEN");
			snprintf(b, sizeof(b),
				 ",\"port\":{\"sent\":%lu,\"received\":%lu,\"rx_drops\":%lu,\"tx_drops\":%lu,\"imissed\":%lu,"
				 "\"held\":%lu,\"held_overflow\":%lu,\"counters\":{",
				 (unsigned long)q.tx_pkts, (unsigned long)q.rx_pkts, (unsigned long)q.rx_drops(),
				 (unsigned long)q.tx_drops(), (unsigned long)imissed, (unsigned long)j.held_total,
				 (unsigned long)j.held_overflow);
			js += b;
			js += jreasons;
			snprintf(b, sizeof(b),
				 "}},\"idle\":{\"mode\":\"%s\",\"spins\":%u,\"sleep_us\":%u,\"empty\":%lu,\"yields\":%lu,"
				 "\"sleeps\":%lu},\"arp_matched\":%u,\"mbufs_in_use\":%u,\"mbufs_port_held\":%u,\"mbufs_leaked\":%u,"
				 "\"accounting\":\"%s\"",
				 idle_mode_name(j.idle.config().mode), c.idle_spins, c.idle_sleep_us, (unsigned long)is.empty,
				 (unsigned long)is.yields, (unsigned long)is.sleeps, arp_matched, in_use, pmd_held, leaked,
				 closed ? "closed" : "open");
			js += b;
			if (!closed || !arp_ok)
				status = 1;
			if (!arp_ok)
				fprintf(stderr, "rdgram-coll: rank %u: only %u of %u peers resolved by ARP to their published MAC\n",
					my_rank, arp_matched, nranks - 1);
			if (j.timed_out.load())
				fprintf(stderr, "rdgram-coll: timed out after %.1f s\n", c.timeout_s);
			if (status != 0 || !all_fin || tot.verify_fail != 0 || tot.verified != uint64_t(c.iters) * nb_ops * j.ranks.size())
				status = 1;
			else
				printf("result: PASS\n");
			js += status == 0 ? ",\"result\":\"PASS\"}\n" : ",\"result\":\"FAIL\"}\n";
			if (!c.json.empty()) {
				/* Ranks of one launcher share the command line:
				 * {rank} in the name is this process's rank. */
				std::string path = c.json;
				if (const size_t at = path.find("{rank}"); at != std::string::npos)
					path.replace(at, 6, std::to_string(my_rank));
				FILE *f = path == "-" ? stdout : fopen(path.c_str(), "w");
				if (f == nullptr || fputs(js.c_str(), f) < 0 || (f != stdout && fclose(f) != 0)) {
					fprintf(stderr, "rdgram-coll: cannot write --json %s: %s\n", path.c_str(), strerror(errno));
					status = 1;
				}
			}
		}
		fflush(stdout);
	}
	rt.fini();
	return status;
}
