/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "verbs_mcast.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <unistd.h>

#include "rdgram/log.h"

namespace rdgram::verbs {

namespace {

std::string hex32(uint32_t v)
{
	char b[16];
	snprintf(b, sizeof(b), "0x%x", v);
	return b;
}

std::string gid_text(const ibv_gid &g)
{
	char b[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, g.raw, b, sizeof(b));
	return b;
}

int64_t now_ms()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return int64_t(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

const char *event_name(rdma_cm_event_type t) { return rdma_event_str(t); }

} // namespace

int membership_from_ud(const rdma_ud_param &p, bool ib, mcast_membership *m, std::string *why)
{
	if (p.qp_num != mcast_qpn) {
		*why = "join event: remote QPN " + hex32(p.qp_num) + ", not the multicast QPN 0xffffff";
		return EPROTO;
	}
	const ibv_ah_attr &a = p.ah_attr;
	if (ib && (a.dlid < 0xC000 || a.dlid == 0xFFFF)) {
		*why = "join event: LID " + hex32(a.dlid) + " is not a multicast LID (0xc000..0xfffe)";
		return EPROTO;
	}
	if (!ib && !a.is_global) {
		*why = "join event: no GRH on a RoCE port";
		return EPROTO;
	}
	/* An MGID: ff00::/8; or, on RoCEv2 over IPv4, the IPv4-mapped group
	 * (::ffff:224.0.0.0/4) that cma_iboe_set_mgid writes. */
	const uint8_t *g = a.grh.dgid.raw;
	static const uint8_t v4map[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	const bool mgid = g[0] == 0xff;
	const bool v4group = memcmp(g, v4map, 12) == 0 && (g[12] & 0xf0) == 0xe0;
	if (a.is_global && !mgid && !(!ib && v4group)) {
		*why = "join event: destination GID " + gid_text(a.grh.dgid) + " is not a multicast GID";
		return EPROTO;
	}
	m->ah_attr = a;
	m->mgid = a.grh.dgid;
	m->mlid = ib ? a.dlid : 0;
	m->qpn = p.qp_num;
	m->qkey = p.qkey;
	return 0;
}

void membership_ipv6_roce(const in6_addr &group, uint8_t sgid_index, uint8_t port_num, mcast_membership *m)
{
	*m = mcast_membership{};
	memcpy(m->mgid.raw, &group, 16);
	m->ah_attr.is_global = 1;
	m->ah_attr.port_num = port_num;
	m->ah_attr.grh.dgid = m->mgid;
	m->ah_attr.grh.sgid_index = sgid_index;
	m->ah_attr.grh.hop_limit = 64;
	m->mlid = 0;
	m->qpn = mcast_qpn;
	m->qkey = RDMA_UDP_QKEY;
}

int parse_sockaddr(const std::string &text, sockaddr_storage *out)
{
	*out = sockaddr_storage{};
	auto *s4 = reinterpret_cast<sockaddr_in *>(out);
	if (inet_pton(AF_INET, text.c_str(), &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		return 0;
	}
	auto *s6 = reinterpret_cast<sockaddr_in6 *>(out);
	const size_t pct = text.find('%');
	const std::string addr = text.substr(0, pct);
	if (inet_pton(AF_INET6, addr.c_str(), &s6->sin6_addr) != 1)
		return EINVAL;
	s6->sin6_family = AF_INET6;
	if (pct != std::string::npos) {
		const std::string scope = text.substr(pct + 1);
		unsigned idx = if_nametoindex(scope.c_str());
		if (idx == 0) {
			char *end = nullptr;
			const unsigned long v = strtoul(scope.c_str(), &end, 10);
			if (scope.empty() || *end != '\0' || v == 0 || v > 0xffffffffu)
				return EINVAL;
			idx = unsigned(v);
		}
		s6->sin6_scope_id = idx;
	}
	return 0;
}

std::string rdmacm_group::group_text() const
{
	char b[INET6_ADDRSTRLEN] = "?";
	if (group_.ss_family == AF_INET)
		inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(&group_)->sin_addr, b, sizeof(b));
	else if (group_.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(&group_)->sin6_addr, b, sizeof(b));
	return b;
}

int rdmacm_group::fail(int e, const std::string &what)
{
	err_ = what;
	/* Undo whatever was done; keep the first error's text. */
	const std::string keep = err_;
	leave();
	err_ = keep;
	return e;
}

int rdmacm_group::wait_event(rdma_cm_event_type want, int timeout_ms, rdma_cm_event **out)
{
	const int64_t deadline = now_ms() + timeout_ms;
	for (;;) {
		rdma_cm_event *ev = nullptr;
		if (rdma_get_cm_event(ch_, &ev) == 0) {
			if (ev->event == want) {
				*out = ev;
				return 0;
			}
			const rdma_cm_event_type got = ev->event;
			const int st = ev->status;
			rdma_ack_cm_event(ev);
			const int e = st < 0 ? -st : st != 0 ? st : EIO;
			err_ = std::string("waiting for ") + event_name(want) + ": got " + event_name(got) +
			       (st != 0 ? std::string(" (") + strerror(e) + ")" : std::string());
			return e;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			const int e = errno;
			err_ = std::string("rdma_get_cm_event: ") + strerror(e);
			return e;
		}
		const int64_t left = deadline - now_ms();
		if (left <= 0) {
			err_ = std::string("no ") + event_name(want) + " within " + std::to_string(timeout_ms) + " ms";
			return ETIMEDOUT;
		}
		pollfd pfd{ch_->fd, POLLIN, 0};
		if (poll(&pfd, 1, int(left)) < 0 && errno != EINTR) {
			const int e = errno;
			err_ = std::string("poll on the rdma_cm channel: ") + strerror(e);
			return e;
		}
	}
}

int rdmacm_group::join(ibv_context *ctx, uint8_t port_num, bool ib, const sockaddr *local, const sockaddr *group,
		       role r, ibv_qp *qp, int timeout_ms)
{
	if (id_ != nullptr || ch_ != nullptr)
		return err_ = "already joined (leave first)", EINVAL;
	if (ctx == nullptr || group == nullptr || (r == role::subscriber && qp == nullptr))
		return err_ = "no device, no group, or a subscriber without a QP", EINVAL;
	if (local != nullptr && local->sa_family != group->sa_family)
		return err_ = "the local address and the group are of different families", EINVAL;
	if (group->sa_family != AF_INET && group->sa_family != AF_INET6)
		return err_ = "the group is neither IPv4 nor IPv6", EINVAL;
	const socklen_t glen = group->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
	memcpy(&group_, group, glen);
	err_.clear();

	ch_ = rdma_create_event_channel();
	if (ch_ == nullptr) {
		const int e = errno != 0 ? errno : ENODEV;
		return fail(e == ENOENT ? ENODEV : e,
			    std::string("rdma_create_event_channel: ") + strerror(e) +
				    " (no /dev/infiniband/rdma_cm: is rdma_ucm loaded and an RDMA device present?)");
	}
	if (const int fl = fcntl(ch_->fd, F_GETFL); fl < 0 || fcntl(ch_->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return fail(errno, std::string("fcntl(O_NONBLOCK) on the rdma_cm channel: ") + strerror(errno));
	if (rdma_create_id(ch_, &id_, this, RDMA_PS_UDP) != 0) {
		const int e = errno;
		id_ = nullptr;
		return fail(e, std::string("rdma_create_id(RDMA_PS_UDP): ") + strerror(e));
	}
	if (rdma_resolve_addr(id_, const_cast<sockaddr *>(local), reinterpret_cast<sockaddr *>(&group_),
			      timeout_ms) != 0) {
		const int e = errno;
		return fail(e, std::string("rdma_resolve_addr: ") + strerror(e));
	}
	rdma_cm_event *ev = nullptr;
	if (int e = wait_event(RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms, &ev); e != 0)
		return fail(e, "address resolution: " + err_);
	rdma_ack_cm_event(ev);
	/* The group must be joined on the device and port the QP is on. */
	if (id_->verbs == nullptr || strcmp(ibv_get_device_name(id_->verbs->device), ibv_get_device_name(ctx->device)) != 0 ||
	    id_->port_num != port_num)
		return fail(EXDEV, std::string("the route to the group leaves through ") +
					   (id_->verbs != nullptr ? ibv_get_device_name(id_->verbs->device) : "no device") +
					   " port " + std::to_string(id_->port_num) + ", not " +
					   ibv_get_device_name(ctx->device) + " port " + std::to_string(port_num) +
					   " (give a local address of the QP's port)");

	rdma_cm_join_mc_attr_ex mc{};
	mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	mc.join_flags = r == role::publisher ? RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER : RDMA_MC_JOIN_FLAG_FULLMEMBER;
	mc.addr = reinterpret_cast<sockaddr *>(&group_);
	if (rdma_join_multicast_ex(id_, &mc, this) != 0) {
		const int e = errno;
		if (e == errno_enotsupp_kernel && !ib && group_.ss_family == AF_INET6)
			return join_ipv6_roce(ctx, port_num, r, qp);
		return fail(e, std::string("rdma_join_multicast_ex: ") +
				       (e == errno_enotsupp_kernel ? "not supported (ENOTSUPP, 524)" : strerror(e)));
	}
	if (int e = wait_event(RDMA_CM_EVENT_MULTICAST_JOIN, timeout_ms, &ev); e != 0) {
		/* The join request is outstanding or failed: rdma_leave_multicast
		 * (in leave) cancels it. */
		joined_ = true;
		return fail(e, "join: " + err_);
	}
	joined_ = true;
	std::string why;
	const int pe = membership_from_ud(ev->param.ud, ib, &m_, &why);
	rdma_ack_cm_event(ev);
	if (pe != 0)
		return fail(pe, why);

	if (r == role::subscriber)
		if (int e = attach(qp); e != 0)
			return e;
	RDGRAM_LOG(verbs, INFO, "joined group %s as a %s: MGID %s, MLID 0x%x, Q_Key 0x%x", group_text().c_str(),
		   r == role::publisher ? "send-only member" : "full member (QP attached)", gid_text(m_.mgid).c_str(),
		   m_.mlid, m_.qkey);
	return 0;
}

/* The subscriber's QP onto the group: it receives the group's datagrams
 * only with the group's Q_Key (IBA 10.2.4: a UD receive checks it). */
int rdmacm_group::attach(ibv_qp *qp)
{
	ibv_qp_attr qa{};
	ibv_qp_init_attr qia{};
	if (int e = ibv_query_qp(qp, &qa, IBV_QP_QKEY, &qia); e != 0)
		return fail(e, std::string("ibv_query_qp: ") + strerror(e));
	if (qa.qkey != m_.qkey)
		return fail(EINVAL, "the QP's Q_Key " + hex32(qa.qkey) + " is not the group's " + hex32(m_.qkey) +
					    " (create the subscriber's queue with the group's Q_Key; rdma_cm's "
					    "RDMA_PS_UDP groups use RDMA_UDP_QKEY 0x01234567)");
	if (int e = ibv_attach_mcast(qp, &m_.mgid, m_.mlid); e != 0)
		return fail(e, std::string("ibv_attach_mcast(") + gid_text(m_.mgid) + ", mlid " + hex32(m_.mlid) +
				       "): " + strerror(e));
	qp_ = qp;
	return 0;
}

/* rdma_cm refused an IPv6 group on RoCEv2 (ENOTSUPP): the join as
 * verbs_mcast.h describes. id_ has resolved the route already. */
int rdmacm_group::join_ipv6_roce(ibv_context *ctx, uint8_t port_num, role r, ibv_qp *qp)
{
	const auto *src = reinterpret_cast<const sockaddr_in6 *>(&id_->route.addr.src_addr);
	if (src->sin6_family != AF_INET6)
		return fail(EPROTO, "IPv6 group without rdma_cm: the resolved source address is not IPv6");
	ibv_port_attr pa{};
	if (int e = ibv_query_port(ctx, port_num, &pa); e != 0)
		return fail(e, std::string("ibv_query_port: ") + strerror(e));
	/* The source address's RoCEv2 GID: its index and its netdev. */
	int sgid = -1;
	uint32_t ifindex = 0;
	for (int i = 0; i < pa.gid_tbl_len && i <= UINT8_MAX && sgid < 0; i++) {
		ibv_gid_entry ent{};
		if (ibv_query_gid_ex(ctx, port_num, uint32_t(i), &ent, 0) != 0)
			continue;
		if (ent.gid_type == IBV_GID_TYPE_ROCE_V2 && memcmp(ent.gid.raw, &src->sin6_addr, 16) == 0) {
			sgid = i;
			ifindex = ent.ndev_ifindex;
		}
	}
	if (sgid < 0)
		return fail(EADDRNOTAVAIL, "IPv6 group without rdma_cm: no RoCEv2 GID for the source address " +
						   gid_text(*reinterpret_cast<const ibv_gid *>(&src->sin6_addr)));
	const auto *g6 = reinterpret_cast<const sockaddr_in6 *>(&group_);
	membership_ipv6_roce(g6->sin6_addr, uint8_t(sgid), port_num, &m_);
	if (r == role::subscriber) {
		/* The kernel's MLD membership, without which it drops the
		 * group's packets before rxe (or a NIC's RoCE stack) sees
		 * them: held by a socket until leave(). */
		ip_member_fd_ = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (ip_member_fd_ < 0)
			return fail(errno, std::string("socket(AF_INET6) for the MLD membership: ") + strerror(errno));
		ipv6_mreq mr{};
		mr.ipv6mr_multiaddr = g6->sin6_addr;
		mr.ipv6mr_interface = ifindex;
		if (setsockopt(ip_member_fd_, IPPROTO_IPV6, IPV6_JOIN_GROUP, &mr, sizeof(mr)) != 0)
			return fail(errno, "IPV6_JOIN_GROUP " + group_text() + " on ifindex " + std::to_string(ifindex) +
						   ": " + strerror(errno));
		if (int e = attach(qp); e != 0)
			return e;
	}
	RDGRAM_LOG(verbs, INFO,
		   "joined group %s as a %s without rdma_cm (it refuses IPv6 groups on RoCEv2: ENOTSUPP): "
		   "MGID %s, source GID index %d, MLD membership on ifindex %u, Q_Key 0x%x",
		   group_text().c_str(), r == role::publisher ? "send-only member" : "full member (QP attached)",
		   gid_text(m_.mgid).c_str(), sgid, ifindex, m_.qkey);
	return 0;
}

int rdmacm_group::leave()
{
	int first = 0;
	auto note = [&](int e, const char *what) {
		if (e != 0 && first == 0) {
			first = e;
			err_ = std::string(what) + ": " + strerror(e);
		}
	};
	if (qp_ != nullptr) {
		note(ibv_detach_mcast(qp_, &m_.mgid, m_.mlid), "ibv_detach_mcast");
		qp_ = nullptr;
	}
	if (ip_member_fd_ >= 0) {
		/* Closing the socket drops the MLD membership. */
		close(ip_member_fd_);
		ip_member_fd_ = -1;
	}
	if (joined_) {
		RDGRAM_LOG(verbs, INFO, "leaving group %s", group_text().c_str());
		if (rdma_leave_multicast(id_, reinterpret_cast<sockaddr *>(&group_)) != 0)
			note(errno, "rdma_leave_multicast");
		joined_ = false;
	}
	if (id_ != nullptr) {
		/* Events still queued for the id must be acknowledged before
		 * rdma_destroy_id, which otherwise waits for them. */
		rdma_cm_event *ev;
		while (ch_ != nullptr && rdma_get_cm_event(ch_, &ev) == 0)
			rdma_ack_cm_event(ev);
		if (rdma_destroy_id(id_) != 0)
			note(errno, "rdma_destroy_id");
		id_ = nullptr;
	}
	if (ch_ != nullptr) {
		rdma_destroy_event_channel(ch_);
		ch_ = nullptr;
	}
	m_ = mcast_membership{};
	return first;
}

} // namespace rdgram::verbs
