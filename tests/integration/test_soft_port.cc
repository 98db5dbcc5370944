/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * soft::port (drivers/soft/soft_port.h) on ports the caller made: a
 * net_ring pair adopted by two ports, each with its control poller on the
 * control thread through a poller_host.
 *   - The pair resolves each other by ARP (no static neighbour): the
 *     answers come from the other side's control poller, so a datagram
 *     that arrives shows that start() registered it.
 *   - close() takes the poller off while the port is still there, then
 *     closes the port (an adopted port is closed, its rings stay).
 *   - What adopt and start refuse: no such port, more queue pairs than
 *     the port has, a host that will not take the poller; nothing is left
 *     open after a refusal.
 */
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>

#include "eal_env.h"
#include "soft_port.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

/* A net_ring pair (port i sends into ring i, receives from ring 1 - i),
 * made the way rdgram-perf's loopback makes its own. */
struct ring_pair {
	rte_ring *ring[2]{};
	int port[2] = {-1, -1};
	explicit ring_pair(const char *tag)
	{
		for (int i = 0; i < 2; i++)
			ring[i] = rte_ring_create((std::string(tag) + "r" + std::to_string(i)).c_str(), 1024, SOCKET_ID_ANY,
						  RING_F_SP_ENQ | RING_F_SC_DEQ);
		for (int i = 0; i < 2 && ring[0] != nullptr && ring[1] != nullptr; i++)
			port[i] = rte_eth_from_rings((std::string("net_ring_") + tag + std::to_string(i)).c_str(),
						     &ring[1 - i], 1, &ring[i], 1, 0);
	}
	~ring_pair()
	{
		for (int i = 0; i < 2; i++) {
			if (port[i] >= 0 && rte_eth_dev_is_valid_port(uint16_t(port[i])))
				rte_eth_dev_close(uint16_t(port[i]));
			rte_ring_free(ring[i]);
		}
	}
	bool ok() const { return port[0] >= 0 && port[1] >= 0; }
};

/* A poller host on the test's control thread that records what it was
 * asked, and whether the port was still there when the poller came off. */
struct recording_host {
	int adds = 0, removes = 0;
	int refuse = 0;            /* add's answer when not 0 */
	int port_id = -1;          /* checked at remove */
	bool port_valid_at_remove = false;

	soft::poller_host host()
	{
		soft::poller_host h;
		h.add = [this](soft::poller_host::poll_fn f, void *a) {
			adds++;
			return refuse != 0 ? refuse : g_rt->ctl().add_poller(f, a);
		};
		h.remove = [this](soft::poller_host::poll_fn f, void *a) {
			removes++;
			port_valid_at_remove = port_id >= 0 && rte_eth_dev_is_valid_port(uint16_t(port_id));
			g_rt->ctl().remove_poller(f, a);
		};
		return h;
	}
};

soft::port_config table(const char *name, const char *ip, const char *hw)
{
	soft::port_config pc;
	pc.name = name;
	pc.set_mac = true;
	pc.mac = mac(hw);
	pc.addresses = {ip_of(ip)};
	pc.nb_mbufs = 2047;
	pc.resolve = true; /* no static neighbour: ARP */
	return pc;
}

TEST(SoftPort, AdoptedPairResolvesAndCarriesDatagrams)
{
	ring_pair rp("sp1");
	ASSERT_TRUE(rp.ok());
	const soft::port_config pc[2] = {table("left", "10.9.0.1", "02:00:00:00:09:01"),
					 table("right", "10.9.0.2", "02:00:00:00:09:02")};
	soft::port p[2];
	recording_host rec[2];
	soft::soft_queue q[2];
	const uint32_t qpn[2] = {0x300, 0x301}, qkey = 0x5150;
	for (int i = 0; i < 2; i++) {
		std::string err;
		ASSERT_EQ(p[i].adopt(pc[i], uint16_t(rp.port[i]), 1, &err), 0) << err;
		EXPECT_TRUE(p[i].has_port());
		EXPECT_EQ(p[i].port_id(), uint16_t(rp.port[i]));
		rec[i].port_id = rp.port[i];
		soft::port_setup s;
		s.control = rec[i].host();
		s.qsbr = g_rt->qsbr();
		ASSERT_EQ(p[i].start(s, &err), 0) << err;
		EXPECT_EQ(rec[i].adds, 1);
		ASSERT_EQ(p[i].device().create_queue({.index = 0}, q[i]), 0) << p[i].device().error();
		ASSERT_EQ(q[i].add_qp(qpn[i], qkey), 0);
	}
	/* Left resolves right by ARP, both queues polled meanwhile: right's
	 * control poller answers, left's takes the answer. */
	const auto step = [&] {
		recv_wc wc[16];
		for (auto &qq : q) {
			const uint16_t n = qq.rx_burst(wc, 16);
			for (uint16_t k = 0; k < n; k++)
				rte_pktmbuf_free(wc[k].mbuf);
			qq.tx_flush();
		}
	};
	ibv_ah_attr a = soft_pair::attr_to(pc[1].addresses[0]);
	ah_handle h = ah_null;
	const uint64_t deadline = rte_rdtsc() + 10 * rte_get_tsc_hz();
	ASSERT_EQ(soft::resolve_ah(
			  p[0].device(), a, deadline, [](const std::function<void()> &f) { g_rt->ctl().call(f); }, step,
			  &h),
		  0);
	/* Four datagrams, each received on right's QP. */
	static const uint8_t pay[20] = {1, 2, 3};
	unsigned got = 0;
	for (int i = 0; i < 4; i++) {
		send_wr w{h, qpn[1], qkey, nullptr, nullptr, 0, 0, 0};
		w.inline_data = pay;
		w.inline_len = sizeof(pay);
		w.flags = send_inline;
		ASSERT_EQ(q[0].tx_burst(&w, 1), 1);
	}
	q[0].tx_flush();
	for (uint64_t until = rte_rdtsc() + 5 * rte_get_tsc_hz(); got < 4 && rte_rdtsc() < until;) {
		recv_wc wc[16];
		const uint16_t n = q[1].rx_burst(wc, 16);
		for (uint16_t k = 0; k < n; k++) {
			EXPECT_EQ(wc[k].qp_num, qpn[1]);
			EXPECT_EQ(wc[k].byte_len, wire::grh_len + sizeof(pay)); /* the GRH first, as verbs */
			rte_pktmbuf_free(wc[k].mbuf);
		}
		got += n;
	}
	EXPECT_EQ(got, 4u);
	g_rt->ctl().call([&] { p[0].device().destroy_ah(h); });
	for (int i = 0; i < 2; i++) {
		p[i].device().destroy_queue(q[i]);
		p[i].close();
		EXPECT_EQ(rec[i].removes, 1);
		EXPECT_TRUE(rec[i].port_valid_at_remove) << "the poller came off after the port closed";
		EXPECT_FALSE(p[i].has_port());
		/* An adopted port is closed; its rings stay the caller's. */
		EXPECT_FALSE(rte_eth_dev_is_valid_port(uint16_t(rp.port[i])));
		p[i].close(); /* idempotent */
		EXPECT_EQ(rec[i].removes, 1);
	}
}

TEST(SoftPort, AdoptRefusesWhatItCannotTake)
{
	soft::port p;
	std::string err;
	const soft::port_config pc = table("odd", "10.9.1.1", "02:00:00:00:09:11");
	EXPECT_EQ(p.adopt(pc, RTE_MAX_ETHPORTS - 1, 1, &err), ENODEV);
	EXPECT_NE(err.find("port odd: no DPDK port"), std::string::npos) << err;
	EXPECT_FALSE(p.has_port());

	ring_pair rp("sp2");
	ASSERT_TRUE(rp.ok());
	err.clear();
	EXPECT_EQ(p.adopt(pc, uint16_t(rp.port[0]), 2, &err), EINVAL);
	EXPECT_NE(err.find("port odd: 2 queue pairs (one per poll thread), the port offers 1 RX and 1 TX"),
		  std::string::npos)
		<< err;
	EXPECT_FALSE(p.has_port());
}

TEST(SoftPort, HostThatRefusesThePollerLeavesNothingOpen)
{
	ring_pair rp("sp3");
	ASSERT_TRUE(rp.ok());
	soft::port p;
	std::string err;
	ASSERT_EQ(p.adopt(table("busy", "10.9.2.1", "02:00:00:00:09:21"), uint16_t(rp.port[0]), 1, &err), 0) << err;
	recording_host rec;
	rec.refuse = ENOSPC;
	soft::port_setup s;
	s.control = rec.host();
	EXPECT_EQ(p.start(s, &err), ENOSPC);
	EXPECT_NE(err.find("port busy: its control poller: "), std::string::npos) << err;
	EXPECT_EQ(rec.adds, 1);
	EXPECT_EQ(rec.removes, 0); /* never registered: nothing to take off */
	EXPECT_FALSE(p.has_port());
	EXPECT_EQ(p.device().mempool(), nullptr) << "the device's pool outlived a refused start";
	EXPECT_FALSE(rte_eth_dev_is_valid_port(uint16_t(rp.port[0])));
}

} // namespace
