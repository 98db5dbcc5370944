/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The EFA driver's counters beyond the generic ones (rdgram/stats.h for
 * the kinds and the rule). Every send is signalled, so a send completion
 * in error is one lost message.
 */
#ifndef RDGRAM_EFA_COUNTERS_H
#define RDGRAM_EFA_COUNTERS_H

#include "rdgram/stats.h"

namespace rdgram::efa {

/* X(name, kind, description). */
#define RDGRAM_EFA_COUNTERS(X)                                                                       \
	X(tx_no_mbuf, event, "bursts cut short: no mbuf to copy a long inline payload into")          \
	X(rx_bad_length, drop, "receive completion shorter than the GRH area or above the MTU (freed)") \
	X(tx_post_lost, drop,                                                                         \
	  "send WRs accepted and lost: ibv_wr_complete refused the batch (mbufs freed)")              \
	X(tx_cqe_errors, drop, "send completions with an error status")                               \
	X(rx_cqe_errors, drop, "receive completions with an error status (buffer freed)")             \
	X(rx_post_errors, event, "receive buffers ibv_post_recv refused (freed, not posted)")         \
	X(rx_no_mbuf, event, "receive refills cut short: mempool empty")                              \
	X(rx_sgid_read, event, "receives from a sender without our AH, SGID read")                    \
	X(rx_sgid_unavailable, event, "receives from a sender without our AH, SGID not readable")

struct efa_counters : qp_counters {
	RDGRAM_COUNTER_SET(efa_counters, "efa", RDGRAM_EFA_COUNTERS)
};

} // namespace rdgram::efa

#endif
