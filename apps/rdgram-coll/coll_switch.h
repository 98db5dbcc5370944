/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll threads mode's Ethernet switch in software: rank i's port is
 * a net_ring whose TX ring the switch drains into the RX ring of the rank
 * owning the destination MAC (coll_fabric.h wires the ports).
 */
#ifndef RDGRAM_COLL_SWITCH_H
#define RDGRAM_COLL_SWITCH_H

#include <cstdint>
#include <vector>

#include <rte_mbuf.h>
#include <rte_ring.h>

namespace rdgram::coll {

/* One switch port: a net_ring's ring pair (the rank's port is the other
 * end). */
struct sw_port {
	rte_ring *from = nullptr; /* frames the rank's port sent */
	rte_ring *to = nullptr;   /* frames for the rank's port */
	rte_mbuf *out[32];        /* frames for this port from the current input burst */
	unsigned nout = 0;
};

struct sw_stats {
	uint64_t forwarded, unknown_dst, full;
	uint64_t in_flight_at_stop; /* frames still in the switch's rings when the job stopped */
};

/* Threads mode's Ethernet switch (poll thread: no syscall, lock or
 * allocation). Destination MAC 02:00:00:c0:HH:LL is rank HH:LL; anything
 * else (broadcast: there is no ARP on this fabric) is dropped, counted. */
struct eth_switch {
	std::vector<sw_port> ports; /* index = rank */
	sw_stats st{};
	/* Returns whether any frame moved. */
	bool poll();
	/* Frees every frame still in the rings, either way (sent by a rank
	 * and not switched yet, or switched and not received yet), into
	 * st.in_flight_at_stop. (Once the poll lcore stopped.) */
	void drain();

private:
	void send(sw_port &out);
};

} // namespace rdgram::coll

#endif
