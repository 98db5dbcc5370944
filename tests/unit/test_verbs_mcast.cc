/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/verbs multicast without a device: the translation of rdma_cm's
 * join event (rdma_ud_param) into a membership, address parsing, the
 * argument checks, and a join that fails cleanly (ENODEV, nothing left
 * open) where there is no rdma_cm device file, as on this machine. The
 * join itself runs in the hw suite (tests/hw/test_verbs_hw.cc).
 */
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <unistd.h>

#include <gtest/gtest.h>

#include "rdgram/wire.h"
#include "verbs_mcast.h"

using namespace rdgram;
using namespace rdgram::verbs;

namespace {

ibv_gid gid_of(const char *text)
{
	ibv_gid g{};
	EXPECT_EQ(inet_pton(AF_INET6, text, g.raw), 1) << text;
	return g;
}

/* What cma_iboe_set_mgid (drivers/infiniband/core/cma.c) makes of an IPv4
 * group on a RoCEv2 port: ::ffff:a.b.c.d. */
ibv_gid roce_v2_mgid_v4(const char *group)
{
	ibv_gid g{};
	g.raw[10] = g.raw[11] = 0xff;
	EXPECT_EQ(inet_pton(AF_INET, group, g.raw + 12), 1);
	return g;
}

rdma_ud_param ib_event()
{
	rdma_ud_param p{};
	p.qp_num = 0xFFFFFF;
	p.qkey = RDMA_UDP_QKEY;
	p.ah_attr.dlid = 0xC003;
	p.ah_attr.sl = 2;
	p.ah_attr.port_num = 1;
	p.ah_attr.is_global = 1;
	p.ah_attr.grh.dgid = gid_of("ff12:401b:ffff::efff:4d01"); /* IPoIB mapping of 239.255.77.1 */
	p.ah_attr.grh.hop_limit = 1;
	return p;
}

rdma_ud_param roce_event(ibv_gid mgid)
{
	rdma_ud_param p{};
	p.qp_num = 0xFFFFFF;
	p.qkey = RDMA_UDP_QKEY;
	p.ah_attr.is_global = 1;
	p.ah_attr.port_num = 1;
	p.ah_attr.grh.dgid = mgid;
	p.ah_attr.grh.sgid_index = 3;
	p.ah_attr.grh.hop_limit = 1;
	return p;
}

} // namespace

TEST(VerbsMcast, InfiniBandJoinEvent)
{
	mcast_membership m;
	std::string why;
	const rdma_ud_param p = ib_event();
	ASSERT_EQ(membership_from_ud(p, true, &m, &why), 0) << why;
	EXPECT_EQ(m.mlid, 0xC003);
	EXPECT_EQ(m.qpn, mcast_qpn);
	EXPECT_EQ(m.qkey, uint32_t(RDMA_UDP_QKEY));
	EXPECT_EQ(memcmp(m.mgid.raw, p.ah_attr.grh.dgid.raw, 16), 0);
	EXPECT_EQ(m.ah_attr.dlid, 0xC003);
	EXPECT_EQ(m.ah_attr.sl, 2);
}

TEST(VerbsMcast, RoceJoinEventsV4AndV6)
{
	mcast_membership m;
	std::string why;
	const ibv_gid v4 = roce_v2_mgid_v4("239.1.1.1");
	ASSERT_EQ(membership_from_ud(roce_event(v4), false, &m, &why), 0) << why;
	EXPECT_EQ(m.mlid, 0); /* no MLID on Ethernet */
	EXPECT_EQ(m.ah_attr.grh.sgid_index, 3);
	/* The soft driver takes the same GID as the group (wire::gid: an
	 * IPv4-mapped multicast address), so one config names the group for
	 * both drivers. */
	wire::gid w;
	memcpy(w.raw, m.mgid.raw, 16);
	EXPECT_TRUE(w.is_multicast());
	EXPECT_EQ(w.v4(), inet_addr("239.1.1.1"));
	ASSERT_EQ(membership_from_ud(roce_event(gid_of("ff15::1:1")), false, &m, &why), 0) << why;
	EXPECT_EQ(m.mgid.raw[0], 0xff);
}

TEST(VerbsMcast, MalformedJoinEventsRefused)
{
	mcast_membership m;
	std::string why;
	rdma_ud_param p = ib_event();
	p.qp_num = 0x12;
	EXPECT_EQ(membership_from_ud(p, true, &m, &why), EPROTO);
	EXPECT_NE(why.find("QPN"), std::string::npos) << why;
	p = ib_event();
	p.ah_attr.dlid = 0x0005; /* a unicast LID */
	EXPECT_EQ(membership_from_ud(p, true, &m, &why), EPROTO);
	p.ah_attr.dlid = 0xFFFF; /* the permissive LID */
	EXPECT_EQ(membership_from_ud(p, true, &m, &why), EPROTO);
	p = ib_event();
	p.ah_attr.grh.dgid = gid_of("fe80::1");
	EXPECT_EQ(membership_from_ud(p, true, &m, &why), EPROTO);
	p = roce_event(roce_v2_mgid_v4("239.1.1.1"));
	p.ah_attr.is_global = 0;
	EXPECT_EQ(membership_from_ud(p, false, &m, &why), EPROTO);
	EXPECT_NE(why.find("GRH"), std::string::npos) << why;
	/* A unicast IPv4-mapped GID is no group; an IPv4-mapped group on
	 * InfiniBand is not an MGID either. */
	EXPECT_EQ(membership_from_ud(roce_event(roce_v2_mgid_v4("10.0.0.1")), false, &m, &why), EPROTO);
	p = ib_event();
	p.ah_attr.grh.dgid = roce_v2_mgid_v4("239.1.1.1");
	EXPECT_EQ(membership_from_ud(p, true, &m, &why), EPROTO);
}

TEST(VerbsMcast, ParseSockaddr)
{
	sockaddr_storage ss;
	ASSERT_EQ(parse_sockaddr("239.255.77.1", &ss), 0);
	EXPECT_EQ(ss.ss_family, AF_INET);
	EXPECT_EQ(reinterpret_cast<sockaddr_in *>(&ss)->sin_addr.s_addr, inet_addr("239.255.77.1"));
	ASSERT_EQ(parse_sockaddr("ff15::7701", &ss), 0);
	EXPECT_EQ(ss.ss_family, AF_INET6);
	ASSERT_EQ(parse_sockaddr("fe80::1%lo", &ss), 0);
	EXPECT_EQ(reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_scope_id, 1u);
	ASSERT_EQ(parse_sockaddr("fe80::1%7", &ss), 0);
	EXPECT_EQ(reinterpret_cast<sockaddr_in6 *>(&ss)->sin6_scope_id, 7u);
	EXPECT_EQ(parse_sockaddr("239.1.1", &ss), EINVAL);
	EXPECT_EQ(parse_sockaddr("fe80::1%no-such-if", &ss), EINVAL);
	EXPECT_EQ(parse_sockaddr("", &ss), EINVAL);
}

TEST(VerbsMcast, JoinArgumentChecks)
{
	rdmacm_group g;
	sockaddr_storage v4, v6;
	ASSERT_EQ(parse_sockaddr("239.1.1.1", &v4), 0);
	ASSERT_EQ(parse_sockaddr("ff15::1", &v6), 0);
	/* Never dereferenced: the checks come first. */
	auto *ctx = reinterpret_cast<ibv_context *>(uintptr_t(0x1000));
	auto *qp = reinterpret_cast<ibv_qp *>(uintptr_t(0x2000));
	EXPECT_EQ(g.join(nullptr, 1, false, nullptr, reinterpret_cast<sockaddr *>(&v4), rdmacm_group::role::publisher,
			 nullptr, 100),
		  EINVAL);
	EXPECT_EQ(g.join(ctx, 1, false, nullptr, reinterpret_cast<sockaddr *>(&v4), rdmacm_group::role::subscriber,
			 nullptr, 100),
		  EINVAL);
	EXPECT_NE(g.error().find("subscriber"), std::string::npos) << g.error();
	EXPECT_EQ(g.join(ctx, 1, false, reinterpret_cast<sockaddr *>(&v6), reinterpret_cast<sockaddr *>(&v4),
			 rdmacm_group::role::subscriber, qp, 100),
		  EINVAL);
	EXPECT_NE(g.error().find("families"), std::string::npos) << g.error();
	EXPECT_FALSE(g.joined());
	EXPECT_EQ(g.leave(), 0);
}

TEST(VerbsMcast, JoinWithoutRdmaCmDeviceFailsCleanly)
{
	if (access("/dev/infiniband/rdma_cm", F_OK) == 0)
		GTEST_SKIP() << "this machine has /dev/infiniband/rdma_cm: the hw suite covers the join";
	rdmacm_group g;
	sockaddr_storage grp;
	ASSERT_EQ(parse_sockaddr("239.1.1.1", &grp), 0);
	auto *ctx = reinterpret_cast<ibv_context *>(uintptr_t(0x1000)); /* not reached */
	for (int i = 0; i < 3; i++) { /* and again: nothing was left half open */
		EXPECT_EQ(g.join(ctx, 1, false, nullptr, reinterpret_cast<sockaddr *>(&grp),
				 rdmacm_group::role::publisher, nullptr, 100),
			  ENODEV);
		EXPECT_NE(g.error().find("rdma_cm"), std::string::npos) << g.error();
		EXPECT_FALSE(g.joined());
	}
	EXPECT_EQ(g.leave(), 0);
}

/* An IPv6 group on RoCEv2 joined without rdma_cm (it answers ENOTSUPP):
 * the membership is the one rdma_cm would have given, built locally. */
TEST(VerbsMcast, Ipv6RoceMembershipWithoutRdmaCm)
{
	in6_addr g{};
	ASSERT_EQ(inet_pton(AF_INET6, "ff15::7701", &g), 1);
	mcast_membership m;
	membership_ipv6_roce(g, 2, 1, &m);
	EXPECT_EQ(memcmp(m.mgid.raw, &g, 16), 0);
	EXPECT_EQ(memcmp(m.ah_attr.grh.dgid.raw, &g, 16), 0);
	EXPECT_EQ(m.ah_attr.is_global, 1);
	EXPECT_EQ(m.ah_attr.grh.sgid_index, 2);
	EXPECT_EQ(m.ah_attr.grh.hop_limit, 64);
	EXPECT_EQ(m.ah_attr.port_num, 1);
	EXPECT_EQ(m.ah_attr.dlid, 0);
	EXPECT_EQ(m.mlid, 0);
	EXPECT_EQ(m.qpn, mcast_qpn);
	EXPECT_EQ(m.qkey, uint32_t(RDMA_UDP_QKEY));
	/* It passes the same checks a join event's parameters get. */
	rdma_ud_param p{};
	p.ah_attr = m.ah_attr;
	p.qp_num = m.qpn;
	p.qkey = m.qkey;
	mcast_membership back;
	std::string why;
	EXPECT_EQ(membership_from_ud(p, false, &back, &why), 0) << why;
}
