/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * AH attributes against ibv_create_ah(3) / ibv_destroy_ah(3) semantics on a
 * RoCE-type port (GRH required), run on the control thread.
 */
#include <gtest/gtest.h>

#include "eal_env.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

int create(soft_pair &p, const ibv_ah_attr &a, ah_handle *out)
{
	int err = -1;
	g_rt->ctl().call([&] { *out = p.dev[0].create_ah(a, &err); });
	if (err != 0) {
		EXPECT_EQ(*out, ah_null);
	}
	return err;
}

TEST(SoftAh, ErrnoPerCase)
{
	soft_pair p(false, 4096, 4);
	ASSERT_TRUE(p.ok);
	ah_handle h;
	ibv_ah_attr good = soft_pair::attr_to(p.addr[1]);

	ibv_ah_attr a = good;
	a.port_num = 2;
	EXPECT_EQ(create(p, a, &h), EINVAL) << "bad port";
	a = good;
	a.port_num = 0;
	EXPECT_EQ(create(p, a, &h), EINVAL) << "port 0";
	a = good;
	a.is_global = 0;
	EXPECT_EQ(create(p, a, &h), EINVAL) << "RoCE port requires a GRH";
	a = good;
	a.grh.sgid_index = 1;
	EXPECT_EQ(create(p, a, &h), EINVAL) << "sgid_index beyond the GID table";
	a = good;
	memset(a.grh.dgid.raw, 0, 16);
	EXPECT_EQ(create(p, a, &h), EINVAL) << "zero dgid";
	a = soft_pair::attr_to(ip_of("fd00::9"));
	EXPECT_EQ(create(p, a, &h), EINVAL) << "IPv6 dgid from an IPv4 sgid";
	a = good;
	a.grh.flow_label = 0x100000;
	EXPECT_EQ(create(p, a, &h), EINVAL) << "flow label over 20 bits";
	a = soft_pair::attr_to(ip_of("10.1.0.77"));
	EXPECT_EQ(create(p, a, &h), EHOSTUNREACH) << "no neighbour for the dgid";

	/* Multicast needs no neighbour: the MAC comes from the group. */
	a = soft_pair::attr_to(ip_of("239.1.2.3"));
	ASSERT_EQ(create(p, a, &h), 0);
	const soft::soft_av *av = p.dev[0].ahs().lookup(h);
	ASSERT_NE(av, nullptr);
	const uint8_t want[6] = {0x01, 0x00, 0x5e, 0x01, 0x02, 0x03};
	EXPECT_EQ(0, memcmp(av->hdr, want, 6));

	/* Table of 4: three more fit, the fifth gets ENOMEM. */
	ah_handle hs[3];
	for (auto &x : hs)
		ASSERT_EQ(create(p, good, &x), 0);
	EXPECT_EQ(create(p, good, &h), ENOMEM) << "table full";

	/* Destroy: 0, then EINVAL for the same handle again and for junk. */
	int rc = -1;
	g_rt->ctl().call([&] { rc = p.dev[0].destroy_ah(hs[0]); });
	EXPECT_EQ(rc, 0);
	g_rt->ctl().call([&] { rc = p.dev[0].destroy_ah(hs[0]); });
	EXPECT_EQ(rc, EINVAL) << "double destroy";
	g_rt->ctl().call([&] { rc = p.dev[0].destroy_ah(ah_handle{1000, 1}); });
	EXPECT_EQ(rc, EINVAL) << "out of range";
	g_rt->ctl().call([&] { rc = p.dev[0].destroy_ah(ah_null); });
	EXPECT_EQ(rc, EINVAL) << "null handle";

	/* Fault switch: the next create fails with the injected errno. */
	g_rt->ctl().call([&] { p.dev[0].inject_create_error(EAGAIN); });
	EXPECT_EQ(create(p, good, &h), EAGAIN);
}

/* A destroyed slot is not reused until every poll thread has passed a
 * quiescent state, and a stale handle never reads the new occupant. */
TEST(SoftAh, SlotReuseWaitsForGracePeriod)
{
	soft_pair p(false, 4096, 1);
	ASSERT_TRUE(p.ok);
	const unsigned tid = 7;
	poll_thread_online(g_rt->qsbr(), tid); /* a poll thread that has not moved */
	ah_handle h = p.ah_from(0);
	ASSERT_NE(h, ah_null);
	int rc;
	g_rt->ctl().call([&] { rc = p.dev[0].destroy_ah(h); });
	EXPECT_EQ(rc, 0);
	int err = 0;
	ah_handle h2 = p.ah_from(0, &err);
	EXPECT_EQ(err, ENOMEM) << "the only slot is still in its grace period";
	rte_rcu_qsbr_quiescent(g_rt->qsbr(), tid);
	h2 = p.ah_from(0, &err);
	EXPECT_EQ(err, 0);
	EXPECT_EQ(h2.slot, h.slot);
	EXPECT_NE(h2.gen, h.gen);
	EXPECT_EQ(p.dev[0].ahs().lookup(h), nullptr) << "stale handle must miss";
	EXPECT_NE(p.dev[0].ahs().lookup(h2), nullptr);
	poll_thread_offline(g_rt->qsbr(), tid);
	g_rt->ctl().call([&] { p.dev[0].destroy_ah(h2); });
}

} // namespace

/* NUMA replicas: every replica gets the AV before its generation, retire
 * and in-place updates reach all of them, a poll thread picks its node's.
 * (This machine has one node: the second replica is "any node", which
 * exercises the same code.) */
TEST(SoftAh, ReplicasStayIdentical)
{
	ah_table<soft::soft_av> t;
	const int nodes[3] = {0, SOCKET_ID_ANY, 0};
	ASSERT_EQ(t.init(64, nodes, 3, nullptr), 0);
	EXPECT_EQ(t.replicas(), 2u) << "duplicate nodes share a replica";
	EXPECT_EQ((ah_table<soft::soft_av>::bytes_per_replica), 64u);
	uint32_t slot;
	ASSERT_TRUE(t.reserve(&slot));
	soft::soft_av &av = t.av_at(slot);
	for (unsigned i = 0; i < sizeof(av.hdr); i++)
		av.hdr[i] = uint8_t(i * 7);
	av.l3 = 4;
	/* Not published yet: no replica answers. */
	EXPECT_EQ(t.replica(1).lookup(ah_handle{slot, 1}), nullptr);
	const ah_handle h = t.publish(slot);
	const soft::soft_av *a0 = t.replica(0).lookup(h);
	const soft::soft_av *a1 = t.replica(1).lookup(h);
	ASSERT_NE(a0, nullptr);
	ASSERT_NE(a1, nullptr);
	EXPECT_NE(a0, a1) << "separate memory per replica";
	EXPECT_EQ(memcmp(a0, a1, sizeof(*a0)), 0);
	EXPECT_EQ(reinterpret_cast<uintptr_t>(a1) % 64, 0u);
	rte_ether_addr m = mac("02:aa:bb:cc:dd:ee");
	t.update(slot, [&](soft::soft_av &x) { soft::set_av_mac(x, m); });
	EXPECT_EQ(memcmp(a0->hdr, m.addr_bytes, 6), 0);
	EXPECT_EQ(memcmp(a1->hdr, m.addr_bytes, 6), 0);
	EXPECT_EQ(t.for_socket(SOCKET_ID_ANY).lookup(h), a1);
	EXPECT_EQ(t.for_socket(0).lookup(h), a0);
	EXPECT_EQ(t.for_socket(5).lookup(h), a0) << "no replica there: replica 0";
	EXPECT_EQ(t.retire(h), 0);
	EXPECT_EQ(t.replica(0).lookup(h), nullptr);
	EXPECT_EQ(t.replica(1).lookup(h), nullptr);
	EXPECT_EQ(t.retire(h), EINVAL);
}
