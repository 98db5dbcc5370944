/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "mcast_soft.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <rte_ethdev.h>

#include "ah_attr.h"
#include "open_device.h"
#include "soft_port.h"
#include "rdgram/config.h"

namespace rdgram::mcast {

namespace {

rte_ether_addr mac_n(uint8_t n)
{
	rte_ether_addr m{{0x02, 0x00, 0x00, 0x00, 0x0c, n}};
	return m;
}

/* --mode both: everyone on one subnet; the publisher is .1 / ::1. */
std::vector<wire::gid> addrs_of(unsigned i)
{
	wire::gid v4, v6;
	parse_ip("10.12.0." + std::to_string(i + 1), &v4);
	parse_ip("fd00:12::" + std::to_string(i + 1), &v6);
	return {v4, v6};
}

} // namespace

int soft_fabric::open(const mcast_config &c, runtime &rt, const std::vector<int> &sockets)
{
	c_ = &c;
	rt_ = &rt;
	sockets_ = sockets;
	nw_ = unsigned(sockets.size());
	int rc = 0;
	if (c.mode == "both") {
		sw_ = std::make_unique<flood_switch>();
		const int pp = sw_->add_publisher_port(uint16_t(nw_));
		if (pp < 0)
			return ENOMEM;
		soft_node *n = add("pub");
		const rte_ether_addr pm = mac_n(1);
		rc = open_node(*n, pp, &pm, addrs_of(0));
		if (rc == 0)
			rc = make_publisher(*n, addrs_of(0));
		for (unsigned k = 0; rc == 0 && k < c.subscribers; k++) {
			const int sp = sw_->add_subscriber_port(uint16_t(nw_));
			if (sp < 0)
				return ENOMEM;
			n = add("sub" + std::to_string(k));
			const rte_ether_addr sm = mac_n(uint8_t(k + 2));
			rc = open_node(*n, sp, &sm, addrs_of(k + 1));
			if (rc == 0) {
				sw_->set_copy_pool(k, n->dev.mempool());
				rc = make_subscriber(*n);
			}
		}
		return rc;
	}
	soft_node *n = add(c.mode);
	rc = open_node(*n, -1, c.port.set_mac ? &c.port.mac : nullptr, c.port.addresses);
	if (rc == 0)
		rc = c.mode == "pub" ? make_publisher(*n, c.port.addresses) : make_subscriber(*n);
	return rc;
}

/* Opens a node's port (switch_port: the switch's port of the node, --mode
 * both; -1: [port]'s devargs) and device with a queue pair per worker,
 * and on each queue a QP of its own (--qpn + worker). mac: the node's
 * (nullptr: the port's own). */
int soft_fabric::open_node(soft_node &n, int switch_port, const rte_ether_addr *mac, const std::vector<wire::gid> &addrs)
{
	soft::port_config pc = c_->port;
	pc.queues = 0;
	if (switch_port >= 0)
		pc.name = n.name;
	soft::port_setup ps;
	ps.control = apps::control_host(*rt_); /* ARP/ND, IGMP/MLD queries, AH slots */
	ps.qsbr = rt_->qsbr();
	for (int s : sockets_) /* one AV replica per node that hosts a worker */
		if (std::find(ps.av_nodes.begin(), ps.av_nodes.end(), s) == ps.av_nodes.end())
			ps.av_nodes.push_back(s);
	ps.adjust = [&](soft::soft_config &sc) {
		sc.set_mac = mac != nullptr;
		if (mac != nullptr)
			sc.mac = *mac;
		sc.addresses = addrs;
		sc.nb_mbufs = c_->port.nb_mbufs * nw_;
		if (c_->mode == "both")
			sc.neighbours.clear();
	};
	std::string err;
	if (int rc = apps::open_device<soft::soft_device>(
		    *rt_, {.port = &pc, .adopt = switch_port, .queues = uint16_t(nw_), .setup = ps}, n.owner, &err);
	    rc != 0) {
		fprintf(stderr, "rdgram-mcast: %s: %s\n", n.name.c_str(), err.c_str());
		return rc;
	}
	n.q = std::make_unique<soft::soft_queue[]>(nw_);
	for (unsigned w = 0; w < nw_; w++) {
		if (int rc = n.dev.create_queue({.index = uint16_t(w), .socket = sockets_[w]}, n.q[w]); rc != 0) {
			fprintf(stderr, "rdgram-mcast: %s%s: queue: %s\n", n.name.c_str(), worker_tag(w).c_str(),
				n.dev.error().c_str());
			return rc;
		}
		n.nq = w + 1;
		if (int rc = n.q[w].add_qp(c_->qpn + w, c_->qkey); rc != 0) {
			fprintf(stderr, "rdgram-mcast: %s%s: QP 0x%x: %s\n", n.name.c_str(), worker_tag(w).c_str(),
				c_->qpn + w, strerror(rc));
			return rc;
		}
	}
	return 0;
}

/* An AH to every group, from the port's address of the group's family. */
int soft_fabric::make_publisher(soft_node &n, const std::vector<wire::gid> &addrs)
{
	std::vector<ah_handle> ahs;
	std::vector<uint32_t> qkeys;
	for (const auto &g : c_->groups) {
		const ibv_ah_attr a = apps::gid_ah_attr(g.raw, uint8_t(sgid_index_for(addrs, g)), 8);
		int err = 0;
		ah_handle h = ah_null;
		rt_->ctl().call([&] { h = n.dev.create_ah(a, &err); });
		if (err != 0) {
			fprintf(stderr, "rdgram-mcast: AH to group %s: %s\n", format_gid(g).c_str(), strerror(err));
			return err;
		}
		ahs.push_back(h);
		qkeys.push_back(c_->qkey);
	}
	/* One AH table per device: every worker's queue sends with it. */
	ahs_.assign(nw_, ahs);
	qkeys_.assign(nw_, qkeys);
	for (unsigned w = 0; w < nw_; w++)
		pubq_.push_back(&n.q[w]);
	return 0;
}

/* Each worker's QP joins the groups it takes: rdma_join_multicast's part
 * (the device counts joins and sends one membership report per group),
 * then ibv_attach_mcast's (the QP gets the group). */
int soft_fabric::make_subscriber(soft_node &n)
{
	const bool all = c_->worker_groups == "all";
	for (uint32_t g = 0; g < c_->groups.size(); g++)
		for (unsigned w = 0; w < nw_; w++) {
			if (!worker_takes(g, w, nw_, all))
				continue;
			const wire::gid &gid = c_->groups[g];
			int rc = 0;
			rt_->ctl().call([&] { rc = n.dev.join_mcast(gid); });
			if (rc == 0)
				rc = n.q[w].attach_mcast(c_->qpn + w, gid);
			if (rc != 0) {
				fprintf(stderr, "rdgram-mcast: %s%s: joining %s: %s\n", n.name.c_str(), worker_tag(w).c_str(),
					format_gid(gid).c_str(), strerror(rc));
				return rc;
			}
		}
	std::vector<soft::soft_queue *> qs;
	for (unsigned w = 0; w < nw_; w++)
		qs.push_back(&n.q[w]);
	subq_.push_back(qs);
	sub_nodes_.push_back(&n);
	return 0;
}

void soft_fabric::leave()
{
	const bool all = c_->worker_groups == "all";
	for (soft_node *n : sub_nodes_)
		for (uint32_t g = 0; g < c_->groups.size(); g++)
			for (unsigned w = 0; w < nw_; w++) {
				if (!worker_takes(g, w, nw_, all))
					continue;
				const wire::gid &gid = c_->groups[g];
				int rc = n->q[w].detach_mcast(c_->qpn + w, gid);
				if (rc == 0)
					rt_->ctl().call([&] { rc = n->dev.leave_mcast(gid); });
				if (rc != 0)
					fprintf(stderr, "rdgram-mcast: %s%s: leaving %s: %s\n", n->name.c_str(),
						worker_tag(w).c_str(), format_gid(gid).c_str(), strerror(rc));
			}
}

void soft_fabric::close()
{
	/* Every queue's frames back to the pool, the hand-off rings' counted. */
	for (auto &n : nodes_)
		for (unsigned w = 0; w < n->nq; w++)
			n->dev.destroy_queue(n->q[w]);
	freed_.clear();
	for (soft_node *n : sub_nodes_)
		freed_.push_back(n->dev.handoff_freed());
	pubq_.clear();
	subq_.clear();
	sub_nodes_.clear();
	nodes_.clear(); /* each port closes as it goes: its control poller, the port, the device */
}

} // namespace rdgram::mcast
