/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The soft driver's multicast half that rdgram-mcast (tests/integration/
 * mcast.sh) relies on, at the API: attach/detach error codes as
 * ibv_attach_mcast(3) gives them, delivery to every attached QP only with
 * the multicast DQPN, the drop of a group nobody attached, and join/leave
 * reports counted per group (first join, last leave).
 */
#include <vector>

#include <gtest/gtest.h>

#include "eal_env.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

/* Side 0 sends one datagram to group g with DQPN dqpn; side 1 polls. */
uint16_t send_to_group(soft_pair &p, const wire::gid &g, uint32_t dqpn, recv_wc *wc)
{
	ibv_ah_attr a{};
	a.is_global = 1;
	a.port_num = 1;
	a.grh.hop_limit = 1;
	memcpy(a.grh.dgid.raw, g.raw, 16);
	int err = 0;
	ah_handle h = ah_null;
	g_rt->ctl().call([&] { h = p.dev[0].create_ah(a, &err); });
	EXPECT_EQ(err, 0);
	uint8_t pay[40] = {7};
	send_wr wr{};
	wr.ah = h;
	wr.remote_qpn = dqpn;
	wr.remote_qkey = p.qkey;
	wr.inline_data = pay;
	wr.inline_len = sizeof(pay);
	wr.flags = send_inline;
	EXPECT_EQ(p.q[0].tx_burst(&wr, 1), 1);
	p.q[0].tx_flush();
	uint16_t n = 0;
	for (int i = 0; i < 100 && n == 0; i++)
		n = p.q[1].rx_burst(wc, 4);
	g_rt->ctl().call([&] { p.dev[0].destroy_ah(h); });
	return n;
}

class SoftMcast : public ::testing::TestWithParam<bool> {};

TEST_P(SoftMcast, AttachErrors)
{
	soft_pair p(GetParam());
	ASSERT_TRUE(p.ok);
	const wire::gid g = ip_of(GetParam() ? "ff15::1:1" : "239.1.1.1");
	EXPECT_EQ(p.q[1].attach_mcast(p.qpn[1], p.addr[1]), EINVAL) << "unicast GID";
	EXPECT_EQ(p.q[1].attach_mcast(0x999, g), EINVAL) << "QP not on this queue";
	EXPECT_EQ(p.q[1].detach_mcast(p.qpn[1], g), EINVAL) << "not attached";
	ASSERT_EQ(p.q[1].attach_mcast(p.qpn[1], g), 0);
	EXPECT_EQ(p.q[1].attach_mcast(p.qpn[1], g), 0) << "again: no-op";
	ASSERT_EQ(p.q[1].add_qp(0x300, p.qkey), 0);
	EXPECT_EQ(p.q[1].detach_mcast(0x300, g), EINVAL) << "not attached (the group is, to another QP)";
	for (unsigned i = 1; i < soft::soft_queue::max_mcast; i++) {
		wire::gid x = g;
		x.raw[15] = uint8_t(i + 1);
		EXPECT_EQ(p.q[1].attach_mcast(0x300, x), 0);
	}
	wire::gid x = g;
	x.raw[15] = 0x77;
	EXPECT_EQ(p.q[1].attach_mcast(0x300, x), ENOMEM);
	EXPECT_EQ(p.q[1].detach_mcast(p.qpn[1], g), 0);
	EXPECT_EQ(p.q[1].nb_mcast(), soft::soft_queue::max_mcast - 1);
}

TEST_P(SoftMcast, EveryAttachedQpGetsItsCopy)
{
	soft_pair p(GetParam());
	ASSERT_TRUE(p.ok);
	const wire::gid g = ip_of(GetParam() ? "ff15::1:1" : "239.1.1.1");
	ASSERT_EQ(p.q[1].add_qp(0x300, p.qkey), 0);
	ASSERT_EQ(p.q[1].attach_mcast(p.qpn[1], g), 0);
	ASSERT_EQ(p.q[1].attach_mcast(0x300, g), 0) << "ibv_attach_mcast(3): a second QP of one queue";
	EXPECT_EQ(p.q[1].members_of(g), 2u);
	recv_wc wc[4];
	ASSERT_EQ(send_to_group(p, g, soft::soft_queue::mcast_qpn, wc), 1);
	recv_wc more[4];
	ASSERT_EQ(p.q[1].rx_burst(more, 4), 1) << "the copy, on the next burst";
	EXPECT_EQ(wc[0].qp_num, p.qpn[1]);
	EXPECT_EQ(more[0].qp_num, 0x300u);
	EXPECT_EQ(more[0].byte_len, wc[0].byte_len);
	EXPECT_EQ(memcmp(rte_pktmbuf_mtod(more[0].mbuf, const void *), rte_pktmbuf_mtod(wc[0].mbuf, const void *),
			 wc[0].byte_len),
		  0);
	EXPECT_EQ(p.q[1].counters().rx_group_copies, 1u);
	EXPECT_EQ(p.q[1].counters().rx_pkts, 2u);
	rte_pktmbuf_free(wc[0].mbuf);
	rte_pktmbuf_free(more[0].mbuf);
	/* The copy waiting when the queue goes is freed with it. */
	ASSERT_EQ(send_to_group(p, g, soft::soft_queue::mcast_qpn, wc), 1);
	rte_pktmbuf_free(wc[0].mbuf);
	EXPECT_EQ(p.q[1].detach(), 1u);
	EXPECT_EQ(p.in_use(1), 0u);
}

TEST_P(SoftMcast, DeliveredOnlyWhenAttached)
{
	soft_pair p(GetParam());
	ASSERT_TRUE(p.ok);
	const wire::gid g = ip_of(GetParam() ? "ff15::1:1" : "239.1.1.1");
	recv_wc wc[4];
	/* Not attached: the group is none of the port's addresses. */
	EXPECT_EQ(send_to_group(p, g, soft::soft_queue::mcast_qpn, wc), 0);
	EXPECT_EQ(p.q[1].counters().rx_dgid_mismatch, 1u);
	ASSERT_EQ(p.q[1].attach_mcast(p.qpn[1], g), 0);
	ASSERT_EQ(send_to_group(p, g, soft::soft_queue::mcast_qpn, wc), 1);
	EXPECT_EQ(wc[0].qp_num, p.qpn[1]);
	EXPECT_EQ(wc[0].dgid, g);
	EXPECT_EQ(wc[0].byte_len, wire::grh_len + 40);
	EXPECT_EQ(wc[0].src_qp, p.qpn[0]);
	rte_pktmbuf_free(wc[0].mbuf);
	/* To the group but a unicast DQPN: IBA wants 0xFFFFFF. */
	EXPECT_EQ(send_to_group(p, g, p.qpn[1], wc), 0);
	EXPECT_EQ(p.q[1].counters().rx_unknown_qpn, 1u);
	ASSERT_EQ(p.q[1].detach_mcast(p.qpn[1], g), 0);
	EXPECT_EQ(send_to_group(p, g, soft::soft_queue::mcast_qpn, wc), 0);
	EXPECT_EQ(p.q[1].counters().rx_dgid_mismatch, 2u);
	EXPECT_EQ(p.q[1].counters().rx_pkts, 1u);
}

TEST_P(SoftMcast, JoinLeaveReports)
{
	const bool v6 = GetParam();
	soft_pair p(v6);
	ASSERT_TRUE(p.ok);
	const wire::gid g = ip_of(v6 ? "ff15::1:1" : "239.1.1.1");
	const wire::gid other = ip_of(v6 ? "239.1.1.1" : "ff15::1:1");
	auto &d = p.dev[1];
	int rc = 0;
	g_rt->ctl().call([&] { rc = d.join_mcast(p.addr[0]); });
	EXPECT_EQ(rc, EINVAL) << "unicast";
	g_rt->ctl().call([&] { rc = d.join_mcast(other); });
	EXPECT_EQ(rc, EINVAL) << "no address of the group's family";
	g_rt->ctl().call([&] { rc = d.leave_mcast(g); });
	EXPECT_EQ(rc, EINVAL) << "not joined";
	g_rt->ctl().call([&] { rc = d.join_mcast(g) | d.join_mcast(g); });
	EXPECT_EQ(rc, 0);
	g_rt->ctl().call([&] { rc = d.leave_mcast(g); });
	EXPECT_EQ(rc, 0);
	auto reports = [&] { return v6 ? d.mcast_counters().mld_reports : d.mcast_counters().igmp_reports; };
	auto leaves = [&] { return v6 ? d.mcast_counters().mld_leaves : d.mcast_counters().igmp_leaves; };
	EXPECT_EQ(reports(), 1u) << "first join only";
	EXPECT_EQ(leaves(), 0u) << "still joined once";
	g_rt->ctl().call([&] { rc = d.leave_mcast(g); });
	EXPECT_EQ(rc, 0);
	EXPECT_EQ(leaves(), 1u);
	/* Queue 0 of side 1 puts them on the wire: side 0's ring gets two
	 * frames to the group's multicast MAC family. */
	recv_wc wc[4];
	p.q[1].rx_burst(wc, 4);
	void *objs[4] = {};
	ASSERT_EQ(rte_ring_dequeue_burst(p.ring[0], objs, 4, nullptr), 2u);
	for (void *o : objs)
		if (o != nullptr) {
			auto *m = static_cast<rte_mbuf *>(o);
			const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
			EXPECT_EQ(f[0], v6 ? 0x33 : 0x01);
			rte_pktmbuf_free(m);
		}
}

INSTANTIATE_TEST_SUITE_P(Families, SoftMcast, ::testing::Values(false, true),
			 [](const auto &i) { return i.param ? "ipv6" : "ipv4"; });

} // namespace
