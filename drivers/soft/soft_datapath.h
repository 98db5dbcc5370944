/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft data path: RoCEv2 UD in software over one DPDK ethdev queue.
 * This header gathers the files that hold it, each one thing:
 *   soft_av.h       the AV: a destination's prebuilt Eth/IP/UDP headers
 *   soft_queue.h    the queue's state: QPs, multicast groups, port facts,
 *                   counters, the TX stash
 *   soft_tx.h       tx_burst: build, ICRC, hand to the port
 *   soft_rx.h       rx_burst: validate, deliver in verbs' layout, hand
 *                   ARP/ND to the control thread and send its frames
 *   (here)          tx_loopback: a send to this port, built and received
 *   soft_queue.cc   attach, QPs, multicast attachment (set-up, out of line)
 * Everything a poll thread runs per packet is inline in the headers.
 */
#ifndef RDGRAM_SOFT_DATAPATH_H
#define RDGRAM_SOFT_DATAPATH_H

#include "rdgram/ud.h"
#include "soft_av.h"
#include "soft_queue.h"
#include "soft_rx.h"
#include "soft_tx.h"

namespace rdgram::soft {

static_assert(ud_driver<soft_queue>);

/* Both halves of the data path: here, where both are defined. */
inline bool soft_queue::tx_loopback(const send_wr &wr, recv_wc &wc)
{
	rte_mbuf *m = (wr.flags & send_inline) ? rte_pktmbuf_alloc(mp_) : wr.mbuf;
	if (unlikely(m == nullptr)) {
		ctr_.tx_no_mbuf++;
		return false;
	}
	if (unlikely(!build(wr, qps_[sq_], m))) {
		rte_pktmbuf_free(m);
		return false;
	}
	if (likely(parse(m, wc)))
		return true;
	if (!handed_to_control())
		rte_pktmbuf_free(m);
	return false;
}

} // namespace rdgram::soft

#endif
