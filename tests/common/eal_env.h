/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * One EAL per test process (DPDK cannot initialise twice): a GoogleTest
 * environment that starts the rdgram runtime with container defaults and
 * two lcores, and a helper that makes a net_ring port pair with a soft
 * device on each end.
 */
#ifndef RDGRAM_TESTS_EAL_ENV_H
#define RDGRAM_TESTS_EAL_ENV_H

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "soft_device.h"

namespace rdgram::test {

inline runtime *g_rt = nullptr;

class eal_environment : public ::testing::Environment {
public:
	void SetUp() override
	{
		static runtime rt;
		auto args = default_eal_args(256);
		int rc = rt.init(args, "rdgram-test");
		ASSERT_EQ(rc, 0) << rt.error();
		g_rt = &rt;
	}
	void TearDown() override
	{
		if (g_rt != nullptr)
			g_rt->fini();
	}
};

inline wire::gid ip_of(const char *s)
{
	wire::gid g{};
	EXPECT_TRUE(parse_ip(s, &g)) << s;
	return g;
}
inline rte_ether_addr mac(const char *s)
{
	rte_ether_addr m{};
	EXPECT_TRUE(parse_mac(s, &m)) << s;
	return m;
}

/* Two soft devices joined back to back by a net_ring pair. */
struct soft_pair {
	uint16_t port[2]{};
	rte_ring *ring[2]{};
	soft::soft_device dev[2];
	soft::soft_queue q[2];
	wire::gid addr[2];
	rte_ether_addr hw[2];
	uint32_t qpn[2] = {0x200, 0x201};
	uint32_t qkey = 0x1234567;
	bool ok = false;

	/* Edits side i's config before its device opens (e.g. clear the
	 * static neighbours so the pair resolves each other by ARP/ND). */
	using config_fn = std::function<void(soft::soft_config &, int side)>;

	/* v6: use IPv6 addresses; mtu: path MTU; max_ah: AH table size. By
	 * default each side has the other as a static neighbour. */
	explicit soft_pair(bool v6 = false, uint32_t mtu = 4096, uint32_t max_ah = 1024, const config_fn &tweak = {})
	{
		static std::atomic<unsigned> seq{0};
		unsigned id = seq.fetch_add(1);
		char name[32];
		for (int i = 0; i < 2; i++) {
			snprintf(name, sizeof(name), "tr%u_%d", id, i);
			ring[i] = rte_ring_create(name, 4096, SOCKET_ID_ANY, 0);
		}
		addr[0] = ip_of(v6 ? "fd00::1" : "10.1.0.1");
		addr[1] = ip_of(v6 ? "fd00::2" : "10.1.0.2");
		hw[0] = mac("02:00:00:00:01:01");
		hw[1] = mac("02:00:00:00:01:02");
		for (int i = 0; i < 2; i++) {
			snprintf(name, sizeof(name), "net_tp%u_%d", id, i);
			int p = rte_eth_from_rings(name, &ring[i], 1, &ring[1 - i], 1, 0);
			if (p < 0)
				return;
			port[i] = uint16_t(p);
			soft::soft_config c;
			c.port_id = port[i];
			c.set_mac = true;
			c.mac = hw[i];
			c.addresses = {addr[i]};
			c.mtu = mtu;
			c.max_ah = max_ah;
			c.nb_mbufs = 4095;
			c.neighbours = {{addr[1 - i], hw[1 - i]}};
			c.qsbr = g_rt->qsbr();
			if (tweak)
				tweak(c, i);
			if (dev[i].open(c) != 0) {
				ADD_FAILURE() << dev[i].error();
				return;
			}
			dev[i].create_queue({.index = 0}, q[i]);
			q[i].add_qp(qpn[i], qkey);
		}
		ok = true;
	}
	~soft_pair()
	{
		for (int i = 0; i < 2; i++) {
			dev[i].close();
			rte_eth_dev_close(port[i]);
		}
		for (int i = 0; i < 2; i++)
			rte_ring_free(ring[i]);
	}

	static ibv_ah_attr attr_to(const wire::gid &g)
	{
		ibv_ah_attr a{};
		a.is_global = 1;
		a.port_num = 1;
		a.grh.hop_limit = 64;
		memcpy(a.grh.dgid.raw, g.raw, 16);
		return a;
	}
	/* Creates, on the control thread, the AH from side i to the other. */
	ah_handle ah_from(int i, int *err = nullptr)
	{
		int e = 0;
		ah_handle h = ah_null;
		ibv_ah_attr a = attr_to(addr[1 - i]);
		g_rt->ctl().call([&] { h = dev[i].create_ah(a, &e); });
		if (err != nullptr)
			*err = e;
		return h;
	}
	unsigned in_use(int i) const { return rte_mempool_in_use_count(dev[i].mempool()); }
};

} // namespace rdgram::test

#endif
