/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * EFA receive semantics on the soft driver (soft_config::report_ahn): a
 * receive names its sender by the receiver's AH number for the sender's
 * GID in wc.slid, 0xFFFF when the receiver has none (the SGID is there
 * either way). Then the unknown-sender flow end to end: an unknown sender's
 * first datagram (0xFFFF) makes the control thread create the AH from the
 * completion and bind its ahn in an ahn_map, and the sender's next
 * datagrams are attributed to it in O(1).
 */
#include <vector>

#include <gtest/gtest.h>

#include "eal_env.h"
#include "rdgram/ah_from_wc.h"
#include "rdgram/ahn_map.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

soft_pair::config_fn with_ahn = [](soft::soft_config &c, int) { c.report_ahn = true; };

/* Side 0 sends one datagram to side 1 and side 1 receives it. */
recv_wc one_datagram(soft_pair &p, ah_handle to1, uint32_t tag)
{
	send_wr w{to1, p.qpn[1], p.qkey, nullptr, &tag, 4, 0, send_inline};
	EXPECT_EQ(p.q[0].tx_burst(&w, 1), 1);
	p.q[0].tx_flush();
	recv_wc wc{};
	for (int spin = 0; spin < 100000; spin++)
		if (p.q[1].rx_burst(&wc, 1) == 1)
			return wc;
	ADD_FAILURE() << "datagram lost";
	return wc;
}

ah_handle create(soft_pair &p, int side, const ibv_ah_attr &a)
{
	int err = -1;
	ah_handle h = ah_null;
	g_rt->ctl().call([&] { h = p.dev[side].create_ah(a, &err); });
	EXPECT_EQ(err, 0);
	return h;
}
int destroy(soft_pair &p, int side, ah_handle h)
{
	int rc = -1;
	g_rt->ctl().call([&] { rc = p.dev[side].destroy_ah(h); });
	return rc;
}

} // namespace

TEST(SoftAhn, SlidIsOurAhnForTheSender)
{
	for (bool v6 : {false, true}) {
		soft_pair p(v6, 4096, 1024, with_ahn);
		ASSERT_TRUE(p.ok);
		const ah_handle to1 = p.ah_from(0);
		/* Side 1 has no AH for side 0 yet: unknown. */
		recv_wc wc = one_datagram(p, to1, 1);
		EXPECT_EQ(wc.slid, 0xffff);
		EXPECT_EQ(wc.sgid, p.addr[0]) << "the SGID names an unknown sender";
		rte_pktmbuf_free(wc.mbuf);

		/* Side 1 creates two AHs to side 0 (another flow label): the
		 * first one's slot is the ahn receives report. */
		ibv_ah_attr a = soft_pair::attr_to(p.addr[0]);
		const ah_handle h1 = create(p, 1, a);
		a.grh.flow_label = 9;
		const ah_handle h2 = create(p, 1, a);
		wc = one_datagram(p, to1, 2);
		EXPECT_EQ(wc.slid, h1.slot);
		rte_pktmbuf_free(wc.mbuf);
		/* The reported AH goes: the other takes over. */
		EXPECT_EQ(destroy(p, 1, h1), 0);
		wc = one_datagram(p, to1, 3);
		EXPECT_EQ(wc.slid, h2.slot);
		rte_pktmbuf_free(wc.mbuf);
		EXPECT_EQ(destroy(p, 1, h2), 0);
		wc = one_datagram(p, to1, 4);
		EXPECT_EQ(wc.slid, 0xffff);
		rte_pktmbuf_free(wc.mbuf);
		/* Off by default: slid 0 on RoCE, as verbs reports. */
		EXPECT_EQ(p.in_use(0) + p.in_use(1), 0u);
	}
	soft_pair plain;
	ASSERT_TRUE(plain.ok);
	recv_wc wc = one_datagram(plain, plain.ah_from(0), 5);
	EXPECT_EQ(wc.slid, 0);
	rte_pktmbuf_free(wc.mbuf);
}

TEST(SoftAhn, MaxAhOver16BitsRefused)
{
	rte_ring *r = rte_ring_create("ahn_big", 256, SOCKET_ID_ANY, 0);
	ASSERT_NE(r, nullptr);
	const int port = rte_eth_from_rings("net_ahn_big", &r, 1, &r, 1, 0);
	ASSERT_GE(port, 0);
	soft::soft_device dev;
	soft::soft_config c;
	c.port_id = uint16_t(port);
	c.addresses = {ip_of("10.9.0.1")};
	c.max_ah = 70000;
	c.report_ahn = true;
	c.nb_mbufs = 511;
	EXPECT_EQ(dev.open(c), EINVAL);
	EXPECT_NE(dev.error().find("report_ahn"), std::string::npos);
	dev.close();
	rte_eth_dev_close(uint16_t(port));
	rte_ring_free(r);
}

/* The unknown-sender flow: 0xFFFF -> create the AH from the completion on
 * the control thread -> bind (ahn, src QPN, connection id) -> attributed. */
TEST(SoftAhn, UnknownSenderBecomesAttributed)
{
	soft_pair p(false, 4096, 1024, with_ahn);
	ASSERT_TRUE(p.ok);
	ahn_map peers;
	g_rt->ctl().call([&] { ASSERT_EQ(peers.init(64, SOCKET_ID_ANY, g_rt->qsbr()), 0); });
	gid_index gids;
	gids.build(p.dev[1].port().gids);
	const ah_handle to1 = p.ah_from(0);
	/* The connection id: side 0's Q_Key, as libfabric's EFA provider uses
	 * the endpoint's random Q_Key (here carried in the payload). */
	const uint32_t connid = 0xc0ffee;
	unsigned unknown = 0, attributed = 0;
	ah_handle created = ah_null;
	for (uint32_t i = 0; i < 10; i++) {
		recv_wc wc = one_datagram(p, to1, connid);
		uint32_t cid;
		memcpy(&cid, rte_pktmbuf_mtod_offset(wc.mbuf, void *, 40), 4);
		auto r = peers.lookup(wc.slid, wc.src_qp, cid);
		if (wc.slid == 0xffff || r.peer == ahn_map::nil) {
			unknown++;
			/* The control thread: AH from the completion, its ahn bound. */
			const void *grh = rte_pktmbuf_mtod(wc.mbuf, const void *);
			int err = 0;
			g_rt->ctl().call([&] {
				created = create_ah_from_wc(p.dev[1], gids, 1, wc, grh, &err);
				if (err == 0) {
					uint32_t peer;
					EXPECT_EQ(peers.bind(uint16_t(created.slot), wc.src_qp, cid, 0x5eed, &peer), 0);
				}
			});
			ASSERT_EQ(err, 0);
		} else {
			attributed++;
			EXPECT_EQ(peers.cookie(r.peer), 0x5eedu);
			EXPECT_EQ(wc.slid, created.slot);
		}
		rte_pktmbuf_free(wc.mbuf);
	}
	EXPECT_EQ(unknown, 1u) << "only the first datagram is unknown";
	EXPECT_EQ(attributed, 9u);
	EXPECT_EQ(destroy(p, 1, created), 0);
	g_rt->ctl().call([&] { peers.fini(); });
	EXPECT_EQ(p.in_use(0) + p.in_use(1), 0u);
}
