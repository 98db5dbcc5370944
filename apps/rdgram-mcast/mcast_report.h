/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast's output: the live status line (main thread, while the poll
 * thread runs, from its relaxed atomics) and the final report (after it
 * stopped): the publisher's line, each subscriber's counts, drops by
 * reason, latency percentiles, the membership frames the driver sent and
 * the switch saw, the histogram's CSV and plot.
 */
#ifndef RDGRAM_MCAST_REPORT_H
#define RDGRAM_MCAST_REPORT_H

#include <cstdint>
#include <string>
#include <vector>

#include "mcast_engine.h"
#include "soft_device.h"

namespace rdgram::mcast {

/* What the report reads of a queue's counters (stats.h), whatever the
 * driver. */
struct queue_totals {
	uint64_t tx_pkts = 0, tx_drops = 0, rx_drops = 0;
	std::string rx_drop_reasons; /* " name=value" for every non-zero receive drop */
};

template <ud_driver Q> queue_totals totals_of(const Q &q)
{
	queue_totals t;
	const auto &k = q.counters();
	t.tx_pkts = k.tx_pkts;
	t.tx_drops = k.tx_drops();
	t.rx_drops = k.rx_drops();
	k.for_each([&](const xstat_name &n, uint64_t v) {
		if (n.kind == counter_kind::drop && n.rx() && v != 0)
			t.rx_drop_reasons += std::string(" ") + n.name + "=" + std::to_string(v);
	});
	return t;
}

/* One subscriber's part of the report. */
struct sub_report {
	sub_state *s = nullptr;
	queue_totals q;
	/* The soft driver's IGMP/MLD frames (nullptr on verbs: the kernel
	 * sends them, rdma_cm on RoCE). */
	const soft::soft_device::mcast_stats *sent = nullptr;
	const membership_seen *seen = nullptr; /* --mode both: the switch's view */
};

/* One status line per role on stderr; last_rx and last_tsc carry the
 * previous line's figures. (Main thread.) */
void print_status(const mcast_config &c, const pub_state *pub, const std::vector<std::unique_ptr<sub_state>> &subs,
		  uint64_t hz, uint64_t start, uint64_t now, std::vector<uint64_t> &last_rx, uint64_t &last_tsc);

/* The final report on stdout. pub: nullptr without a publisher;
 * switch_copy_fail: copies the switch could not make (--mode both).
 * Returns the exit status: 0, 1 (a CSV could not be written) or 3 (the
 * plot failed). (Main thread, after the poll thread stopped.) */
int report(const mcast_config &c, const pub_state *pub, const queue_totals &pub_q, std::vector<sub_report> &subs,
	   uint64_t switch_copy_fail);

} // namespace rdgram::mcast

#endif
