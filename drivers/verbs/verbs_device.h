/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/verbs control path: any rdma-core provider (mlx5, efa in UD
 * mode, rxe, ...) through libibverbs. It opens a device by name, or the
 * first with an active port; allocates a PD; reads the port facts the AH
 * layer needs (link layer, GRH requirement, the typed GID table, max_ah,
 * active MTU, P_Key 0, LID, NUMA node); creates and destroys AHs with
 * ibv_create_ah / ibv_destroy_ah in an ah_table of ibv_ah pointers;
 * owns a mempool and registers it and any other a queue sends from (one
 * MR per memory chunk); and builds UD queues: two
 * CQs and a UD QP through INIT, RTR and RTS. The data path is in
 * verbs_datapath.h.
 *
 * Threads: open/close on the main or control thread; create_ah,
 * destroy_ah, reclaim and poll on the control thread (ibv_create_ah may
 * sleep: on RoCE the kernel resolves the neighbour, up to ~1 s on ARP);
 * register_mempool and create_queue/destroy_queue on the control path,
 * before and after the queue's poll thread runs.
 *
 * Not run on an RDMA device yet: this machine has none (see
 * tests/hw/test_verbs_hw.cc, which skips without one).
 */
#ifndef RDGRAM_VERBS_DEVICE_H
#define RDGRAM_VERBS_DEVICE_H

#include <deque>
#include <string>
#include <vector>

#include <hwloc.h>
#include <infiniband/verbs.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>

#include "rdgram/device.h"
#include "rdgram/queue_params.h"
#include "verbs_datapath.h"
#include "verbs_logic.h"

namespace rdgram::verbs {

struct verbs_config {
	std::string device;          /* ibv device name; empty: the first with an active port */
	uint8_t port_num = 0;        /* physical port; 0: the first active one */
	uint32_t max_ah = 65536;     /* AH table size (capped by the device's max_ah) */
	rte_rcu_qsbr *qsbr = nullptr; /* poll threads' QSBR (runtime::qsbr) */
	std::vector<int> av_nodes;   /* NUMA nodes of the poll threads; empty: the device's */
	hwloc_topology_t topology = nullptr; /* for the device's local CPUs; nullptr: skip */
	/* The device's mempool (device.h): every queue's receive buffers and
	 * copies of large inline sends, registered at open. nullptr: open
	 * makes one of nb_mbufs on the device's NUMA node, data room headroom
	 * + 40 (GRH) + the active MTU, and close frees it; given: the caller
	 * keeps it (its data room must be at least that). */
	rte_mempool *pool = nullptr;
	uint32_t nb_mbufs = 8191;
	/* Defaults of every queue (queue_params 0 takes these). */
	uint32_t qkey = 0x11111111;  /* perftest's and ibv_ud_pingpong's */
	uint32_t sq_psn = 0;
	uint32_t sq_depth = 512;     /* send WRs in flight */
	uint32_t rq_depth = 1024;    /* receive WRs posted */
	uint32_t max_inline = 64;    /* requested cap.max_inline_data (the QP may give less or more) */
	uint32_t signal_every = 32;  /* one signalled send in N (UCX and eRPC use 64) */
	uint32_t recv_batch = 32;    /* receive WRs per ibv_post_recv */
};

/* A device with an active port, found without opening the EAL: the
 * hardware suite's skip test. true and *name / *port when one exists;
 * false with *why otherwise. */
bool find_active_port(const std::string &want, std::string *name, uint8_t *port, std::string *why);

class verbs_device final : public device {
public:
	verbs_device() = default;
	~verbs_device() override;
	verbs_device(const verbs_device &) = delete;
	verbs_device &operator=(const verbs_device &) = delete;

	/* Opens the device, allocates the PD, reads the port facts, makes
	 * or takes the mempool and registers it, and allocates the AH table.
	 * 0 or an errno value (ENODEV: no such device or no active port;
	 * EINVAL: a given pool's buffers are too small); see error(). */
	int open(const verbs_config &cfg);
	/* Destroys every AH, deregisters every MR and frees the device's own
	 * mempool. Refused while queues are alive (error() says how many;
	 * destroy_queue them first): nothing is freed then. */
	void close();

	const char *driver_name() const override { return "verbs"; }
	const port_attr &port() const override { return attr_; }
	/* ibv_create_ah(3) on the control thread. rdgram numbers its one port
	 * 1: attr.port_num must be 1 (EINVAL otherwise) and becomes the
	 * physical port. EINVAL also for a missing GRH on a port that needs
	 * one and an sgid_index past the table; then whatever the provider
	 * says (errno of ibv_create_ah; ENOMEM when it sets none); ENOMEM when
	 * the AH table is full. */
	ah_handle create_ah(const ibv_ah_attr &attr, int *err) override;
	/* The handle goes stale at once (EINVAL for a stale or repeated
	 * destroy); ibv_destroy_ah runs after the poll threads' grace period,
	 * when no poll thread can still be posting a WR with the AH. */
	int destroy_ah(ah_handle h) override;
	void reclaim() override;
	uint32_t reclaim_pending() const override { return ahs_.retired_waiting(); }
	uint32_t live_ahs() const override { return ahs_.live(); }

	/* Registers every memory chunk of mp (IBV_ACCESS_LOCAL_WRITE), once
	 * per pool (0 when it is already). Queues created afterwards may send
	 * from it. 0 or errno. */
	int register_mempool(rte_mempool *mp);
	/* The queue contract (device.h, queue_params.h). */
	using queue_type = verbs_queue;
	/* Creates a UD QP with its two CQs, moves it to RTS, and attaches q
	 * (reading the AV replica of NUMA node p.socket) with receives from
	 * the device's mempool posted. Zero fields take verbs_config's
	 * defaults; p.index is a label. 0 or errno; EINVAL: signal_every above
	 * sq_depth, recv_batch above rq_depth or verbs_queue::max_burst;
	 * ENODEV: not open; EBUSY: q has a QP; then what the provider says.
	 * See error(). */
	int create_queue(const queue_params &p, verbs_queue &q);
	/* Moves the QP to the error state, frees what its completions return,
	 * destroys QP and CQs. No poll thread may use q any more. */
	void destroy_queue(verbs_queue &q);
	rte_mempool *mempool() const { return mp_; }
	/* Queues created and not yet destroyed. */
	uint32_t nb_queues() const { return nqueues_; }

	/* Every GID's type, index = sgid_index (port().gids keeps only the
	 * RoCEv2 entries on Ethernet, the IB ones on InfiniBand). */
	const std::vector<gid_kind> &gid_kinds() const { return kinds_; }
	/* OS indices of the CPUs local to the device (hwloc_ibv_get_device_
	 * cpuset); empty without a topology. Poll threads go there first
	 * (runtime::poll_lcores(port().numa_node) orders lcores by node). */
	const std::vector<unsigned> &local_cpus() const { return cpus_; }
	ibv_context *context() const { return ctx_; }
	ibv_pd *pd() const { return pd_; }
	uint8_t port_num() const { return port_; }
	const std::string &name() const { return name_; }
	const std::string &error() const { return err_; }
	const ah_table<verbs_av> &ahs() const { return ahs_; }
	/* ibv_destroy_ah failures at reclaim (the AH is forgotten). */
	uint64_t ah_destroy_errors() const { return destroy_errors_; }

private:
	int query_port(int numa);

	struct retired {
		ibv_ah *ah;
		uint64_t token;
	};
	struct pool_mrs {
		rte_mempool *mp;
		std::vector<ibv_mr *> mrs;
	};

	verbs_config cfg_{};
	ibv_context *ctx_ = nullptr;
	ibv_pd *pd_ = nullptr;
	uint8_t port_ = 0;
	std::string name_;
	port_attr attr_{};
	std::vector<gid_kind> kinds_;
	std::vector<unsigned> cpus_;
	ah_table<verbs_av> ahs_;
	std::vector<ibv_ah *> live_;   /* per slot, the control thread's own record */
	std::deque<retired> retired_;
	std::vector<pool_mrs> pools_;
	lkey_map mrs_;
	rte_mempool *mp_ = nullptr;
	bool own_mp_ = false;
	uint32_t nqueues_ = 0;
	uint64_t destroy_errors_ = 0;
	std::string err_;
};

} // namespace rdgram::verbs

#endif
