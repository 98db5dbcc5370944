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
 * And on net_af_packet (a veth pair in the same namespace): frames that
 * find the PMD's ring full, which DPDK 22.11 does not count, are the port's
 * imissed (soft::port_stats), to the frame.
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
#include "soft_port.h"

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

/* A ring of 64 frames, none taken: 64 wait, the rest are counted missed.
 * Then the ring is read, and frames that find room are not. */
TEST(SoftAfPacket, FullRingCountsMissed)
{
	std::string why;
	if (!own_netns(&why))
		GTEST_SKIP() << why;
	/* No IPv6 on the pair: its own frames (MLD, DAD) would take ring
	 * slots. */
	if (system("ip link add rdafp0 type veth peer name rdafp1 && "
		   "sysctl -qw net.ipv6.conf.rdafp0.disable_ipv6=1 net.ipv6.conf.rdafp1.disable_ipv6=1 && "
		   "ip link set rdafp0 up && ip link set rdafp1 up") != 0)
		GTEST_SKIP() << "cannot create a veth pair (ip link)";
	const int ring = 64;
	const std::string vdev = "net_af_packet_rd0";
	ASSERT_EQ(rte_dev_probe((vdev + ",iface=rdafp0,qpairs=1,blocksz=4096,framesz=2048,framecnt=" +
				 std::to_string(ring)).c_str()),
		  0);
	uint16_t port;
	ASSERT_EQ(rte_eth_dev_get_port_by_name(vdev.c_str(), &port), 0);
	rte_eth_conf conf{};
	ASSERT_EQ(rte_eth_dev_configure(port, 1, 1, &conf), 0);
	rte_mempool *mp = rte_pktmbuf_pool_create("afp_pool", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	ASSERT_NE(mp, nullptr);
	ASSERT_EQ(rte_eth_rx_queue_setup(port, 0, 256, SOCKET_ID_ANY, nullptr, mp), 0);
	ASSERT_EQ(rte_eth_tx_queue_setup(port, 0, 256, SOCKET_ID_ANY, nullptr), 0);
	ASSERT_EQ(rte_eth_dev_start(port), 0);

	int s = socket(AF_PACKET, SOCK_RAW, 0);
	ASSERT_GE(s, 0) << strerror(errno);
	sockaddr_ll sll{};
	sll.sll_family = AF_PACKET;
	sll.sll_ifindex = int(if_nametoindex("rdafp1"));
	ASSERT_GT(sll.sll_ifindex, 0);
	ASSERT_EQ(bind(s, reinterpret_cast<sockaddr *>(&sll), sizeof(sll)), 0) << strerror(errno);
	/* A local experimental EtherType: nothing else answers it. */
	uint8_t f[60] = {0x02, 0, 0, 0, 0, 9, 0x02, 0, 0, 0, 0, 8, 0x88, 0xb5};
	auto send_n = [&](int n) {
		for (int i = 0; i < n; i++)
			ASSERT_EQ(send(s, f, sizeof(f), 0), ssize_t(sizeof(f))) << strerror(errno);
	};
	auto drain = [&] {
		unsigned got = 0;
		for (int idle = 0; idle < 200; idle++) {
			rte_mbuf *m[32];
			const uint16_t k = rte_eth_rx_burst(port, 0, m, 32);
			rte_pktmbuf_free_bulk(m, k);
			got += k;
			idle = k ? 0 : idle;
			usleep(k ? 0 : 100);
		}
		return got;
	};
	rte_eth_stats st{};
	ASSERT_EQ(soft::port_stats(port, &st), 0);
	const uint64_t missed0 = st.imissed;
	send_n(ring + 100);
	ASSERT_EQ(soft::port_stats(port, &st), 0);
	EXPECT_EQ(st.imissed - missed0, 100u) << "the frames that found the ring full";
	EXPECT_EQ(drain(), unsigned(ring));
	send_n(10);
	EXPECT_EQ(drain(), 10u);
	ASSERT_EQ(soft::port_stats(port, &st), 0);
	EXPECT_EQ(st.imissed - missed0, 100u) << "read twice, counted once; frames with room are not missed";
	close(s);
	ASSERT_EQ(rte_eth_dev_stop(port), 0);
	remove_port(port);
	rte_mempool_free(mp);
	EXPECT_EQ(system("ip link del rdafp0"), 0);
}

} // namespace
