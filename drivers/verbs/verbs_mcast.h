/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * UD multicast over rdma-core: a group joined through rdma_cm
 * (rdma_join_multicast_ex(3)), the QP attached with ibv_attach_mcast(3).
 *
 * rdma_cm does what a UD application cannot do itself: on InfiniBand it
 * sends the SA MCMemberRecord join and learns the group's MLID, Q_Key and
 * path; on RoCE the kernel maps the IP group to the MGID (RoCEv2 over IPv4:
 * ::ffff:a.b.c.d, drivers/infiniband/core/cma.c cma_iboe_set_mgid), joins
 * the IP group on the netdev (IGMP/MLD) and fills the GRH. The join
 * completes with RDMA_CM_EVENT_MULTICAST_JOIN, whose rdma_ud_param carries
 * the AH attributes to send to the group (dlid = MLID, grh.dgid = MGID),
 * the remote QPN (0xFFFFFF, the multicast QPN) and the group's Q_Key.
 *
 * A subscriber joins as a full member and attaches its own QP (created by
 * verbs_device, not by rdma_cm) with ibv_attach_mcast(MGID, MLID); a
 * publisher joins as a send-only full member (RDMA_MC_JOIN_FLAG_SENDONLY_
 * FULLMEMBER: no traffic comes back to it) and creates an AH from the
 * event's attributes through the AH registry, like any other destination.
 *
 * The route rdma_cm resolves for the local address must leave through the
 * same device and port the QP lives on: otherwise join fails with EXDEV
 * (the MGID would be attached on one HCA and joined on another).
 *
 * IPv6 groups on RoCEv2: Linux (6.1, drivers/infiniband/core/cma.c
 * cma_iboe_join_multicast) refuses them with ENOTSUPP (524): it joins the
 * IP group only for IPv4. Found on rxe in the lab: without an IP
 * membership the kernel drops the group's packets before rxe sees them,
 * and with one (an IPV6_JOIN_GROUP socket on the netdev) plus
 * ibv_attach_mcast they arrive. So on ENOTSUPP for an IPv6 group on RoCE
 * the join is done the way rdma_cm does it for IPv4, in userspace: the
 * MGID is the group address, the local GID is the resolved source
 * address's RoCEv2 entry, the kernel's MLD membership is held by a socket
 * for as long as the group is joined (subscribers; a publisher needs
 * none), and the membership is membership_ipv6_roce's.
 *
 * Threads: control thread only (every call here sleeps in the kernel or
 * waits for an event, bounded by timeout_ms). Not run on an RDMA device:
 * this machine has none (tests/hw/test_verbs_mcast_hw.cc skips without
 * one); the event translation is unit-tested (tests/unit/test_verbs_mcast.cc).
 */
#ifndef RDGRAM_VERBS_MCAST_H
#define RDGRAM_VERBS_MCAST_H

#include <cstdint>
#include <string>

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

namespace rdgram::verbs {

inline constexpr uint32_t mcast_qpn = 0xFFFFFF; /* IBA 9.8.1: the multicast QPN */

/* What a join gives the application. */
struct mcast_membership {
	ibv_ah_attr ah_attr{}; /* to send to the group (port_num: the physical port) */
	ibv_gid mgid{};        /* the group's GID */
	uint16_t mlid = 0;     /* InfiniBand: the multicast LID; RoCE: 0 */
	uint32_t qpn = 0;      /* remote QPN of sends to the group: mcast_qpn */
	uint32_t qkey = 0;     /* the group's Q_Key (a receiving QP must use it) */
};

/* Checks a join event's UD parameters and fills *m. ib: the port's link
 * layer is InfiniBand. 0, or EPROTO with *why when the event is not a
 * multicast group's: QPN other than 0xFFFFFF, an IB MLID outside
 * 0xC000..0xFFFE, a missing GRH on RoCE, an MGID that is neither ff00::/8
 * nor (RoCEv2 over IPv4) an IPv4-mapped 224.0.0.0/4 address. */
int membership_from_ud(const rdma_ud_param &p, bool ib, mcast_membership *m, std::string *why);

/* The membership of an IPv6 group on a RoCEv2 port when rdma_cm cannot
 * join it (rdgram_join_ipv6_roce): MGID = the group address itself, MLID
 * 0, the multicast QPN, RDMA_UDP_QKEY (the Q_Key of every RDMA_PS_UDP
 * group, as rdma_cm would give), and an AH from sgid_index with hop limit
 * 64 (what cma.c gives RoCEv2 groups over IPv4: IPV6_DEFAULT_HOPLIMIT).
 * (Any thread: touches only its arguments.) */
void membership_ipv6_roce(const in6_addr &group, uint8_t sgid_index, uint8_t port_num, mcast_membership *m);

/* Linux's kernel-internal ENOTSUPP, which rdma_cm passes to userspace as
 * errno for an IPv6 join on RoCEv2 (strerror knows no text for it). */
inline constexpr int errno_enotsupp_kernel = 524;

/* sockaddr storage from "a.b.c.d" or an IPv6 literal (with an optional
 * %scope for link-local). 0 or EINVAL. */
int parse_sockaddr(const std::string &text, sockaddr_storage *out);

class rdmacm_group {
public:
	enum class role { subscriber, publisher };

	rdmacm_group() = default;
	~rdmacm_group() { leave(); }
	rdmacm_group(const rdmacm_group &) = delete;
	rdmacm_group &operator=(const rdmacm_group &) = delete;

	/* Resolves the route from local (an address of the port the QP uses) to
	 * group, joins (full member for a subscriber, send-only full member for
	 * a publisher) and, for a subscriber, attaches qp to the MGID/MLID.
	 * ctx and port_num: the device and physical port of qp (the route must
	 * use the same). Returns 0 or an errno value, with error() saying which
	 * step failed: ENODEV (no rdma_cm device file), ETIMEDOUT (address
	 * resolution or the join did not complete within timeout_ms), EXDEV
	 * (the route uses another device or port), EINVAL (already joined,
	 * a subscriber without qp, or the address families differ), EPROTO (a
	 * malformed join event), or the errno of the failing call or the
	 * event's status. On failure nothing is left joined or attached. */
	int join(ibv_context *ctx, uint8_t port_num, bool ib, const sockaddr *local, const sockaddr *group,
		 role r, ibv_qp *qp, int timeout_ms);
	/* Detaches the QP, leaves the group and frees the rdma_cm objects.
	 * 0, or the first errno value a step returned (every step still runs).
	 * No-op (0) when not joined. */
	int leave();

	bool joined() const { return joined_ || m_.qpn != 0; } /* through rdma_cm, or without it (IPv6 on RoCE) */
	const mcast_membership &membership() const { return m_; }
	const std::string &error() const { return err_; }

private:
	int fail(int e, const std::string &what);
	std::string group_text() const;
	int wait_event(rdma_cm_event_type want, int timeout_ms, rdma_cm_event **out);
	int join_ipv6_roce(ibv_context *ctx, uint8_t port_num, role r, ibv_qp *qp);
	int attach(ibv_qp *qp);

	rdma_event_channel *ch_ = nullptr;
	rdma_cm_id *id_ = nullptr;
	ibv_qp *qp_ = nullptr;      /* attached QP (subscriber) */
	sockaddr_storage group_{};
	bool joined_ = false;       /* rdma_join_multicast_ex completed */
	int ip_member_fd_ = -1;     /* IPv6 on RoCE without rdma_cm: the socket holding the MLD membership */
	mcast_membership m_{};
	std::string err_;
};

} // namespace rdgram::verbs

#endif
