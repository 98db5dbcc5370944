/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast's set-up on the soft driver: a soft device per publisher
 * and subscriber, a queue per worker (the port opened with that many RX/TX
 * queue pairs) and on each a QP of its own (--qpn + worker: a QPN belongs
 * to one queue of a port); the publisher's AHs to the groups; the
 * subscribers' joins (the driver's IGMPv2/MLDv2 report, then the worker's
 * QP attached to each group it takes) and leaves. Where the port puts a
 * frame on a queue whose worker has no member of its group, the driver
 * hands it to the queue that has (soft_steer.h), and every attached QP
 * gets its own copy. --mode both puts every node on a net_ring port of the
 * in-process switch (mcast_switch.h); --mode pub/sub put the one node on
 * --port, which must offer a queue pair per worker (net_af_packet:
 * qpairs=N). The data path is mcast_engine.h's, on soft_queue.
 */
#ifndef RDGRAM_MCAST_SOFT_H
#define RDGRAM_MCAST_SOFT_H

#include <memory>
#include <string>
#include <vector>

#include "mcast_fabric.h"
#include "mcast_switch.h"
#include "rdgram/runtime.h"
#include "soft_device.h"
#include "soft_port.h"

namespace rdgram::mcast {

/* One publisher or subscriber: a soft device on one port, a queue and a QP
 * per worker. */
struct soft_node {
	using queue_type = soft::soft_queue;
	std::string name;
	/* The DPDK port with the device on it, the device's control poller
	 * on the control thread (soft_port.h). */
	soft::port owner;
	soft::soft_device &dev = owner.device();
	std::unique_ptr<soft::soft_queue[]> q; /* per worker */
	unsigned nq = 0;                       /* queues created */
};

/* The run's devices on the soft driver. (Main thread; the control thread
 * runs what must run there through runtime::ctl().call.) */
class soft_fabric : public fabric_nodes<soft_node> {
public:
	~soft_fabric() { close(); }

	/* Opens what --mode asks for: the publisher's device with its AHs
	 * (pub, both), then the subscribers' with their groups joined (sub:
	 * one; both: --subscribers); a queue per worker, worker w's on NUMA
	 * node sockets[w]. 0 or an errno value, the reason printed. */
	int open(const mcast_config &c, runtime &rt, const std::vector<int> &sockets);
	/* Leaves every group (IGMP Leave / MLD CHANGE_TO_INCLUDE; queue 0
	 * sends the frames on its next polls). After the poll thread stopped. */
	void leave();
	/* Takes the devices off the control thread and closes them. */
	void close();

	const soft::soft_device::mcast_stats *membership_sent(size_t k) const { return &sub_nodes_[k]->dev.mcast_counters(); }
	/* Frames handed between subscriber k's queues that the queue never
	 * took (freed at close): soft_device::handoff_freed. After close. */
	uint64_t handoff_freed(size_t k) const { return k < freed_.size() ? freed_[k] : 0; }
	flood_switch *switch_ports() const { return sw_.get(); } /* --mode both; else nullptr */

private:
	int open_node(soft_node &n, int switch_port, const rte_ether_addr *mac, const std::vector<wire::gid> &addrs);
	int make_publisher(soft_node &n, const std::vector<wire::gid> &addrs);
	int make_subscriber(soft_node &n);

	std::vector<int> sockets_; /* per worker */
	std::vector<soft_node *> sub_nodes_;
	std::vector<uint64_t> freed_; /* per subscriber, at close */
	std::unique_ptr<flood_switch> sw_;
};

} // namespace rdgram::mcast

#endif
