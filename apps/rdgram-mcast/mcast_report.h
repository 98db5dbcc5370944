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
	std::string rx_events;       /* " name=value" for every non-zero receive event (hand-offs, copies) */
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
		if (n.kind == counter_kind::event && n.rx() && v != 0)
			t.rx_events += std::string(" ") + n.name + "=" + std::to_string(v);
	});
	return t;
}

/* One publisher worker's part of the report. */
struct pub_report {
	const pub_state *p = nullptr;
	queue_totals q;
	unsigned lcore = 0;
};

/* One subscriber's part on one worker. */
struct sub_worker_report {
	sub_state *s = nullptr;
	queue_totals q;
	unsigned lcore = 0;
	std::vector<uint32_t> groups; /* the group indices its QP attached */
	/* The publisher's messages to those groups (its queues took them,
	 * duplicates included); UINT64_MAX without a publisher in the
	 * process. */
	uint64_t published = UINT64_MAX;
};

/* One subscriber's part of the report: its workers', and its own. */
struct sub_report {
	std::vector<sub_worker_report> w; /* per worker */
	/* The soft driver's IGMP/MLD frames (absent on verbs: the kernel
	 * sends them, rdma_cm on RoCE). */
	bool has_sent = false;
	soft::soft_device::mcast_stats sent{};
	const membership_seen *seen = nullptr; /* --mode both: the switch's view */
	uint64_t handoff_freed = 0;            /* frames handed between its queues, never taken */
};

/* One status line per role and worker on stderr; last_rx ([k * workers +
 * w]) and last_tsc carry the previous line's figures. subs[k][w].
 * (Main thread or the watch thread.) */
void print_status(const mcast_config &c, const std::vector<const pub_state *> &pubs,
		  const std::vector<std::vector<const sub_state *>> &subs, uint64_t hz, uint64_t start, uint64_t now,
		  std::vector<uint64_t> &last_rx, uint64_t &last_tsc);

/* The final report on stdout: with one worker as it always was; with
 * several, each worker's lines (sub0/w1: ..., its accounting) and then
 * the subscriber's sums in the one-worker format. pubs: empty without a
 * publisher; switch_copy_fail: copies the switch could not make (--mode
 * both). Returns the exit status: 0, 1 (a CSV could not be written) or 3
 * (the plot failed). (Main thread, after the workers stopped.) */
int report(const mcast_config &c, const std::vector<pub_report> &pubs, std::vector<sub_report> &subs,
	   uint64_t switch_copy_fail);

} // namespace rdgram::mcast

#endif
