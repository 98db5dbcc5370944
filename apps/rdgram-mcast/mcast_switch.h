/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast: the in-process L2 switch of --mode both. The publisher and
 * every subscriber have a net_ring port each, with a ring pair per queue
 * (one per worker); the switch holds the other end of their rings. Every
 * frame the publisher's port sends, on any queue, is copied to every
 * subscriber port (flooding, as a switch without IGMP snooping does), onto
 * the receive ring its destination MAC's low byte picks (as a NIC's RSS
 * spreads by a hash, knowing nothing of QPs: a frame may land on a queue
 * whose worker has no member of its group, and the soft driver hands it
 * on); the frames subscribers send (their IGMP/MLD reports) are decoded
 * (mcast_igmp.h) and counted. Set-up is in mcast_switch.cc; forward(), the
 * per-burst part, is here.
 */
#ifndef RDGRAM_MCAST_SWITCH_H
#define RDGRAM_MCAST_SWITCH_H

#include <cstdint>
#include <vector>

#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "mcast_igmp.h"

namespace rdgram::mcast {

class flood_switch {
public:
	/* Set-up (main thread, before the poll threads run). Each makes a
	 * net_ring port with nq RX/TX queue pairs and returns its DPDK port
	 * id, or -1 with the reason printed. The publisher's port first, then
	 * subscriber 0, 1, ... */
	int add_publisher_port(uint16_t nq);
	int add_subscriber_port(uint16_t nq);
	/* The pool the copies to subscriber k come from (its device's). */
	void set_copy_pool(size_t k, rte_mempool *mp) { sub_pool_[k] = mp; }

	/* One turn: the publisher's frames flooded, the subscribers' frames
	 * decoded and freed. true when it moved a frame. (NOT multi-thread
	 * safe: one poll thread, worker 0's; each ring has one producer and
	 * one consumer.) */
	bool forward()
	{
		bool work = false;
		void *objs[64];
		for (rte_ring *tx : pub_tx_) {
			const unsigned n = rte_ring_sc_dequeue_burst(tx, objs, 64, nullptr);
			for (unsigned i = 0; i < n; i++) {
				auto *m = static_cast<rte_mbuf *>(objs[i]);
				/* byte 5: the low byte of the destination MAC */
				const unsigned q = rte_pktmbuf_mtod(m, const uint8_t *)[5] % nq_;
				for (size_t k = 0; k < sub_rx_.size(); k++) {
					rte_mbuf *cp = rte_pktmbuf_copy(m, sub_pool_[k], 0, UINT32_MAX);
					if (cp == nullptr || rte_ring_sp_enqueue(sub_rx_[k][q], cp) != 0) {
						rte_pktmbuf_free(cp);
						copy_fail_++;
					}
				}
				rte_pktmbuf_free(m);
			}
			work |= n != 0;
		}
		for (size_t k = 0; k < sub_tx_.size(); k++)
			for (rte_ring *tx : sub_tx_[k]) {
				const unsigned t = rte_ring_sc_dequeue_burst(tx, objs, 64, nullptr);
				for (unsigned i = 0; i < t; i++) {
					auto *m = static_cast<rte_mbuf *>(objs[i]);
					classify(rte_pktmbuf_mtod(m, const uint8_t *), rte_pktmbuf_data_len(m), seen_[k]);
					rte_pktmbuf_free(m);
				}
				work |= t != 0;
			}
		return work;
	}

	/* Read once the poll thread stopped. */
	const membership_seen &seen(size_t k) const { return seen_[k]; }
	size_t subscribers() const { return seen_.size(); }
	uint64_t copy_failures() const { return copy_fail_; } /* mbuf pool or ring full */

private:
	unsigned nq_ = 1;                              /* queue pairs per port */
	std::vector<rte_ring *> pub_tx_;               /* what the publisher's port sends, per queue */
	std::vector<std::vector<rte_ring *>> sub_rx_;  /* what each subscriber port receives, per queue */
	std::vector<std::vector<rte_ring *>> sub_tx_;  /* what each subscriber port sends, per queue */
	std::vector<rte_mempool *> sub_pool_;  /* copies to subscriber k */
	std::vector<membership_seen> seen_;
	uint64_t copy_fail_ = 0;
};

} // namespace rdgram::mcast

#endif
