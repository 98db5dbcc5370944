/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd's counters as a table (stdout) and as JSON (--stats-json):
 * per port (ethdev statistics and every named counter of the driver),
 * per local QP (the application's counters and its reply path's), per
 * worker, per rule, and totals whose drops are listed by reason, so that
 *   frames received = delivered + handed to the control thread + driver drops
 *   delivered       = sent + waiting + dropped (app, reply path, driver TX)
 * can be checked from the file alone, for each worker and summed.
 */
#ifndef RDGRAM_FWD_REPORT_H
#define RDGRAM_FWD_REPORT_H

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <rte_ethdev.h>

#include "fwd_config.h"
#include "fwd_loop.h"
#include "soft_neigh.h"

namespace rdgram::fwd {

struct port_report {
	const port_config *cfg;
	uint16_t port_id;
	std::string device;        /* what the port is: devargs, or the RDMA device */
	bool have_eth;             /* soft: the ethdev's statistics */
	rte_eth_stats eth;
	ah_service_stats ahs;      /* the control thread's side of the AH path */
	bool have_neigh;           /* soft: ARP/ND */
	soft::neigh_stats neigh;   /* learned senders, replies sent */
	/* At exit, once the queues are closed: mbufs still out of the port's
	 * pool (close_queues); -1 while running. */
	int64_t mbufs_out = -1;
};

/* One worker as the report shows it: where it ran, why it stopped, and
 * the copy of its counters its poll thread took. */
struct worker_view {
	unsigned lcore, cpu;
	const char *why;
	const snapshot *snap;
};

/* Writes the report as JSON to f: per port (ethdev, AH service, the
 * driver's counters summed over the workers' queues, every QP with its
 * worker), per worker (its queues' counters and its own totals, which
 * close by themselves), per rule, and the totals. */
void write_json(FILE *f, const fwd_config &c, const std::vector<worker_view> &w,
		const std::vector<port_report> &ports, const char *why);
/* Prints the report as a table to f. */
void print_table(FILE *f, const fwd_config &c, const std::vector<worker_view> &w,
		 const std::vector<port_report> &ports, const char *why);

/* The table on stdout and, with --stats-json, the same as JSON (written to
 * a temporary file and renamed, so a reader never sees half a file). 0, or
 * 1 when the file could not be written (printed). */
int report(const fwd_config &c, const std::vector<worker_view> &w, const std::vector<port_report> &pr,
	   const char *why);

} // namespace rdgram::fwd

#endif
