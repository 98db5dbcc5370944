/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The verbs driver's counters beyond the generic ones (rdgram/stats.h for
 * the kinds and the rule). A send completion in error stands for its WR
 * and the unsignalled WRs before it (selective signalling), and the QP has
 * left RTS: it is counted once, as a drop; look at the QP then.
 */
#ifndef RDGRAM_VERBS_COUNTERS_H
#define RDGRAM_VERBS_COUNTERS_H

#include "rdgram/stats.h"

namespace rdgram::verbs {

/* X(name, kind, description). */
#define RDGRAM_VERBS_COUNTERS(X)                                                                      \
	X(tx_no_mbuf, event, "bursts cut short: no mbuf to copy a long inline payload into")           \
	X(rx_bad_length, drop, "receive completion shorter than the GRH area or longer than its buffer (freed)")     \
	X(rx_wc_errors, drop, "receive completion with an error status; its buffer back to the pool")  \
	X(tx_wc_errors, drop,                                                                          \
	  "send completion with an error status; the QP left RTS (it and the unsignalled WRs before " \
	  "it may be lost)")                                                                           \
	X(tx_completions, event, "signalled (or error) send completions")                              \
	X(tx_post_refused, event,                                                                      \
	  "ibv_post_send calls that refused part of a chain; the refused WRs went back to the caller") \
	X(rx_post_errors, event, "ibv_post_recv calls that refused part of a batch (buffers freed)")   \
	X(rx_no_mbuf, event, "receive refills cut short: mempool empty")                               \
	X(rx_unregistered, event, "receive buffers outside registered memory (freed, not posted)")     \
	X(cq_poll_errors, event, "ibv_poll_cq returned an error")                                      \
	X(rx_unknown_wr, event, "receive completions for a buffer this queue did not post (not freed)") \
	X(rx_reclaimed, event, "receive buffers freed at teardown, never completed (no flush)")

struct verbs_counters : qp_counters {
	RDGRAM_COUNTER_SET(verbs_counters, "verbs", RDGRAM_VERBS_COUNTERS)
};

} // namespace rdgram::verbs

#endif
