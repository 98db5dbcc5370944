/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll's fabric: where each rank's device sends its frames, and
 * the rank's device, QP and AH service on it (set-up: main thread, before
 * the poll threads run; the switch's data path is coll_switch.h).
 *
 * Soft driver (each rank a soft RoCEv2 device on its own DPDK port):
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
 *
 * verbs, mlx5, EFA: each rank opens the RDMA device itself (its own
 * context, PD, QP and AH service); threads mode puts every rank of the
 * job on one device of this host (the device loops the datagrams back, as
 * rxe and a NIC do), procs mode one rank per process. The kernel or the
 * device resolves the peers' MACs; the address record carries GID and
 * QPN (the device's).
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
#include "driver.h"
#include "open_device.h"

namespace rdgram::coll {

/* Every driver this build has, for explicit instantiation of the job's
 * templates (X(device type)): the job is compiled once per driver, on its
 * queue type, and main() picks one (apps/common/driver.h). */
#if RDGRAM_HAVE_DRIVER_VERBS
#define RDGRAM_COLL_X_VERBS(X) X(::rdgram::verbs::verbs_device)
#else
#define RDGRAM_COLL_X_VERBS(X)
#endif
#if RDGRAM_HAVE_DRIVER_MLX5
#define RDGRAM_COLL_X_MLX5(X) X(::rdgram::mlx5::mlx5_device)
#else
#define RDGRAM_COLL_X_MLX5(X)
#endif
#if RDGRAM_HAVE_DRIVER_EFA
#define RDGRAM_COLL_X_EFA(X) X(::rdgram::efa::efa_device)
#else
#define RDGRAM_COLL_X_EFA(X)
#endif
#define RDGRAM_COLL_DRIVERS(X) X(::rdgram::soft::soft_device) RDGRAM_COLL_X_VERBS(X) RDGRAM_COLL_X_MLX5(X) RDGRAM_COLL_X_EFA(X)

inline constexpr uint32_t qpn_base = 0x1000;

/* Soft driver: rank r's GID, IPv4 10.200.x.y with x.y = r + 1 (procs
 * mode too: every rank of a job on one L2 segment has its own address).
 * The RDMA drivers use their port's GID (--gid-index) and the QPN the
 * device gave. */
wire::gid gid_of(uint32_t r);
/* Threads mode: rank r's MAC 02:00:00:c0:HH:LL (the switch's table). */
rte_ether_addr mac_of(uint32_t r);

/* What one rank owns in this process: on the soft driver its own port
 * and device; on verbs, mlx5 and EFA its own open of the RDMA device
 * (context, PD, QP), as a process of its own would have. */
template <class Dev> struct local_rank {
	using queue_type = typename Dev::queue_type;
	uint32_t rank = 0;
	unsigned worker = 0;      /* the poll thread that serves it (threads mode: rank % workers) */
	unsigned pmd_held = 0;    /* soft: mbufs the port's queues held at start */
	bool opened = false;      /* the device opened (soft: its port runs) */
	/* soft: its DPDK port with the device on it; the RDMA drivers: the
	 * device (apps/common/open_device.h). */
	apps::device_owner<Dev> owner;
	Dev &dev = apps::device_of<Dev>(owner);
	queue_type q;
	bool q_up = false;        /* q was created on dev */
	uint32_t qpn = 0;         /* its QP number */
	wire::gid gid{};          /* its address (the AHs' destination GID) */
	uint8_t sgid_index = 0;   /* RDMA drivers: the source GID index of its AHs */
	ah_service svc;
	bool svc_up = false;
	std::vector<ah_handle> ahs;
	double storm_ms = 0;
	uint64_t storm_end = 0; /* TSC when this rank held AHs to all peers */
	unsigned storm_ok = 0;
	int storm_err = 0;
	unsigned arp_matched = 0; /* procs: peers whose resolved MAC is the one they published */
	coll_rank<queue_type> eng;
};

/* Threads mode, soft: rank r's net_ring port, wired into sw, taken by
 * owner with [port]'s settings pc. 0 or 1 (printed). */
int make_ring_port(eth_switch &sw, uint32_t r, int node, const soft::port_config &pc, soft::port &owner);

/* procs, soft: the rank's port from [port] pc (its devargs: "{rank}" is
 * replaced by the rank): an existing port of that name (given to the EAL
 * with --vdev or -a) or a vdev probed here, taken by owner. 0 or 1
 * (printed). */
int open_user_port(const soft::port_config &pc, uint32_t rank, soft::port &owner);

/* Opens lr's device (soft: on lr.port), its queue with the rank's QP, and
 * starts its AH service. statics: the peers' static neighbours (soft,
 * threads mode); empty: ARP/ND resolves them (soft, procs). 0, 1 or 2
 * (printed; 2: a setting this driver cannot run). */
template <class Dev>
int open_rank(const coll_config &c, runtime &rt, uint32_t nranks, local_rank<Dev> &lr,
	      const std::vector<rank_addr> &statics, int node);

/* lr's address record: GID, QPN, Q_Key, and the MAC its port uses (soft;
 * zero on the RDMA drivers, whose kernel or device resolves it). */
template <class Dev> rank_addr rank_record(const coll_config &c, const local_rank<Dev> &lr);

/* The AH storm of one rank: AHs to every peer in one create_ah_batch
 * (resolving their MACs first where the device resolves). (Any thread but
 * the poll and control threads.) */
template <class Dev> void storm(local_rank<Dev> &lr, const std::vector<rank_addr> &table);

/* procs, soft: how many peers' neighbour entries hold the MAC they
 * published. (Main thread; runs on the control thread.) */
unsigned count_arp_matches(runtime &rt, local_rank<soft::soft_device> &lr, const std::vector<rank_addr> &table);

/* Stops and closes lr's AH service, queue and device (soft: and its port
 * if it probed one). in_use: the mbufs of its pool still out once the
 * queue is gone (soft: once the port stopped or closed, the port's own
 * included: at most lr.pmd_held, what its queues took at start;
 * net_af_xdp keeps its fill queue's until the pool goes). (Main thread,
 * poll threads stopped.) */
template <class Dev> void close_rank(local_rank<Dev> &lr, unsigned *in_use);

} // namespace rdgram::coll

#endif
