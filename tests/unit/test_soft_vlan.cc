/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * 802.1Q VLANs, DSCP and ECN on the soft driver (soft_params.h vlan, ecn),
 * through the real port (net_ring) and the real bursts: the tag and the
 * TOS/traffic-class byte as they are on the wire, the PCP back as wc.sl and
 * into the reply's AH, and every VLAN drop reason (ARP/ND between two VLAN
 * ports: test_soft_neigh.cc) with exactly its counter and every mbuf back in its
 * pool.
 */
#include <cerrno>
#include <cstring>
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "eal_env.h"
#include "rdgram/ah_from_wc.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

constexpr uint16_t vid = 100;

uint8_t *frame(rte_mbuf *m) { return rte_pktmbuf_mtod(m, uint8_t *); }
uint16_t be16_at(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }

soft_pair::config_fn with(uint16_t vlan0, uint16_t vlan1, bool ecn = false)
{
	return [=](soft::soft_config &c, int side) {
		c.vlan = side == 0 ? vlan0 : vlan1;
		c.ecn = ecn;
	};
}

/* Side 0 sends one datagram to side 1 with an AH of this SL and traffic
 * class; the frame is taken off the wire and returned (nullptr: none). */
rte_mbuf *send_one(soft_pair &p, uint8_t sl, uint8_t tclass, ah_handle *ah = nullptr, int *err = nullptr)
{
	ibv_ah_attr a = soft_pair::attr_to(p.addr[1]);
	a.sl = sl;
	a.grh.traffic_class = tclass;
	int e = 0;
	ah_handle h = ah_null;
	g_rt->ctl().call([&] { h = p.dev[0].create_ah(a, &e); });
	if (err != nullptr)
		*err = e;
	if (h == ah_null)
		return nullptr;
	uint8_t b[16];
	memset(b, 0x5a, sizeof(b));
	send_wr wr{h, p.qpn[1], p.qkey, nullptr, b, sizeof(b), 0, send_inline};
	EXPECT_EQ(p.q[0].tx_burst(&wr, 1), 1);
	p.q[0].tx_flush();
	void *obj = nullptr;
	EXPECT_EQ(rte_ring_dequeue(p.ring[1], &obj), 0);
	if (ah != nullptr)
		*ah = h;
	else
		g_rt->ctl().call([&] { p.dev[0].destroy_ah(h); });
	return static_cast<rte_mbuf *>(obj);
}

/* The frame back onto side 1's wire; what side 1's rx_burst delivers. */
unsigned deliver(soft_pair &p, rte_mbuf *m, recv_wc *wc)
{
	EXPECT_EQ(rte_ring_enqueue(p.ring[1], m), 0);
	return p.q[1].rx_burst(wc, 4);
}

/* The tag out of a frame, as a PMD's strip offload takes it. */
void strip(rte_mbuf *m)
{
	uint8_t *f = frame(m);
	m->vlan_tci = be16_at(f + 14);
	memmove(f + 4, f, 12);
	rte_pktmbuf_adj(m, 4);
	m->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
}

class SoftVlan : public ::testing::TestWithParam<bool> {};

/* Tag on the wire (TPID 0x8100, PCP = the AH's SL, the port's VLAN ID),
 * the ICRC unchanged by it, the PCP back as wc.sl and in the reply's AH. */
TEST_P(SoftVlan, TaggedBothWaysAndPcpIsTheSl)
{
	const bool v6 = GetParam();
	soft_pair p(v6, 1024, 1024, with(vid, vid));
	ASSERT_TRUE(p.ok);
	for (uint8_t sl : {0, 5, 7}) {
		SCOPED_TRACE(int(sl));
		rte_mbuf *m = send_one(p, sl, 0);
		ASSERT_NE(m, nullptr);
		const uint8_t *f = frame(m);
		EXPECT_EQ(be16_at(f + 12), RTE_ETHER_TYPE_VLAN);
		EXPECT_EQ(be16_at(f + 14), uint16_t(sl << 13 | vid));
		EXPECT_EQ(be16_at(f + 16), v6 ? RTE_ETHER_TYPE_IPV6 : RTE_ETHER_TYPE_IPV4);
		EXPECT_EQ(0, memcmp(f, p.hw[1].addr_bytes, 6)) << "destination MAC kept in front";
		EXPECT_EQ(0, memcmp(f + 6, p.hw[0].addr_bytes, 6));
		recv_wc wc[4];
		ASSERT_EQ(deliver(p, m, wc), 1u);
		EXPECT_EQ(wc[0].sl, sl);
		EXPECT_EQ(wc[0].src_qp, p.qpn[0]);

		port_attr pa = p.dev[1].port();
		gid_index gi;
		gi.build(pa.gids);
		ibv_ah_attr a;
		ASSERT_EQ(init_ah_from_wc(pa, gi, 1, wc[0], rte_pktmbuf_mtod(wc[0].mbuf, void *), &a), 0);
		EXPECT_EQ(a.sl, sl) << "the reply travels in its request's priority class";
		rte_pktmbuf_free(wc[0].mbuf);
	}
	const soft::soft_counters &k = p.q[1].counters();
	EXPECT_EQ(k.rx_drops(), 0u);
	EXPECT_EQ(p.in_use(1), 0u);
}

/* A PMD that strips the tag (RTE_MBUF_F_RX_VLAN_STRIPPED, vlan_tci): the
 * same delivery, the same PCP. */
TEST_P(SoftVlan, StrippedByThePmd)
{
	soft_pair p(GetParam(), 1024, 1024, with(vid, vid));
	ASSERT_TRUE(p.ok);
	rte_mbuf *m = send_one(p, 3, 0);
	ASSERT_NE(m, nullptr);
	strip(m);
	recv_wc wc[4];
	ASSERT_EQ(deliver(p, m, wc), 1u);
	EXPECT_EQ(wc[0].sl, 3);
	rte_pktmbuf_free(wc[0].mbuf);
	EXPECT_EQ(p.in_use(1), 0u);
}

/* ibv_create_ah(3): on a VLAN port the SL is a 3-bit priority. */
TEST_P(SoftVlan, SlAboveSevenIsEinvalOnAVlanPort)
{
	soft_pair p(GetParam(), 1024, 1024, with(vid, 0));
	ASSERT_TRUE(p.ok);
	int e = 0;
	EXPECT_EQ(send_one(p, 8, 0, nullptr, &e), nullptr);
	EXPECT_EQ(e, EINVAL);
	/* An untagged port carries no priority: the SL is accepted as IB's. */
	soft_pair u(GetParam());
	ASSERT_TRUE(u.ok);
	rte_mbuf *m = send_one(u, 9, 0, nullptr, &e);
	ASSERT_NE(m, nullptr);
	EXPECT_EQ(e, 0);
	EXPECT_EQ(be16_at(frame(m) + 12), GetParam() ? RTE_ETHER_TYPE_IPV6 : RTE_ETHER_TYPE_IPV4) << "untagged";
	rte_pktmbuf_free(m);
}

/* The AH's traffic class is the TOS byte / IPv6 traffic class; with ecn,
 * ECT(0) where it has no ECN bits. A CE mark received is counted, kept in
 * the GRH area, and not echoed by the reply's AH. */
TEST_P(SoftVlan, DscpEcnAndCe)
{
	const bool v6 = GetParam();
	auto tclass_of = [v6](rte_mbuf *m) {
		const uint8_t *ip = frame(m) + 14;
		return v6 ? uint8_t((ip[0] & 0xf) << 4 | ip[1] >> 4) : ip[1];
	};
	struct c {
		bool ecn;
		uint8_t ah, wire;
	} cases[] = {
		{false, 0xb8, 0xb8}, /* DSCP EF, Not-ECT: as the AH says */
		{false, 0x00, 0x00},
		{true, 0x00, 0x02},  /* ECT(0) added */
		{true, 0xb8, 0xba},
		{true, 0x49, 0x49},  /* ECT(1) the AH's own: kept */
		{true, 0x4b, 0x4b},  /* CE asked for: kept (the AH's word) */
	};
	for (const c &x : cases) {
		SCOPED_TRACE(testing::Message() << "ecn " << x.ecn << " tclass " << int(x.ah));
		soft_pair p(v6, 1024, 1024, with(0, 0, x.ecn));
		ASSERT_TRUE(p.ok);
		rte_mbuf *m = send_one(p, 0, x.ah);
		ASSERT_NE(m, nullptr);
		EXPECT_EQ(tclass_of(m), x.wire);
		recv_wc wc[4];
		ASSERT_EQ(deliver(p, m, wc), 1u);
		EXPECT_EQ(p.q[1].counters().rx_ecn_ce, (x.wire & 3) == 3 ? 1u : 0u);
		rte_pktmbuf_free(wc[0].mbuf);
	}

	/* A switch marks CE on the way (the ICRC masks the byte; IPv4's header
	 * checksum is recomputed as a router does). */
	soft_pair p(v6, 1024, 1024, with(0, 0, true));
	ASSERT_TRUE(p.ok);
	rte_mbuf *m = send_one(p, 0, 0xb8);
	ASSERT_NE(m, nullptr);
	uint8_t *ip = frame(m) + 14;
	if (v6) {
		ip[1] |= 0x30;
	} else {
		auto *h = reinterpret_cast<rte_ipv4_hdr *>(ip);
		h->type_of_service |= 3;
		h->hdr_checksum = 0;
		h->hdr_checksum = rte_ipv4_cksum(h);
	}
	recv_wc wc[4];
	ASSERT_EQ(deliver(p, m, wc), 1u);
	EXPECT_EQ(p.q[1].counters().rx_ecn_ce, 1u);
	const uint8_t *grh = rte_pktmbuf_mtod(wc[0].mbuf, const uint8_t *);
	EXPECT_EQ(v6 ? uint8_t((grh[0] & 0xf) << 4 | grh[1] >> 4) : grh[21], 0xbb) << "CE delivered in the GRH";
	port_attr pa = p.dev[1].port();
	gid_index gi;
	gi.build(pa.gids);
	ibv_ah_attr a;
	ASSERT_EQ(init_ah_from_wc(pa, gi, 1, wc[0], grh, &a), 0);
	EXPECT_EQ(a.grh.traffic_class, 0xba) << "DSCP kept, CE not echoed (ECT(0))";
	rte_pktmbuf_free(wc[0].mbuf);
	EXPECT_EQ(p.in_use(1), 0u);
}

INSTANTIATE_TEST_SUITE_P(V4V6, SoftVlan, ::testing::Bool(), [](const auto &i) { return i.param ? "ipv6" : "ipv4"; });

/* Every VLAN drop: one frame, exactly its counter, nothing delivered,
 * every mbuf back. */
struct VlanDrop {
	const char *name;
	uint16_t tx_vlan, rx_vlan; /* sender's and receiver's port vlan */
	std::function<void(rte_mbuf *)> mut;
	uint64_t soft::soft_counters::*counter;
};

class SoftVlanDrops : public ::testing::TestWithParam<VlanDrop> {};

TEST_P(SoftVlanDrops, CountedAndFreed)
{
	const VlanDrop &c = GetParam();
	soft_pair p(false, 1024, 1024, with(c.tx_vlan, c.rx_vlan));
	ASSERT_TRUE(p.ok);
	rte_mbuf *m = send_one(p, 2, 0);
	ASSERT_NE(m, nullptr);
	if (c.mut)
		c.mut(m);
	recv_wc wc[4];
	EXPECT_EQ(deliver(p, m, wc), 0u);
	const soft::soft_counters &k = p.q[1].counters();
	EXPECT_EQ(k.*(c.counter), 1u) << c.name;
	EXPECT_EQ(k.rx_drops(), 1u) << "exactly one drop, under its own reason";
	EXPECT_EQ(k.rx_not_ip, 0u) << "a VLAN frame is not 'not IP'";
	EXPECT_EQ(p.in_use(1), 0u);
}

/* A second 802.1Q tag (or an 802.1ad one) pushed in front of the first. */
void push_tag(rte_mbuf *m, uint16_t tpid, uint16_t tci)
{
	auto *f = reinterpret_cast<uint8_t *>(rte_pktmbuf_prepend(m, 4));
	memmove(f, f + 4, 12);
	f[12] = uint8_t(tpid >> 8), f[13] = uint8_t(tpid);
	f[14] = uint8_t(tci >> 8), f[15] = uint8_t(tci);
}

const VlanDrop drops[] = {
	{"other_vlan", 200, vid, nullptr, &soft::soft_counters::rx_vlan_other},
	{"other_vlan_stripped", 200, vid, strip, &soft::soft_counters::rx_vlan_other},
	{"priority_tag_on_vlan_port", vid, vid, [](rte_mbuf *m) { frame(m)[14] &= 0xf0, frame(m)[15] = 0; },
	 &soft::soft_counters::rx_vlan_other},
	{"untagged_on_vlan_port", 0, vid, nullptr, &soft::soft_counters::rx_vlan_untagged},
	{"tagged_on_untagged_port", vid, 0, nullptr, &soft::soft_counters::rx_vlan_tagged},
	{"stripped_on_untagged_port", vid, 0, strip, &soft::soft_counters::rx_vlan_tagged},
	{"qinq_8100", vid, vid, [](rte_mbuf *m) { push_tag(m, RTE_ETHER_TYPE_VLAN, vid); },
	 &soft::soft_counters::rx_vlan_double_tagged},
	{"qinq_88a8", vid, vid, [](rte_mbuf *m) { push_tag(m, RTE_ETHER_TYPE_QINQ, 7); },
	 &soft::soft_counters::rx_vlan_double_tagged},
	{"qinq_outer_stripped", vid, vid,
	 [](rte_mbuf *m) {
		 push_tag(m, RTE_ETHER_TYPE_QINQ, 7);
		 strip(m); /* the S-tag out; the C-tag still in the frame */
	 },
	 &soft::soft_counters::rx_vlan_double_tagged},
	{"truncated_tag", vid, vid, [](rte_mbuf *m) { rte_pktmbuf_trim(m, uint16_t(rte_pktmbuf_pkt_len(m) - 16)); },
	 &soft::soft_counters::rx_truncated},
};

INSTANTIATE_TEST_SUITE_P(Reasons, SoftVlanDrops, ::testing::ValuesIn(drops),
			 [](const auto &i) { return std::string(i.param.name); });

/* A priority-tagged frame (VLAN ID 0, 802.1Q 9.6) on an untagged port is
 * that port's own traffic: delivered with its PCP. */
TEST(SoftVlanPriority, PriorityTagOnUntaggedPort)
{
	soft_pair p(false);
	ASSERT_TRUE(p.ok);
	rte_mbuf *m = send_one(p, 0, 0);
	ASSERT_NE(m, nullptr);
	push_tag(m, RTE_ETHER_TYPE_VLAN, 6 << 13);
	recv_wc wc[4];
	ASSERT_EQ(deliver(p, m, wc), 1u);
	EXPECT_EQ(wc[0].sl, 6);
	rte_pktmbuf_free(wc[0].mbuf);
	EXPECT_EQ(p.in_use(1), 0u);
}

/* An out-of-range VLAN ID set in code (configs are checked by their
 * loader): open refuses it with EINVAL and says why. */
TEST(SoftVlanConfig, OpenRefusesVlan4095)
{
	rte_ring *r = rte_ring_create("vlan4095", 64, SOCKET_ID_ANY, 0);
	ASSERT_NE(r, nullptr);
	const int port = rte_eth_from_rings("net_vlan4095", &r, 1, &r, 1, 0);
	ASSERT_GE(port, 0);
	soft::soft_config c;
	c.port_id = uint16_t(port);
	c.addresses = {ip_of("10.1.0.1")};
	c.qsbr = g_rt->qsbr();
	c.vlan = 4095;
	soft::soft_device d;
	EXPECT_EQ(d.open(c), EINVAL);
	EXPECT_NE(d.error().find("vlan 4095"), std::string::npos) << d.error();
	rte_eth_dev_close(uint16_t(port));
	rte_ring_free(r);
}

} // namespace
