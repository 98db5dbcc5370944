/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll's fabric: where each rank's soft RoCEv2 device sends its
 * frames, and the rank's device, QP and AH service on it (set-up: main
 * thread, before the poll lcore runs; the switch's data path is
 * coll_switch.h).
 *
 *   threads  all ranks in one process; rank i's port is a net_ring whose TX
 *            ring an Ethernet switch in software (eth_switch) drains into
 *            the RX ring of the rank owning the destination MAC. Every
 *            rank's MAC is fixed by its rank, so the peers are static
 *            neighbours.
 *   procs    one rank per process on a real DPDK port the user names
 *            (--port: a vdev such as net_af_packet0,iface=veth3, or a NIC
 *            given to the EAL). The fabric is whatever that port is
 *            plugged into (a Linux bridge, a switch); peers' MACs are
 *            resolved by the soft driver's own ARP/ND through it, never
 *            taken from the address exchange.
 */
#ifndef RDGRAM_COLL_FABRIC_H
#define RDGRAM_COLL_FABRIC_H

#include <cstdint>
#include <string>
#include <vector>

#include <rte_ether.h>
#include <rte_ring.h>

#include "bootstrap.h"
#include "coll_config.h"
#include "coll_engine.h"
#include "coll_switch.h"
#include "rdgram/ah_service.h"
#include "rdgram/runtime.h"
#include "soft_device.h"

namespace rdgram::coll {

inline constexpr uint32_t qpn_base = 0x1000;

/* Rank r's GID: IPv4 10.200.x.y with x.y = r + 1 (procs mode too: every
 * rank of a job on one L2 segment has its own address). */
wire::gid gid_of(uint32_t r);
/* Threads mode: rank r's MAC 02:00:00:c0:HH:LL (the switch's table). */
rte_ether_addr mac_of(uint32_t r);

using rank_t = coll_rank<soft::soft_queue>;

/* What one rank owns in this process. */
struct local_rank {
	uint32_t rank = 0;
	uint16_t port = 0;
	bool port_probed = false; /* procs: the vdev is ours to remove */
	unsigned pmd_held = 0;    /* mbufs the port's queues held at start */
	bool opened = false;      /* the device opened: its port runs */
	soft::soft_device dev;
	soft::soft_queue q;
	ah_service svc;
	bool svc_up = false;
	std::vector<ah_handle> ahs;
	double storm_ms = 0;
	uint64_t storm_end = 0; /* TSC when this rank held AHs to all peers */
	unsigned storm_ok = 0;
	int storm_err = 0;
	unsigned arp_matched = 0; /* procs: peers whose resolved MAC is the one they published */
	rank_t eng;
};

/* Threads mode: rank r's net_ring port, wired into sw. 0 or 1 (printed). */
int make_ring_port(eth_switch &sw, uint32_t r, int node, uint16_t *port);

/* procs: the rank's port from --port (devargs; "{rank}" is replaced by the
 * rank): an existing port of that name (given to the EAL with --vdev or
 * -a) or a vdev probed here. 0 or 1 (printed). */
int open_user_port(const std::string &devargs, uint32_t rank, uint16_t *port, bool *probed);

/* Opens lr's device on lr.port and starts its AH service. statics: the
 * peers' static neighbours (threads mode); empty: ARP/ND resolves them
 * (procs). 0 or 1 (printed). */
int open_rank(const coll_config &c, runtime &rt, uint32_t nranks, local_rank &lr,
	      const std::vector<rank_addr> &statics, int node);

/* lr's address record: GID, QPN, Q_Key, and the MAC its port uses. */
rank_addr rank_record(const coll_config &c, const local_rank &lr);

/* The AH storm of one rank: AHs to every peer in one create_ah_batch
 * (resolving their MACs first where the device resolves). (Any thread but
 * the poll and control threads.) */
void storm(local_rank &lr, const std::vector<rank_addr> &table);

/* procs: how many peers' neighbour entries hold the MAC they published.
 * (Main thread; runs on the control thread.) */
unsigned count_arp_matches(runtime &rt, local_rank &lr, const std::vector<rank_addr> &table);

/* Stops and closes lr's device and service, and its port if it probed
 * one. in_use: the mbufs of its pool still out once the port stopped (or
 * closed), the port's own included: at most lr.pmd_held, what its queues
 * took at start (net_af_xdp keeps its fill queue's until the pool goes).
 * (Main thread, poll lcore stopped.) */
void close_rank(local_rank &lr, unsigned *in_use);

} // namespace rdgram::coll

#endif
