/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Steering between the queues of one soft port (drivers/soft/soft_steer.h):
 * a datagram that lands on the wrong queue reaches its QP's poll thread;
 * QPNs belong to one queue; every QP attached to a group gets its copy,
 * whichever queue it lives on; a full owner ring is a named drop, a stopped
 * queue's ring is freed and counted; two poll threads at once lose nothing.
 *
 * The receiving port has two queues over net_ring, and the sender's frames
 * all land on its queue 0 (net_ring has no RSS): the worst spread, where
 * every datagram for queue 1's QPs needs the hand-off.
 */
#include <atomic>
#include <vector>

#include <gtest/gtest.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "eal_env.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

struct steer_pair {
	rte_ring *to_b = nullptr, *to_a = nullptr, *b_tx1 = nullptr;
	uint16_t pa = 0, pb = 0;
	soft::soft_device a, b;
	soft::soft_queue qa, qb[2];
	wire::gid addr_a, addr_b;
	uint32_t qkey = 0x1234567;
	bool ok = false;

	explicit steer_pair(bool v6 = false)
	{
		static std::atomic<unsigned> seq{0};
		const unsigned id = seq.fetch_add(1);
		char name[32];
		snprintf(name, sizeof(name), "st%u_b", id);
		to_b = rte_ring_create(name, 4096, SOCKET_ID_ANY, 0);
		snprintf(name, sizeof(name), "st%u_a", id);
		to_a = rte_ring_create(name, 4096, SOCKET_ID_ANY, 0);
		/* b's queue 1 receives from a ring nobody fills: the port puts
		 * every frame on queue 0. */
		snprintf(name, sizeof(name), "st%u_e", id);
		b_tx1 = rte_ring_create(name, 64, SOCKET_ID_ANY, 0);
		addr_a = ip_of(v6 ? "fd00::1" : "10.2.0.1");
		addr_b = ip_of(v6 ? "fd00::2" : "10.2.0.2");
		const rte_ether_addr ma = mac("02:00:00:00:02:01"), mb = mac("02:00:00:00:02:02");
		snprintf(name, sizeof(name), "net_st%u_a", id);
		int p = rte_eth_from_rings(name, &to_a, 1, &to_b, 1, 0);
		rte_ring *brx[2] = {to_b, b_tx1}, *btx[2] = {to_a, to_a};
		snprintf(name, sizeof(name), "net_st%u_b", id);
		int q = rte_eth_from_rings(name, brx, 2, btx, 2, 0);
		if (p < 0 || q < 0)
			return;
		pa = uint16_t(p);
		pb = uint16_t(q);
		soft::soft_config c;
		c.port_id = pa;
		c.set_mac = true;
		c.mac = ma;
		c.addresses = {addr_a};
		c.neighbours = {{addr_b, mb}};
		c.nb_mbufs = 8191;
		c.qsbr = g_rt->qsbr();
		if (a.open(c) != 0) {
			ADD_FAILURE() << a.error();
			return;
		}
		c.port_id = pb;
		c.mac = mb;
		c.addresses = {addr_b};
		c.neighbours = {{addr_a, ma}};
		c.nb_queues = 2;
		if (b.open(c) != 0) {
			ADD_FAILURE() << b.error();
			return;
		}
		EXPECT_EQ(a.create_queue({.index = 0}, qa), 0);
		EXPECT_EQ(b.create_queue({.index = 0}, qb[0]), 0) << b.error();
		EXPECT_EQ(b.create_queue({.index = 1}, qb[1]), 0) << b.error();
		EXPECT_EQ(qa.add_qp(0x100, qkey), 0);
		ok = !::testing::Test::HasFailure();
	}
	~steer_pair()
	{
		a.destroy_queue(qa);
		b.destroy_queue(qb[0]);
		b.destroy_queue(qb[1]);
		a.close();
		b.close();
		rte_eth_dev_close(pa);
		rte_eth_dev_close(pb);
		rte_ring_free(to_a);
		rte_ring_free(to_b);
		rte_ring_free(b_tx1);
	}
	ah_handle ah_to(const wire::gid &g)
	{
		ibv_ah_attr at = soft_pair::attr_to(g);
		int e = 0;
		ah_handle h = ah_null;
		g_rt->ctl().call([&] { h = a.create_ah(at, &e); });
		EXPECT_EQ(e, 0);
		return h;
	}
	/* n datagrams from a's QP to dqpn through h. */
	void send(ah_handle h, uint32_t dqpn, unsigned n)
	{
		static const uint8_t pay[64] = {1, 2, 3};
		while (n != 0) {
			send_wr w[32]{};
			const unsigned k = n < 32 ? n : 32;
			for (unsigned i = 0; i < k; i++) {
				w[i].ah = h;
				w[i].remote_qpn = dqpn;
				w[i].remote_qkey = qkey;
				w[i].inline_data = pay;
				w[i].inline_len = sizeof(pay);
				w[i].flags = send_inline;
			}
			ASSERT_EQ(qa.tx_burst(w, uint16_t(k)), k);
			qa.tx_flush();
			n -= k;
		}
	}
	/* Polls queue i until it is quiet (a burst that only hands frames
	 * on returns 0 too: quiet is 64 empty calls); counts completions per
	 * QPN. */
	unsigned poll(int i, std::vector<uint32_t> *qpns = nullptr)
	{
		unsigned got = 0;
		for (int idle = 0; idle < 64;) {
			recv_wc wc[32];
			const uint16_t n = qb[i].rx_burst(wc, 32);
			idle = n == 0 ? idle + 1 : 0;
			for (uint16_t k = 0; k < n; k++) {
				if (qpns != nullptr)
					qpns->push_back(wc[k].qp_num);
				rte_pktmbuf_free(wc[k].mbuf);
			}
			got += n;
		}
		return got;
	}
	/* Every mbuf of both pools back (the test thread's cache counts). */
	bool all_back() const
	{
		return rte_mempool_in_use_count(a.mempool()) == 0 && rte_mempool_in_use_count(b.mempool()) == 0;
	}
};

} // namespace

/* Outside the anonymous namespace, as the TEST_P classes derived from it
 * are (GCC's -Wsubobject-linkage in a unity build). */
class SoftSteer : public ::testing::TestWithParam<bool> {};

TEST_P(SoftSteer, WrongQueueIsHandedToTheOwner)
{
	steer_pair p(GetParam());
	ASSERT_TRUE(p.ok);
	ASSERT_EQ(p.qb[0].add_qp(0x300, p.qkey), 0);
	ASSERT_EQ(p.qb[1].add_qp(0x301, p.qkey), 0);
	ah_handle h = p.ah_to(p.addr_b);
	p.send(h, 0x301, 100);
	p.send(h, 0x300, 50);
	EXPECT_EQ(p.poll(0), 50u);
	EXPECT_EQ(p.qb[0].counters().rx_handoff_out, 100u);
	std::vector<uint32_t> got;
	EXPECT_EQ(p.poll(1, &got), 100u);
	for (uint32_t q : got)
		EXPECT_EQ(q, 0x301u);
	EXPECT_EQ(p.qb[1].counters().rx_handoff_in, 100u);
	EXPECT_EQ(p.qb[1].counters().rx_pkts, 100u);
	/* Nobody's QPN: a drop, where it landed. */
	p.send(h, 0x999, 3);
	EXPECT_EQ(p.poll(0), 0u);
	EXPECT_EQ(p.qb[0].counters().rx_unknown_qpn, 3u);
	EXPECT_EQ(p.qb[0].counters().rx_handoff_out, 100u);
	g_rt->ctl().call([&] { p.a.destroy_ah(h); });
	EXPECT_TRUE(p.all_back());
}

TEST_P(SoftSteer, QpnBelongsToOneQueue)
{
	steer_pair p(GetParam());
	ASSERT_TRUE(p.ok);
	ASSERT_EQ(p.qb[0].add_qp(0x300, p.qkey), 0);
	EXPECT_EQ(p.qb[1].add_qp(0x300, p.qkey), EEXIST);
	ASSERT_EQ(p.qb[0].remove_qp(0x300), 0);
	ASSERT_EQ(p.qb[1].add_qp(0x300, p.qkey), 0);
	ah_handle h = p.ah_to(p.addr_b);
	p.send(h, 0x300, 10);
	EXPECT_EQ(p.poll(0), 0u);
	EXPECT_EQ(p.poll(1), 10u);
	g_rt->ctl().call([&] { p.a.destroy_ah(h); });
}

TEST_P(SoftSteer, FullRingIsANamedDropAndAStoppedQueueIsFreed)
{
	steer_pair p(GetParam());
	ASSERT_TRUE(p.ok);
	ASSERT_EQ(p.qb[1].add_qp(0x301, p.qkey), 0);
	ah_handle h = p.ah_to(p.addr_b);
	/* Queue 1's poll thread is not running: its ring fills up. */
	const unsigned cap = rte_ring_get_capacity(p.qb[1].steer()->ring(1));
	unsigned sent = 0;
	while (sent < cap + 77) {
		p.send(h, 0x301, 256);
		sent += 256;
		p.poll(0);
	}
	const auto &c0 = p.qb[0].counters();
	EXPECT_EQ(c0.rx_handoff_out, cap);
	EXPECT_EQ(c0.rx_handoff_full, sent - cap);
	EXPECT_EQ(c0.rx_handoff_out + c0.rx_handoff_full, sent);
	/* The queue stops without taking them: destroy_queue frees and
	 * counts them. */
	p.b.destroy_queue(p.qb[1]);
	EXPECT_EQ(p.b.handoff_freed(), cap);
	g_rt->ctl().call([&] { p.a.destroy_ah(h); });
	EXPECT_TRUE(p.all_back());
}

TEST_P(SoftSteer, EveryGroupMemberGetsItsCopy)
{
	steer_pair p(GetParam());
	ASSERT_TRUE(p.ok);
	const wire::gid g = ip_of(GetParam() ? "ff15::1:2" : "239.1.1.2");
	ASSERT_EQ(p.qb[0].add_qp(0x300, p.qkey), 0);
	ASSERT_EQ(p.qb[0].add_qp(0x302, p.qkey), 0);
	ASSERT_EQ(p.qb[1].add_qp(0x301, p.qkey), 0);
	ASSERT_EQ(p.qb[0].attach_mcast(0x300, g), 0);
	ASSERT_EQ(p.qb[0].attach_mcast(0x302, g), 0); /* two QPs, one queue */
	ASSERT_EQ(p.qb[1].attach_mcast(0x301, g), 0);
	ah_handle h = p.ah_to(g);
	p.send(h, soft::soft_queue::mcast_qpn, 5);
	std::vector<uint32_t> q0, q1;
	EXPECT_EQ(p.poll(0, &q0), 10u);
	EXPECT_EQ(p.poll(1, &q1), 5u);
	EXPECT_EQ(std::count(q0.begin(), q0.end(), 0x300u), 5);
	EXPECT_EQ(std::count(q0.begin(), q0.end(), 0x302u), 5);
	EXPECT_EQ(std::count(q1.begin(), q1.end(), 0x301u), 5);
	EXPECT_EQ(p.qb[0].counters().rx_group_copies, 10u); /* one local, one for queue 1, per datagram */
	/* Queue 0 leaves the group: the frames go to queue 1 itself. */
	ASSERT_EQ(p.qb[0].detach_mcast(0x300, g), 0);
	ASSERT_EQ(p.qb[0].remove_qp(0x302), 0);
	p.send(h, soft::soft_queue::mcast_qpn, 5);
	EXPECT_EQ(p.poll(0), 0u);
	EXPECT_EQ(p.poll(1), 5u);
	EXPECT_EQ(p.qb[0].counters().rx_group_copies, 10u);
	EXPECT_EQ(p.qb[0].counters().rx_dgid_mismatch, 0u);
	/* Nobody left: a mismatch, as before steering. */
	ASSERT_EQ(p.qb[1].detach_mcast(0x301, g), 0);
	p.send(h, soft::soft_queue::mcast_qpn, 2);
	EXPECT_EQ(p.poll(0), 0u);
	EXPECT_EQ(p.qb[0].counters().rx_dgid_mismatch, 2u);
	g_rt->ctl().call([&] { p.a.destroy_ah(h); });
	EXPECT_TRUE(p.all_back());
}

namespace {
struct poller {
	steer_pair *p;
	std::atomic<bool> *stop;
	uint64_t got = 0;
};
int poll_q1(void *arg)
{
	auto *w = static_cast<poller *>(arg);
	recv_wc wc[32];
	for (;;) {
		const bool last = w->stop->load(std::memory_order_acquire);
		const uint16_t n = w->p->qb[1].rx_burst(wc, 32);
		for (uint16_t k = 0; k < n; k++)
			rte_pktmbuf_free(wc[k].mbuf);
		w->got += n;
		if (last && n == 0)
			return 0;
	}
}
} // namespace

TEST_P(SoftSteer, TwoPollThreadsLoseNothing)
{
	steer_pair p(GetParam());
	ASSERT_TRUE(p.ok);
	ASSERT_EQ(p.qb[0].add_qp(0x300, p.qkey), 0);
	ASSERT_EQ(p.qb[1].add_qp(0x301, p.qkey), 0);
	const unsigned lc = rte_get_next_lcore(-1, 1, 0);
	ASSERT_LT(lc, RTE_MAX_LCORE);
	std::atomic<bool> stop{false};
	poller w{&p, &stop};
	ASSERT_EQ(launch_on_lcore(poll_q1, &w, lc), 0);
	ah_handle h = p.ah_to(p.addr_b);
	uint64_t got0 = 0;
	const unsigned rounds = 200;
	for (unsigned r = 0; r < rounds; r++) {
		p.send(h, 0x300, 16);
		p.send(h, 0x301, 16);
		got0 += p.poll(0);
	}
	stop.store(true, std::memory_order_release);
	wait_on_lcore(lc);
	const auto &c0 = p.qb[0].counters();
	EXPECT_EQ(got0, rounds * 16u);
	/* The ring may have refused some when queue 1 fell behind: named. */
	EXPECT_EQ(w.got + c0.rx_handoff_full, rounds * 16u);
	EXPECT_EQ(c0.rx_handoff_out, w.got);
	g_rt->ctl().call([&] { p.a.destroy_ah(h); });
	EXPECT_TRUE(p.all_back());
}

INSTANTIATE_TEST_SUITE_P(V4V6, SoftSteer, ::testing::Bool(),
			 [](const auto &i) { return i.param ? std::string("ipv6") : std::string("ipv4"); });
