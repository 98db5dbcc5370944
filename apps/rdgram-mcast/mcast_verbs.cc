/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "mcast_verbs.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "rdgram/config.h"
#include "open_device.h"

namespace rdgram::mcast {

namespace {

/* The sockaddr of an IP address held as a GID (IPv4-mapped or IPv6). */
sockaddr_storage sockaddr_of(const wire::gid &g)
{
	sockaddr_storage ss{};
	if (g.is_v4_mapped()) {
		auto *s4 = reinterpret_cast<sockaddr_in *>(&ss);
		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = g.v4();
	} else {
		auto *s6 = reinterpret_cast<sockaddr_in6 *>(&ss);
		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, g.raw, 16);
	}
	return ss;
}

} // namespace

int verbs_fabric::open(const mcast_config &c, runtime &rt, const std::vector<int> &sockets)
{
	c_ = &c;
	rt_ = &rt;
	nw_ = unsigned(sockets.size());
	const unsigned nsub = c.mode == "both" ? c.subscribers : c.mode == "sub" ? 1 : 0;
	const bool all = c.worker_groups == "all";
	/* A node's name: pub, sub0, or with several workers pub/w1, sub0/w1. */
	auto name = [&](const std::string &role, unsigned w) {
		return nw_ > 1 ? role + "/w" + std::to_string(w) : role;
	};
	int rc = 0;
	if (c.mode != "sub") {
		ahs_.assign(nw_, std::vector<ah_handle>(c.groups.size(), ah_null));
		qkeys_.assign(nw_, std::vector<uint32_t>(c.groups.size(), 0));
		for (unsigned w = 0; rc == 0 && w < nw_; w++) {
			verbs_node *n = add(name("pub", w));
			for (uint32_t g = 0; g < c.groups.size(); g++)
				if (worker_takes(g, w, nw_, false))
					n->groups.push_back(g);
			rc = open_node(*n);
			if (rc == 0)
				rc = make_publisher(*n, w);
		}
	}
	for (unsigned k = 0; rc == 0 && k < nsub; k++) {
		std::vector<verbs::verbs_queue *> qs;
		for (unsigned w = 0; rc == 0 && w < nw_; w++) {
			verbs_node *n = add(name("sub" + std::to_string(k), w));
			for (uint32_t g = 0; g < c.groups.size(); g++)
				if (worker_takes(g, w, nw_, all))
					n->groups.push_back(g);
			rc = open_node(*n);
			if (rc == 0)
				rc = join(*n, verbs::rdmacm_group::role::subscriber);
			if (rc == 0)
				qs.push_back(&n->q);
		}
		if (rc == 0)
			subq_.push_back(qs);
	}
	return rc;
}

/* Opens a node: the device (with its own mempool) and one UD queue with
 * rdma_cm's UDP Q_Key (what its groups use). */
int verbs_fabric::open_node(verbs_node &n)
{
	/* No [rdma] table: --device, and port 0 (the first active one). */
	apps::rdma_device_config k;
	k.device = c_->device;
	k.port = 0;
	int rc = 0;
	rt_->ctl().call([&] { rc = apps::open_rdma_device(*rt_, k, {.max_ah = 64}, n.dev); });
	if (rc != 0) {
		fprintf(stderr, "rdgram-mcast: %s: %s\n", n.name.c_str(), apps::rdma_open_error(n.dev, k, rc).c_str());
		return rc;
	}
	queue_params qp;
	qp.socket = n.dev.port().numa_node >= 0 ? n.dev.port().numa_node : SOCKET_ID_ANY;
	qp.qkey = RDMA_UDP_QKEY;
	qp.max_inline = c_->size;
	rt_->ctl().call([&] { rc = n.dev.create_queue(qp, n.q); });
	if (rc != 0) {
		fprintf(stderr, "rdgram-mcast: %s: %s\n", n.name.c_str(), n.dev.error().c_str());
		return rc;
	}
	n.has_queue = true;
	return 0;
}

/* rdma_cm's local address for a group: --local, or the port's first
 * RoCEv2 GID of the group's family (not link-local). 0 or EINVAL. */
int verbs_fabric::local_for(const verbs_node &n, const wire::gid &group, sockaddr_storage *out) const
{
	const int fam = group.is_v4_mapped() ? AF_INET : AF_INET6;
	if (!c_->local.empty()) {
		if (verbs::parse_sockaddr(c_->local, out) != 0 || out->ss_family != fam) {
			fprintf(stderr, "rdgram-mcast: --local %s is not an %s address (group %s)\n", c_->local.c_str(),
				fam == AF_INET ? "IPv4" : "IPv6", format_gid(group).c_str());
			return EINVAL;
		}
		return 0;
	}
	for (const wire::gid &g : n.dev.port().gids) {
		if (g.is_zero() || g.is_v4_mapped() != (fam == AF_INET) || (g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80))
			continue;
		*out = sockaddr_of(g);
		return 0;
	}
	fprintf(stderr, "rdgram-mcast: %s port %u has no %s RoCEv2 GID for group %s: give --local (on InfiniBand: "
			"the port's IPoIB address)\n",
		n.dev.name().c_str(), n.dev.port_num(), fam == AF_INET ? "IPv4" : "IPv6", format_gid(group).c_str());
	return EINVAL;
}

/* Joins every group through rdma_cm on the control thread: as a send-only
 * member (publisher, qp null) or a full member attaching n's QP. */
int verbs_fabric::join(verbs_node &n, verbs::rdmacm_group::role role)
{
	const bool ib = n.dev.port().link != link_layer::ethernet;
	for (uint32_t gi : n.groups) {
		const wire::gid &g = c_->groups[gi];
		sockaddr_storage local{}, group = sockaddr_of(g);
		if (int rc = local_for(n, g, &local); rc != 0)
			return rc;
		auto j = std::make_unique<verbs::rdmacm_group>();
		int rc = 0;
		rt_->ctl().call([&] {
			rc = j->join(n.dev.context(), n.dev.port_num(), ib, reinterpret_cast<sockaddr *>(&local),
				     reinterpret_cast<sockaddr *>(&group), role,
				     role == verbs::rdmacm_group::role::subscriber ? n.q.qp() : nullptr, 5000);
		});
		if (rc != 0) {
			fprintf(stderr, "rdgram-mcast: %s: joining %s: %s\n", n.name.c_str(), format_gid(g).c_str(),
				j->error().c_str());
			return rc;
		}
		n.joins.push_back(std::move(j));
	}
	return 0;
}

/* Worker w's publisher joins its groups send-only; the AH to each group
 * comes from its join event (MLID, MGID, SL, rate, the GRH rdma_cm
 * filled). */
int verbs_fabric::make_publisher(verbs_node &n, unsigned w)
{
	if (int rc = join(n, verbs::rdmacm_group::role::publisher); rc != 0)
		return rc;
	for (size_t j = 0; j < n.groups.size(); j++) {
		const uint32_t g = n.groups[j];
		const verbs::mcast_membership &m = n.joins[j]->membership();
		ibv_ah_attr a = m.ah_attr;
		a.port_num = 1; /* rdgram numbers the device's one port 1 */
		int err = 0;
		ah_handle h = ah_null;
		rt_->ctl().call([&] { h = n.dev.create_ah(a, &err); });
		if (err != 0) {
			fprintf(stderr, "rdgram-mcast: AH to group %s: %s\n", format_gid(c_->groups[g]).c_str(),
				strerror(err));
			return err;
		}
		ahs_[w][g] = h;
		qkeys_[w][g] = m.qkey;
	}
	pubq_.push_back(&n.q);
	return 0;
}

void verbs_fabric::close_node(verbs_node &n)
{
	rt_->ctl().call([&] {
		for (auto &j : n.joins)
			if (int rc = j->leave(); rc != 0)
				fprintf(stderr, "rdgram-mcast: %s: leaving: %s\n", n.name.c_str(), j->error().c_str());
		n.joins.clear();
		if (n.has_queue)
			n.dev.destroy_queue(n.q);
		n.has_queue = false;
		n.dev.close();
	});
}

void verbs_fabric::close()
{
	for (auto &n : nodes_)
		close_node(*n);
	pubq_.clear();
	subq_.clear();
	nodes_.clear();
}

} // namespace rdgram::mcast
