/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast's set-up on the soft driver: a soft device per publisher
 * and subscriber, one queue and one QP each; the publisher's AHs to the
 * groups; the subscribers' joins (the driver's IGMPv2/MLDv2 report, then
 * the QP attached) and leaves. --mode both puts every node on a net_ring
 * port of the in-process switch (mcast_switch.h); --mode pub/sub put the
 * one node on --port. The data path is mcast_engine.h's, on soft_queue.
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

namespace rdgram::mcast {

/* One publisher or subscriber: a soft device on one port, one queue, one QP. */
struct soft_node {
	std::string name;
	soft::soft_device dev;
	soft::soft_queue q;
	runtime *polled_by = nullptr; /* the control thread polls dev */
};

/* The run's devices on the soft driver. (Main thread; the control thread
 * runs what must run there through runtime::ctl().call.) */
class soft_fabric : public fabric_nodes<soft_node> {
public:
	~soft_fabric() { close(); }

	/* Opens what --mode asks for: the publisher's device with its AHs
	 * (pub, both), then the subscribers' with their groups joined (sub:
	 * one; both: --subscribers), their poll threads on NUMA node socket.
	 * 0 or an errno value, the reason printed. */
	int open(const mcast_config &c, runtime &rt, int socket);
	/* Leaves every group (IGMP Leave / MLD CHANGE_TO_INCLUDE; queue 0
	 * sends the frames on its next polls). After the poll thread stopped. */
	void leave();
	/* Takes the devices off the control thread and closes them. */
	void close();

	const soft::soft_device::mcast_stats *membership_sent(size_t k) const { return &subs_[k]->dev.mcast_counters(); }
	flood_switch *switch_ports() const { return sw_.get(); } /* --mode both; else nullptr */

private:
	int open_node(soft_node &n, uint16_t port, const rte_ether_addr &mac, const std::vector<wire::gid> &addrs,
		      int socket);
	int make_publisher(soft_node &n, const std::vector<wire::gid> &addrs);
	int make_subscriber(soft_node &n);

	std::unique_ptr<flood_switch> sw_;
};

} // namespace rdgram::mcast

#endif
