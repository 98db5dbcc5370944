/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/efa queue teardown (control path, out of line): release gives
 * every mbuf the slot tables still hold back to its pool and forgets the
 * QP and CQs, which efa_device::destroy_queue destroyed first.
 *
 * NEVER RUN ON HARDWARE: see efa_datapath.h.
 */
#include "efa_datapath.h"

#include <rte_mbuf.h>

namespace rdgram::efa {

void efa_queue::release()
{
	for (auto &m : tx_slot_)
		if (m != nullptr) {
			rte_pktmbuf_free(m);
			m = nullptr;
		}
	for (auto &m : rx_slot_)
		if (m != nullptr) {
			rte_pktmbuf_free(m);
			m = nullptr;
		}
	tx_slot_.clear();
	rx_slot_.clear();
	tx_free_.clear();
	rx_free_.clear();
	tx_nfree_ = rx_nfree_ = 0;
	tx_outstanding_ = 0;
	qp_ = nullptr;
	qpx_ = nullptr;
	scq_ = rcq_ = nullptr;
	dv_ = nullptr;
}

} // namespace rdgram::efa
