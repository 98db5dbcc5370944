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

} // namespace rdgram::fwd

#endif
