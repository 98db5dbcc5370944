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

#include "mcast.h"
#include "mcast_switch.h"
#include "rdgram/runtime.h"
#include "soft_device.h"

namespace rdgram::mcast {

/* The run's devices on the soft driver. (Main thread; the control thread
 * runs what must run there through runtime::ctl().call.) */
class soft_fabric {
public:
	using queue_type = soft::soft_queue;

	soft_fabric() = default;
	soft_fabric(const soft_fabric &) = delete;
	soft_fabric &operator=(const soft_fabric &) = delete;
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

	queue_type *pub_queue() const { return pub_ != nullptr ? &pub_->q : nullptr; }
	const std::vector<ah_handle> &group_ahs() const { return ahs_; }
	const std::vector<uint32_t> &group_qkeys() const { return qkeys_; }
	size_t subscribers() const { return subs_.size(); }
	queue_type *sub_queue(size_t k) const { return &subs_[k]->q; }
	const soft::soft_device::mcast_stats *membership_sent(size_t k) const { return &subs_[k]->dev.mcast_counters(); }
	flood_switch *switch_ports() const { return sw_.get(); } /* --mode both; else nullptr */

private:
	struct node {
		std::string name;
		soft::soft_device dev;
		soft::soft_queue q;
		runtime *polled_by = nullptr; /* the control thread polls dev */
	};
	int open_node(node &n, uint16_t port, const rte_ether_addr &mac, const std::vector<wire::gid> &addrs,
		      int socket);
	int make_publisher(node &n, const std::vector<wire::gid> &addrs);
	int make_subscriber(node &n);

	const mcast_config *c_ = nullptr;
	runtime *rt_ = nullptr;
	std::vector<std::unique_ptr<node>> nodes_;
	node *pub_ = nullptr;
	std::vector<node *> subs_;
	std::vector<ah_handle> ahs_;  /* per group */
	std::vector<uint32_t> qkeys_; /* per group */
	std::unique_ptr<flood_switch> sw_;
};

} // namespace rdgram::mcast

#endif
