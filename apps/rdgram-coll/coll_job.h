/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll's job: what the poll threads work on (job: coll_poll.h's
 * loop), the main thread's side of it (job_ctl), and the phases: prepare
 * (before the EAL) and set up (coll_setup.cc), the exchange, the AH storm
 * and the collectives beside the running workers (coll_run.cc), close,
 * then the report (coll_report.cc). Everything after prepare is a
 * template on the driver's device type, instantiated for every driver
 * built (RDGRAM_COLL_DRIVERS) and picked once by main().
 */
#ifndef RDGRAM_COLL_JOB_H
#define RDGRAM_COLL_JOB_H

#include <atomic>
#include <functional>
#include <type_traits>
#include <utility>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <rte_ethdev.h>

#include "cli.h"
#include "coll_config.h"
#include "coll_fabric.h"
#include "job_bootstrap.h"
#include "rdgram/poll_idle.h"
#include "rdgram/runtime.h"

namespace rdgram::coll {

/* Datagrams a rank's queue received before its engine started (a peer
 * that finished its AH storm first): held, then handed to the engine. */
inline constexpr unsigned held_max = 1024;

/* One poll thread's share of the job: the local ranks it serves (threads
 * mode: rank r on worker r % workers; procs: the one rank), the switch
 * (worker 0, threads mode, soft), its idle policy and its own counters.
 * Written by its thread only while the workers run. */
struct worker_state {
	unsigned index = 0;
	lcore_cpu where{};
	std::vector<size_t> ranks; /* indices into job::ranks */
	bool polls_switch = false;
	poll_idle idle;
	uint64_t held_total = 0, held_overflow = 0;
	std::atomic<bool> done{false};      /* its ranks finished and quiet */
	std::atomic<bool> timed_out{false};
	char cpus[64] = {};                 /* the CPUs it runs on, read by itself once bound */
};

/* What the poll threads work on. */
template <class Dev> struct job {
	using queue_type = typename Dev::queue_type;
	const coll_config *c = nullptr;
	runtime *rt = nullptr;
	uint32_t nranks = 0;
	std::vector<std::unique_ptr<local_rank<Dev>>> ranks; /* local ranks */
	eth_switch sw;
	bool has_switch = false;
	std::vector<std::unique_ptr<worker_state>> workers;
	std::vector<std::vector<recv_wc>> held; /* per local rank, held_max reserved */
	std::atomic<bool> stop{false};
	std::atomic<bool> started{false}; /* engines set up (main thread) */
	uint64_t deadline = 0;            /* written before started */

	bool local_done() const
	{
		for (const auto &w : workers)
			if (!w->done.load(std::memory_order_acquire))
				return false;
		return true;
	}
	bool timed_out() const
	{
		for (const auto &w : workers)
			if (w->timed_out.load(std::memory_order_acquire))
				return true;
		return false;
	}
};

/* The main thread's side of the job (kept out of job, which the poll
 * threads read every loop). */
struct job_ctl {
	bool procs = false;
	uint32_t nranks = 0, my_rank = 0;
	std::unique_ptr<job_bootstrap> boot; /* procs */
	std::vector<std::string> eal;        /* the EAL's arguments */
	std::vector<rank_addr> table; /* every rank's address record */
	uint64_t t_start = 0;         /* TSC: the job's start (the start barrier's return) */
	double exchange_ms = 0;
	std::vector<double> storm_all, ahs_all; /* procs, rank 0: every rank's figures */
	std::function<void()> stop_workers;     /* while they run: stop them and wait */
	std::string main_cpus;                  /* the main lcore's thread's CPUs (this_thread_cpus) */
};

/* The counters of a driver's queue (stats.h's counter set). */
template <class Dev> using queue_counters = std::decay_t<decltype(std::declval<typename Dev::queue_type &>().counters())>;

/* What closing the local ranks left to report: their queues' and (soft)
 * ports' counters, the neighbours resolved, and the mbufs still out. */
template <class Dev> struct close_stats {
	std::vector<queue_counters<Dev>> qctr; /* per local rank */
	std::vector<rte_eth_stats> pstats;     /* per local rank (soft; zero otherwise) */
	unsigned arp_matched = 0, in_use = 0, pmd_held = 0, leaked = 0;
};

/* Before the EAL starts: procs mode's bootstrap (rank, size) and the
 * EAL's arguments for this rank; threads mode's rank limit. 0 or 2
 * (printed). (Main thread.) */
int prepare_job(const coll_config &c, const cli::parser &app, std::vector<std::string> eal, job_ctl *k);

/* The whole job on driver Dev once the runtime is up: set up, the
 * workers and what runs beside them (the exchange, the AH storm, the
 * collectives, procs: the end barrier), close, report. The process's
 * exit status: 0, 1 or 2 (printed). (Main thread.) */
template <class Dev> int run_job(const coll_config &c, runtime &rt, job_ctl &k);

/* The poll threads' lcores and the fabric (procs: this rank's device;
 * threads: every rank's). 0, 1 or 2 (printed). (Main thread.) */
template <class Dev> int set_up_job(const coll_config &c, runtime &rt, job<Dev> &j, job_ctl &k);

/* Beside the running workers: the address exchange (procs) or the
 * table of the ranks here (threads), the AH storm and its table,
 * then the collectives. 0 or 1 (printed). */
template <class Dev> int run_phases(const coll_config &c, job<Dev> &j, job_ctl &k);

/* The AH storm: every local rank at once (one thread each, as N
 * processes would at job start). 0, or 1 when a rank did not create all
 * of its AHs. */
template <class Dev> int run_storm(job<Dev> &j, job_ctl &k);

/* The collectives on the poll threads, until every local rank is done or
 * the deadline; procs: then the end barrier, which gathers every rank's
 * storm figures at rank 0. 0 or 1 (printed). */
template <class Dev> int run_collectives(const coll_config &c, job<Dev> &j, job_ctl &k);

/* Drains the switch and closes every local rank, counting what is left
 * (the workers stopped). status: the job's so far (procs: the neighbour
 * check runs only on success). (Main thread.) */
template <class Dev> close_stats<Dev> close_job(runtime &rt, job<Dev> &j, job_ctl &k, int status);

/* From t_start (TSC) to the end of lr's AH storm, ms. */
template <class Dev> double ahs_ms(const local_rank<Dev> &lr, uint64_t t_start);

/* The AH storm's table (every local rank's time) on stdout. */
template <class Dev> void print_storm(const coll_config &c, job<Dev> &j, const job_ctl &k);

/* The results on stdout (and --json): each collective's latency, the
 * counters and the accounting that must close for every worker. 0 for
 * PASS, else 1. (Main thread, the job closed.) */
template <class Dev> int report_job(const coll_config &c, job<Dev> &j, const job_ctl &k, const close_stats<Dev> &cs);

} // namespace rdgram::coll

#endif
