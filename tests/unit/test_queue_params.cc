/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The queue contract (rdgram/device.h, rdgram/queue_params.h) on every
 * driver built: create_queue refuses each field of queue_params the driver
 * cannot honour with EINVAL and an error() naming it, and the mempool
 * policy holds (the device's own pool, or the caller's, is full again once
 * the queues are destroyed and the device closed).
 *
 * soft runs for real on a net_ring port that loops to itself: frames stuck
 * in a queue's TX stash are freed by destroy_queue, the queue pair can be
 * created again and receives what the port still held. verbs, mlx5 and EFA
 * check queue_params before they touch a device, so their refusals run
 * here on a device that is not open (no RDMA device on this machine); the
 * full create, destroy, create again cycle on them runs where a device is:
 * verbs on rxe in the lab (tests/lab/verbs_peer.cc), mlx5 and EFA in
 * tests/hw/.
 */
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "eal_env.h"
#include "rdgram/queue_params.h"
#include "soft_device.h"
#ifdef RDGRAM_TEST_VERBS
#include "ibv_device.h"
#include "verbs_device.h"
#endif
#ifdef RDGRAM_TEST_MLX5
#include "mlx5_device.h"
#endif
#ifdef RDGRAM_TEST_EFA
#include "efa_device.h"
#endif

using namespace rdgram;
using rdgram::test::g_rt;

namespace {

/* create_queue(p) must be EINVAL with field in error(). */
template <class Dev>
void expect_refused(Dev &dev, const queue_params &p, const char *field)
{
	typename Dev::queue_type q;
	EXPECT_EQ(dev.create_queue(p, q), EINVAL) << field;
	EXPECT_NE(dev.error().find(std::string("queue_params.") + field), std::string::npos)
		<< field << ": error() says: " << dev.error();
}

/* A net_ring port with two queue pairs, each TX ring its own RX ring:
 * what a queue sends it receives. ring_size small, so the port fills and
 * tx_burst stashes. */
struct soft_loop {
	rte_ring *ring[2] = {};
	uint16_t port = 0;
	bool ok = false;
	explicit soft_loop(const char *name, unsigned ring_size)
	{
		for (int i = 0; i < 2; i++) {
			ring[i] = rte_ring_create((std::string(name) + char('a' + i)).c_str(), ring_size, SOCKET_ID_ANY, 0);
			if (ring[i] == nullptr)
				return;
		}
		const int p = rte_eth_from_rings((std::string("net_") + name).c_str(), ring, 2, ring, 2, 0);
		if (p < 0)
			return;
		port = uint16_t(p);
		ok = true;
	}
	~soft_loop()
	{
		if (ok)
			rte_eth_dev_close(port);
		for (rte_ring *r : ring)
			rte_ring_free(r);
	}
	soft::soft_config config(rte_mempool *pool) const
	{
		soft::soft_config c;
		c.port_id = port;
		c.set_mac = true;
		c.mac = test::mac("02:00:00:00:0a:01");
		c.addresses = {test::ip_of("10.9.0.1")};
		c.neighbours = {{c.addresses[0], c.mac}}; /* itself */
		c.resolve = false;
		c.nb_queues = 2;
		c.mtu = 1024;
		c.nb_mbufs = 1023;
		c.pool = pool;
		c.qsbr = g_rt->qsbr();
		return c;
	}
};

TEST(QueueParams, SoftRefusesWhatItCannotHonour)
{
	soft_loop l("qp_soft0", 256);
	ASSERT_TRUE(l.ok);
	soft::soft_device dev;
	{
		queue_params p;
		soft::soft_queue q;
		EXPECT_EQ(dev.create_queue(p, q), ENODEV) << "not open";
	}
	ASSERT_EQ(dev.open(l.config(nullptr)), 0) << dev.error();
	queue_params p;
	p.index = 2;
	expect_refused(dev, p, "index");
	p = {};
	p.qkey = 0x11111111;
	expect_refused(dev, p, "qkey");
	p = {};
	p.sq_depth = dev.tx_desc() + 1u;
	expect_refused(dev, p, "sq_depth");
	p = {};
	p.rq_depth = dev.rx_desc() / 2u;
	expect_refused(dev, p, "rq_depth");
	p = {};
	p.max_inline = 64;
	expect_refused(dev, p, "max_inline");
	p = {};
	p.signal_every = 1;
	expect_refused(dev, p, "signal_every");
	p = {};
	p.recv_batch = 32;
	expect_refused(dev, p, "recv_batch");

	/* The port's own descriptor counts are what soft has: accepted. */
	p = {};
	p.index = 1;
	p.sq_depth = dev.tx_desc();
	p.rq_depth = dev.rx_desc();
	soft::soft_queue q1, again;
	EXPECT_EQ(dev.create_queue(p, q1), 0) << dev.error();
	/* One live queue per queue pair. */
	EXPECT_EQ(dev.create_queue(p, again), EBUSY);
	dev.destroy_queue(q1);
	EXPECT_EQ(dev.create_queue(p, again), 0) << dev.error();
	dev.destroy_queue(again);
	dev.destroy_queue(again); /* twice: nothing */
	EXPECT_EQ(dev.register_mempool(dev.mempool()), 0) << "soft: nothing to register";

	/* The device's own pool: made at open, freed at close. */
	char name[RTE_MEMPOOL_NAMESIZE];
	snprintf(name, sizeof(name), "%s", dev.mempool()->name);
	EXPECT_NE(rte_mempool_lookup(name), nullptr);
	dev.close();
	EXPECT_EQ(rte_mempool_lookup(name), nullptr) << "the device's own pool outlived close";
}

TEST(QueueParams, SoftDestroyFreesTheStashAndTheCallersPoolIsFullAfterClose)
{
	/* 64 slots: a burst of 96 leaves frames in the queue's stash. */
	soft_loop l("qp_soft1", 64);
	ASSERT_TRUE(l.ok);
	rte_mempool *mp = rte_pktmbuf_pool_create("qp_pool", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE + 2048,
						  SOCKET_ID_ANY);
	ASSERT_NE(mp, nullptr);
	{
		soft::soft_device dev;
		ASSERT_EQ(dev.open(l.config(mp)), 0) << dev.error();
		EXPECT_EQ(dev.mempool(), mp);
		soft::soft_queue q;
		ASSERT_EQ(dev.create_queue({}, q), 0) << dev.error();
		ASSERT_EQ(q.add_qp(0x300, 0x4242), 0);
		ibv_ah_attr a{};
		a.is_global = 1;
		a.port_num = 1;
		a.grh.hop_limit = 64;
		memcpy(a.grh.dgid.raw, dev.port().gids[0].raw, 16); /* itself */
		int err = 0;
		ah_handle h = ah_null;
		g_rt->ctl().call([&] { h = dev.create_ah(a, &err); });
		ASSERT_EQ(err, 0);

		uint8_t pay[32] = {1, 2, 3};
		send_wr w[32];
		unsigned taken = 0;
		for (int round = 0; round < 3; round++) {
			for (auto &x : w)
				x = send_wr{h, 0x300, 0x4242, nullptr, pay, sizeof(pay), 0, send_inline};
			taken += q.tx_burst(w, 32);
		}
		const unsigned stashed = q.tx_pending();
		ASSERT_GT(stashed, 0u) << "the port never filled";
		const unsigned in_ring = rte_ring_count(l.ring[0]);
		EXPECT_EQ(taken, stashed + in_ring);
		EXPECT_EQ(rte_mempool_in_use_count(mp), taken);
		/* destroy_queue frees the stash; the port keeps what it took. */
		dev.destroy_queue(q);
		EXPECT_EQ(q.tx_pending(), 0u);
		EXPECT_EQ(rte_mempool_in_use_count(mp), in_ring);

		/* The queue pair again: it receives what the port held. */
		ASSERT_EQ(dev.create_queue({}, q), 0) << dev.error();
		ASSERT_EQ(q.add_qp(0x300, 0x4242), 0);
		recv_wc wc[32];
		unsigned got = 0;
		for (int spin = 0; spin < 1000 && got < in_ring; spin++) {
			const uint16_t n = q.rx_burst(wc, 32);
			for (uint16_t i = 0; i < n; i++) {
				EXPECT_EQ(wc[i].byte_len, wire::grh_len + sizeof(pay));
				rte_pktmbuf_free(wc[i].mbuf);
			}
			got += n;
		}
		EXPECT_EQ(got, in_ring);
		g_rt->ctl().call([&] { EXPECT_EQ(dev.destroy_ah(h), 0); });
		dev.destroy_queue(q);
		dev.close();
	}
	EXPECT_NE(rte_mempool_lookup("qp_pool"), nullptr) << "close freed the caller's pool";
	EXPECT_EQ(rte_mempool_avail_count(mp), mp->size) << "not every mbuf is back in the caller's pool";
	rte_mempool_free(mp);
}

TEST(QueueParams, SoftRefusesAGivenPoolTooSmall)
{
	soft_loop l("qp_soft2", 64);
	ASSERT_TRUE(l.ok);
	rte_mempool *mp = rte_pktmbuf_pool_create("qp_small", 255, 0, 0, RTE_PKTMBUF_HEADROOM + 512, SOCKET_ID_ANY);
	ASSERT_NE(mp, nullptr);
	soft::soft_device dev;
	EXPECT_EQ(dev.open(l.config(mp)), EINVAL);
	EXPECT_NE(dev.error().find("pool"), std::string::npos) << dev.error();
	dev.close();
	EXPECT_NE(rte_mempool_lookup("qp_small"), nullptr) << "the caller's pool is the caller's";
	rte_mempool_free(mp);
}

#ifdef RDGRAM_TEST_VERBS
/* The pool policy verbs, mlx5 and EFA share (drivers/common/ibv
 * device_pool): a given pool is kept when its room holds headroom + GRH +
 * MTU and refused otherwise; without one, a pool of that room is made and
 * the device owns it. */
TEST(QueueParams, IbvDevicePoolKeepsTheCallersOrMakesItsOwn)
{
	const uint32_t mtu = 1024, room = RTE_PKTMBUF_HEADROOM + 40 + mtu;
	rte_mempool *out = nullptr;
	bool owned = true;
	std::string why;
	rte_mempool *small = rte_pktmbuf_pool_create("qp_ibv_small", 63, 0, 0, uint16_t(room - 1), SOCKET_ID_ANY);
	ASSERT_NE(small, nullptr);
	EXPECT_EQ(ibv::device_pool(small, 0, mtu, SOCKET_ID_ANY, "qp_ibv", &out, &owned, &why), EINVAL);
	EXPECT_EQ(out, nullptr);
	EXPECT_FALSE(owned);
	EXPECT_NE(why.find("short of headroom + 40 (GRH) + MTU = " + std::to_string(room)), std::string::npos) << why;
	rte_mempool_free(small);

	rte_mempool *given = rte_pktmbuf_pool_create("qp_ibv_given", 63, 0, 0, uint16_t(room), SOCKET_ID_ANY);
	ASSERT_NE(given, nullptr);
	owned = true;
	EXPECT_EQ(ibv::device_pool(given, 0, mtu, SOCKET_ID_ANY, "qp_ibv", &out, &owned, &why), 0) << why;
	EXPECT_EQ(out, given);
	EXPECT_FALSE(owned) << "the caller's pool stays the caller's";
	rte_mempool_free(given);

	/* 127 mbufs: small enough that the usual cache of 256 would be refused. */
	EXPECT_EQ(ibv::device_pool(nullptr, 127, mtu, SOCKET_ID_ANY, "qp_ibv", &out, &owned, &why), 0) << why;
	ASSERT_NE(out, nullptr);
	EXPECT_TRUE(owned);
	EXPECT_EQ(out->size, 127u);
	EXPECT_EQ(rte_pktmbuf_data_room_size(out), room);
	rte_mempool_free(out);

	why.clear();
	EXPECT_EQ(ibv::device_pool(nullptr, 127, 65536, SOCKET_ID_ANY, "qp_ibv", &out, &owned, &why), EINVAL);
	EXPECT_NE(why.find("give a pool"), std::string::npos) << why;
}

TEST(QueueParams, VerbsRefusesBeforeTouchingADevice)
{
	verbs::verbs_device dev;
	queue_params p;
	p.sq_depth = 16;
	p.signal_every = 17;
	expect_refused(dev, p, "signal_every");
	p = {};
	p.rq_depth = 16;
	p.recv_batch = 17;
	expect_refused(dev, p, "recv_batch");
	p = {};
	p.recv_batch = verbs::verbs_queue::max_burst + 1;
	expect_refused(dev, p, "recv_batch");
	verbs::verbs_queue q;
	EXPECT_EQ(dev.create_queue({}, q), ENODEV) << "valid, but no device open";
}
#endif

#ifdef RDGRAM_TEST_MLX5
TEST(QueueParams, Mlx5RefusesBeforeTouchingADevice)
{
	mlx5::mlx5_device dev;
	queue_params p;
	p.sq_depth = 64;
	p.signal_every = 64;
	expect_refused(dev, p, "signal_every");
	p = {};
	p.rq_depth = 16;
	p.recv_batch = 17;
	expect_refused(dev, p, "recv_batch");
	p = {};
	p.max_inline = mlx5::mlx5_device::max_inline_limit + 1;
	expect_refused(dev, p, "max_inline");
	mlx5::mlx5_queue q;
	p.max_inline = mlx5::mlx5_device::max_inline_limit;
	EXPECT_EQ(dev.create_queue(p, q), ENODEV) << "valid, but no device open";
}
#endif

#ifdef RDGRAM_TEST_EFA
TEST(QueueParams, EfaRefusesBeforeTouchingADevice)
{
	efa::efa_device dev;
	queue_params p;
	p.qkey = 0x80000001u;
	expect_refused(dev, p, "qkey");
	p = {};
	p.signal_every = 2;
	expect_refused(dev, p, "signal_every");
	p = {};
	p.recv_batch = efa::efa_queue::max_recv_batch + 1;
	expect_refused(dev, p, "recv_batch");
	efa::efa_queue q;
	p = {};
	p.signal_every = 1; /* what EFA does anyway */
	EXPECT_EQ(dev.create_queue(p, q), ENODEV) << "valid, but no device open";
}
#endif

} // namespace
