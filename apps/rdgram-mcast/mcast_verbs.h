/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast's set-up on the verbs driver (an RDMA device through
 * rdma-core): a UD queue per publisher and subscriber on one device, with
 * rdma_cm's UDP Q_Key; every group joined through rdma_cm
 * (verbs::rdmacm_group: a subscriber as a full member with its QP
 * attached, the publisher as a send-only member whose AHs come from the
 * join events). --mode both puts the publisher and --subscribers QPs on
 * the same device: the HCA delivers the group's datagrams to every
 * attached QP. With several workers every (role, worker) is a node of its
 * own: worker w's publisher joins and sends to the groups it owns, worker
 * w's subscriber QP joins the groups it takes (mcast.h: worker_takes), and
 * the HCA, not rdgram, gives each attached QP its copy. Built when drivers/verbs has librdmacm
 * (RDGRAM_MCAST_VERBS). The data path is mcast_engine.h's, on verbs_queue.
 */
#ifndef RDGRAM_MCAST_VERBS_H
#define RDGRAM_MCAST_VERBS_H

#include <memory>
#include <string>
#include <vector>

#include "mcast_fabric.h"
#include "mcast_switch.h"
#include "rdgram/runtime.h"
#include "soft_device.h"
#include "verbs_device.h"
#include "verbs_mcast.h"

namespace rdgram::mcast {

/* One publisher or subscriber: an RDMA device (with its own mempool), one
 * UD queue, its rdma_cm memberships. */
struct verbs_node {
	using queue_type = verbs::verbs_queue;
	std::string name;
	std::vector<uint32_t> groups; /* the group indices it joins */
	verbs::verbs_device dev;
	verbs::verbs_queue q;
	bool has_queue = false;
	std::vector<std::unique_ptr<verbs::rdmacm_group>> joins; /* one per group */
};

/* The run's queues and memberships on the verbs driver. (Main thread;
 * rdma-core's and rdma_cm's calls run on the control thread through
 * runtime::ctl().call.) */
class verbs_fabric : public fabric_nodes<verbs_node> {
public:
	~verbs_fabric() { close(); }

	/* Opens each worker's publisher queue and joins its groups (pub,
	 * both), then each subscriber's (sub: one; both: --subscribers) queue
	 * per worker. 0 or an errno value, the reason printed. (sockets: one
	 * per worker, unused: each queue lives on its device's NUMA node.) */
	int open(const mcast_config &c, runtime &rt, const std::vector<int> &sockets);
	/* Nothing to do before close: leaving a group through rdma_cm also
	 * detaches the QP, and close() does both. */
	void leave() {}
	/* Leaves the groups, destroys the queues and closes the devices
	 * (after the poll thread stopped). */
	void close();

	/* The kernel sends the IGMP/MLD frames (rdma_cm on RoCE): none counted here. */
	const soft::soft_device::mcast_stats *membership_sent(size_t) const { return nullptr; }
	flood_switch *switch_ports() const { return nullptr; }
	uint64_t handoff_freed(size_t) const { return 0; } /* the HCA steers: nothing handed */

private:
	int open_node(verbs_node &n);
	int join(verbs_node &n, verbs::rdmacm_group::role role);
	int local_for(const verbs_node &n, const wire::gid &group, sockaddr_storage *out) const;
	int make_publisher(verbs_node &n, unsigned w);
	void close_node(verbs_node &n);
};

} // namespace rdgram::mcast

#endif
