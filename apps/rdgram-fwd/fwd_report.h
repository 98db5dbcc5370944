/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd's counters as a table (stdout) and as JSON (--stats-json):
 * per port (ethdev statistics and every named counter of the soft driver),
 * per local QP (the application's counters and its reply path's), per rule,
 * and totals whose drops are listed by reason, so that
 *   frames received = delivered + handed to the control thread + driver drops
 *   delivered       = sent + waiting + dropped (app, reply path, driver TX)
 * can be checked from the file alone.
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
#include "fwd_setup.h"
#include "soft_neigh.h"

namespace rdgram::fwd {

struct port_report {
	const port_config *cfg;
	uint16_t port_id;
	bool have_eth;
	rte_eth_stats eth;
	ah_service_stats ahs;      /* the control thread's side of the AH path */
	soft::neigh_stats neigh;   /* ARP/ND: learned senders, replies sent */
};

/* Writes the report as JSON to f. */
void write_json(FILE *f, const fwd_config &c, const snapshot &s, const std::vector<port_report> &ports,
		const char *why);
/* Prints the report as a table to f. */
void print_table(FILE *f, const fwd_config &c, const snapshot &s, const std::vector<port_report> &ports,
		 const char *why);

/* Port-level counters, read on the main thread: ethdev statistics, and the
 * AH service's and neighbour table's, which live on the control thread and
 * are copied there. */
std::vector<port_report> port_reports(runtime &rt, const fwd_config &c,
				      const std::vector<std::unique_ptr<port_rt>> &ports);

/* The table on stdout and, with --stats-json, the same as JSON (written to
 * a temporary file and renamed, so a reader never sees half a file). 0, or
 * 1 when the file could not be written (printed). */
int report(const fwd_config &c, const snapshot &s, const std::vector<port_report> &pr, const char *why);

} // namespace rdgram::fwd

#endif
