/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Steering on a port the Linux kernel spreads: DPDK's net_tap with two
 * queues (a multi-queue tap: the kernel picks the queue by flow hash), in a
 * network namespace of the test's own. RoCEv2 datagrams written into the
 * tap from the kernel side (AF_PACKET) reach the QP they are for, on
 * either queue:
 *   - steer = "software": whatever queue the kernel chose, the hand-off
 *     does the rest;
 *   - steer = "flow": one rte_flow rule per address (net_tap implements
 *     them with TC flower and skbedit), IPv4 and IPv6 addresses; every
 *     datagram to address i lands on queue i and none is handed off. A
 *     kernel without CONFIG_NET_CLS_FLOWER / CONFIG_NET_ACT_SKBEDIT /
 *     CONFIG_NET_SCH_MULTIQ refuses the rules: the case skips and says so
 *     (the lab's guest has them: tests/lab/verbs_hw.sh runs these cases
 *     there and fails on a skip).
 * Needs root (a namespace, /dev/net/tun); skips otherwise.
 */
#include <linux/if_packet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include <gtest/gtest.h>
#include <rte_dev.h>
#include <rte_ethdev.h>

#include "eal_env.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

/* The test's own namespace: the tap, its traffic and its TC rules stay
 * there. (Per thread: the EAL's threads stay where they are.) */
bool own_netns(std::string *why)
{
	if (geteuid() != 0) {
		*why = "needs root";
		return false;
	}
	static bool done = unshare(CLONE_NEWNET) == 0;
	if (!done)
		*why = std::string("unshare(CLONE_NEWNET): ") + strerror(errno);
	return done;
}

/* RoCEv2 frames as a soft port builds them, caught on a net_ring. */
struct frame_maker {
	rte_ring *r = nullptr, *sink = nullptr;
	uint16_t port = 0;
	soft::soft_device dev;
	soft::soft_queue q;
	bool ok = false;
	frame_maker(const wire::gid &src, const std::vector<wire::gid> &dsts, const rte_ether_addr &dmac)
	{
		static int seq = 0;
		char name[32];
		snprintf(name, sizeof(name), "tapfm%d", seq);
		r = rte_ring_create(name, 4096, SOCKET_ID_ANY, 0);
		snprintf(name, sizeof(name), "tapfs%d", seq);
		sink = rte_ring_create(name, 64, SOCKET_ID_ANY, 0);
		snprintf(name, sizeof(name), "net_tapfm%d", seq++);
		int p = rte_eth_from_rings(name, &sink, 1, &r, 1, 0);
		if (p < 0)
			return;
		port = uint16_t(p);
		soft::soft_config c;
		c.port_id = port;
		c.addresses = {src};
		for (const auto &d : dsts)
			c.neighbours.push_back({d, dmac});
		c.nb_mbufs = 4095;
		c.qsbr = g_rt->qsbr();
		ok = dev.open(c) == 0 && dev.create_queue({.index = 0}, q) == 0 && q.add_qp(0x100, 0x11) == 0;
	}
	~frame_maker()
	{
		dev.destroy_queue(q);
		dev.close();
		rte_eth_dev_close(port);
		rte_ring_free(r);
		rte_ring_free(sink);
	}
	/* n frames to (dst, dqpn), appended to out as bytes. */
	void make(const wire::gid &dst, uint32_t dqpn, unsigned n, std::vector<std::vector<uint8_t>> *out)
	{
		ibv_ah_attr a = soft_pair::attr_to(dst);
		int e = 0;
		ah_handle h = ah_null;
		g_rt->ctl().call([&] { h = dev.create_ah(a, &e); });
		ASSERT_EQ(e, 0);
		static const uint8_t pay[32] = {9};
		for (unsigned i = 0; i < n; i++) {
			send_wr w{};
			w.ah = h;
			w.remote_qpn = dqpn;
			w.remote_qkey = 0x11;
			w.inline_data = pay;
			w.inline_len = sizeof(pay);
			w.flags = send_inline;
			/* Each from its own source QP: a different UDP source
			 * port, so the kernel's flow hash spreads them. */
			q.qp(0)->qpn = 0x100 + i;
			ASSERT_EQ(q.tx_burst(&w, 1), 1);
			q.tx_flush();
			void *m = nullptr;
			ASSERT_EQ(rte_ring_dequeue(r, &m), 0);
			auto *mb = static_cast<rte_mbuf *>(m);
			const uint8_t *f = rte_pktmbuf_mtod(mb, const uint8_t *);
			out->emplace_back(f, f + rte_pktmbuf_data_len(mb));
			rte_pktmbuf_free(mb);
		}
		g_rt->ctl().call([&] { dev.destroy_ah(h); });
	}
};

void remove_port(uint16_t port)
{
	rte_eth_dev_info info{};
	rte_eth_dev_info_get(port, &info);
	rte_eth_dev_close(port);
	if (info.device != nullptr)
		rte_dev_remove(info.device);
}

struct tap_case {
	soft::steer_mode mode;
	const char *name;
	bool v6;
};

class SoftTap : public ::testing::TestWithParam<tap_case> {};

TEST_P(SoftTap, DatagramsReachTheirQueue)
{
	std::string why;
	if (!own_netns(&why))
		GTEST_SKIP() << why;
	if (access("/dev/net/tun", R_OK | W_OK) != 0)
		GTEST_SKIP() << "/dev/net/tun: " << strerror(errno);
	static int seq = 0;
	const std::string iface = "rdtap" + std::to_string(seq);
	const std::string vdev = "net_tap_rd" + std::to_string(seq++);
	ASSERT_EQ(rte_dev_probe((vdev + ",iface=" + iface).c_str()), 0);
	uint16_t port;
	ASSERT_EQ(rte_eth_dev_get_port_by_name(vdev.c_str(), &port), 0);
	const bool v6 = GetParam().v6;
	const wire::gid a0 = ip_of(v6 ? "fd05::2" : "10.5.0.2"), a1 = ip_of(v6 ? "fd05::3" : "10.5.0.3"),
			peer = ip_of(v6 ? "fd05::1" : "10.5.0.1");
	soft::soft_device dev;
	soft::soft_config c;
	c.port_id = port;
	c.addresses = {a0, a1};
	c.nb_queues = 2;
	c.steer = GetParam().mode;
	c.resolve = false;
	c.nb_mbufs = 4095;
	c.qsbr = g_rt->qsbr();
	const int rc = dev.open(c);
	if (rc != 0 && GetParam().mode == soft::steer_mode::flow) {
		const std::string e = dev.error();
		dev.close();
		remove_port(port);
		if (e.find("rte_flow refused") != std::string::npos)
			GTEST_SKIP() << "this kernel's tap takes no rte_flow rule: " << e;
		FAIL() << e;
	}
	ASSERT_EQ(rc, 0) << dev.error();
	printf("steering: %s\n", dev.steering().c_str());
	soft::soft_queue q[2];
	ASSERT_EQ(dev.create_queue({.index = 0}, q[0]), 0);
	ASSERT_EQ(dev.create_queue({.index = 1}, q[1]), 0);
	ASSERT_EQ(q[0].add_qp(0x300, 0x11), 0);
	ASSERT_EQ(q[1].add_qp(0x301, 0x11), 0);

	/* QP 0x300 on queue 0 by address 0, 0x301 on queue 1 by address 1:
	 * what the rules steer without a hand-off. */
	frame_maker fm(peer, {a0, a1}, dev.mac());
	ASSERT_TRUE(fm.ok);
	std::vector<std::vector<uint8_t>> frames;
	const unsigned n = 64;
	fm.make(a0, 0x300, n, &frames);
	fm.make(a1, 0x301, n, &frames);

	int s = socket(AF_PACKET, SOCK_RAW, 0);
	ASSERT_GE(s, 0) << strerror(errno);
	sockaddr_ll sll{};
	sll.sll_family = AF_PACKET;
	sll.sll_ifindex = int(if_nametoindex(iface.c_str()));
	ASSERT_GT(sll.sll_ifindex, 0);
	ASSERT_EQ(bind(s, reinterpret_cast<sockaddr *>(&sll), sizeof(sll)), 0) << strerror(errno);
	for (const auto &f : frames)
		ASSERT_EQ(send(s, f.data(), f.size(), 0), ssize_t(f.size())) << strerror(errno);
	close(s);

	unsigned got[2] = {0, 0};
	for (int idle = 0; idle < 2000 && got[0] + got[1] < 2 * n;) {
		for (int i = 0; i < 2; i++) {
			recv_wc wc[32];
			const uint16_t k = q[i].rx_burst(wc, 32);
			for (uint16_t j = 0; j < k; j++) {
				EXPECT_EQ(wc[j].qp_num, i == 0 ? 0x300u : 0x301u);
				rte_pktmbuf_free(wc[j].mbuf);
			}
			got[i] += k;
			idle = k == 0 ? idle + 1 : 0;
		}
		usleep(100);
	}
	EXPECT_EQ(got[0], n);
	EXPECT_EQ(got[1], n);
	const uint64_t handed = q[0].counters().rx_handoff_out + q[1].counters().rx_handoff_out;
	printf("hand-offs: %lu of %u (queue 0 -> 1: %lu, 1 -> 0: %lu)\n", (unsigned long)handed, 2 * n,
	       (unsigned long)q[0].counters().rx_handoff_out, (unsigned long)q[1].counters().rx_handoff_out);
	if (GetParam().mode == soft::steer_mode::flow) {
		EXPECT_EQ(handed, 0u) << "the rules put every datagram on its QP's queue";
	}
	dev.destroy_queue(q[0]);
	dev.destroy_queue(q[1]);
	dev.close();
	remove_port(port);
}

INSTANTIATE_TEST_SUITE_P(Steer, SoftTap,
			 ::testing::Values(tap_case{soft::steer_mode::software, "software", false},
					   tap_case{soft::steer_mode::flow, "flow", false},
					   tap_case{soft::steer_mode::flow, "flow6", true}),
			 [](const auto &i) { return std::string(i.param.name); });

} // namespace
