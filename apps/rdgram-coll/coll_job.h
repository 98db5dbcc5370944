/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll's job: what the poll lcore works on (job: coll_poll.h's
 * loop), the main thread's side of it (job_ctl), and the phases main()
 * runs: prepare and set up (coll_setup.cc), the AH storm and the
 * collectives (coll_run.cc), close, then the report (coll_report.cc).
 */
#ifndef RDGRAM_COLL_JOB_H
#define RDGRAM_COLL_JOB_H

#include <atomic>
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

/* What the poll lcore works on. */
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

/* The main thread's side of the job (kept out of job, which the poll
 * lcore reads every loop). */
struct job_ctl {
	bool procs = false;
	uint32_t nranks = 0, my_rank = 0;
	std::unique_ptr<job_bootstrap> boot; /* procs */
	std::vector<std::string> eal;        /* the EAL's arguments */
	bool worker_up = false;
	std::vector<rank_addr> table; /* every rank's address record */
	uint64_t t_start = 0;         /* TSC: the job's start (the start barrier's return) */
	double exchange_ms = 0;
	std::vector<double> storm_all, ahs_all; /* procs, rank 0: every rank's figures */
};

/* What closing the local ranks left to report: their queues' and ports'
 * counters, the neighbours resolved, and the mbufs still out. */
struct close_stats {
	std::vector<soft::soft_counters> qctr;
	std::vector<rte_eth_stats> pstats;
	unsigned arp_matched = 0, in_use = 0, pmd_held = 0, leaked = 0;
};

/* Before the EAL starts: procs mode's bootstrap (rank, size) and the
 * EAL's arguments for this rank; threads mode's rank limit. 0 or 2
 * (printed). (Main thread.) */
int prepare_job(const coll_config &c, const cli::parser &app, std::vector<std::string> eal, job_ctl *k);

/* The poll lcore, the fabric, the address exchange; the poll lcore runs
 * from here on. 0, 1 or 2 (printed). (Main thread.) */
int set_up_job(const coll_config &c, runtime &rt, job &j, job_ctl &k);

/* Starts and stops the poll lcore (coll_poll.h). (Main thread.) */
int start_worker(job &j, job_ctl &k);
void stop_worker(job &j, job_ctl &k);

/* The AH storm: every local rank at once (one thread each, as N
 * processes would at job start). 0, or 1 when a rank did not create all
 * of its AHs. (Main thread.) */
int run_storm(job &j, job_ctl &k);

/* The collectives on the poll lcore, until every local rank is done or
 * the deadline; procs: then the end barrier, which gathers every rank's
 * storm figures at rank 0. 0 or 1 (printed). (Main thread.) */
int run_collectives(const coll_config &c, job &j, job_ctl &k);

/* Stops the poll lcore, drains the switch, and closes every local rank,
 * counting what is left. status: the job's so far (procs: the neighbour
 * check runs only on success). (Main thread.) */
close_stats close_job(runtime &rt, job &j, job_ctl &k, int status);

/* From t_start (TSC) to the end of lr's AH storm, ms. */
double ahs_ms(const local_rank &lr, uint64_t t_start);

/* The AH storm's table (every local rank's time) on stdout. */
void print_storm(const coll_config &c, job &j, const job_ctl &k);

/* The results on stdout (and --json): each collective's latency, the
 * counters and the accounting that must close in every process. 0 for
 * PASS, else 1. (Main thread, the job closed.) */
int report_job(const coll_config &c, job &j, const job_ctl &k, const close_stats &cs);

} // namespace rdgram::coll

#endif
