/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-ah's modes (ah_modes.cc: what each measures) and their reports
 * (ah_report.cc: a table on stdout, or one JSON object with --json).
 */
#ifndef RDGRAM_AH_REPORT_H
#define RDGRAM_AH_REPORT_H

#include <cstdint>
#include <vector>

#include "ah_app.h"
#include "ah_host.h"

namespace rdgram::ahtool {

/* The registry's figures, read on the control thread. */
struct reg_summary {
	uint64_t live, capacity, unref, memory, created, reused, evicted, failed, device_live;
};

/* inspect: one registry entry. */
struct inspect_row {
	ah_key key;
	ah_handle h;
	uint32_t refs;
	bool have_neigh;
	soft::neigh_info n;
	std::vector<uint8_t> av; /* the AV's wire header template */
};

struct inspect_result {
	unsigned requested = 0, created = 0, released = 0;
	/* On a DPDK port: datagrams asked to the peer (one per AH created),
	 * handed to the AH client (sent, waiting or dropped there), and the
	 * datagrams the local QP received while they were answered. */
	uint32_t pinged = 0, ping_given = 0;
	uint64_t replies = 0;
	std::vector<inspect_row> rows; /* in slot order */
	reg_summary reg{};
};

struct bench_figure {
	const char *name;
	double per_s;
	unsigned ok;
};

/* bench: one poll thread's lookups. */
struct bench_worker {
	unsigned index, lcore;
	uint64_t lookups, hits;
	double per_s;
};

struct bench_result {
	uint32_t count = 0, dests = 0;
	uint64_t lookups = 0, hits = 0;
	std::vector<bench_figure> figures;
	std::vector<bench_worker> per_worker;
	reg_summary reg{};
};

/* storm: one poll thread's share of the readiness watch. */
struct storm_worker {
	unsigned index, lcore;
	uint32_t watched, seen, pending;
	uint64_t scans;
};

struct storm_result {
	uint32_t requested = 0, created = 0, dests = 0;
	bool all_ready = false;
	std::vector<double> ready_us;  /* each ready AH's readiness since the storm began, sorted */
	std::vector<unsigned> by_errno; /* failed creations per errno (index), 256 */
	double created_s = 0, all_ready_ms = 0;
	uint64_t scans = 0; /* the workers' passes over their pending keys, summed */
	std::vector<storm_worker> per_worker;
	reg_summary reg{};
};

/* Each poll thread's frames once they stopped. On the ring pair: what
 * its queue of each device sent (tx_pkts + tx_control) against what the
 * other device's queue of the same index took in (rx_pkts + rx_to_control
 * + rx drops) plus what was left in the ring between them. On a DPDK port
 * (on_port): what its queue sent against what the port took from it
 * (peer_in: the port's opackets of that queue; the port's total with one
 * queue), the control frames the port refused (left_lp: freed, named
 * tx_control_dropped), and what the port gave it (peer_sent: ipackets)
 * against what it took in (local_in). With it, the AH client's: messages
 * dropped by reason (ah_client_counters) and still waiting. */
struct worker_frames {
	unsigned index, lcore;
	uint64_t local_sent, peer_in, left_lp;
	uint64_t peer_sent, local_in, left_pl;
	bool closed;
	bool on_port;
	uint64_t client_drops, client_waiting;
};
/* (The workers stopped.) */
std::vector<worker_frames> worker_accounting(const host &h);

/* The modes (beside the running poll threads). Each returns 0, or 1 when
 * something failed (printed on stderr); bench 2 when it cannot run (the
 * capacity: nothing measured, nothing to report). */
int run_inspect(host &h, const std::vector<wire::gid> &dests, inspect_result *r);
int run_bench(host &h, bench_result *r);
int run_storm(host &h, uint32_t n, const std::vector<wire::gid> &dests, storm_result *r);

/* Reports on stdout: a table, or one JSON object with c.json; each with
 * the poll threads' frame accounting (wf). */
void print_inspect(const ah_app_config &c, const inspect_result &r, const std::vector<worker_frames> &wf);
void print_bench(const ah_app_config &c, const bench_result &r, const std::vector<worker_frames> &wf);
void print_storm(const ah_app_config &c, const storm_result &r, const std::vector<worker_frames> &wf);

} // namespace rdgram::ahtool

#endif
