/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Neighbour resolution in the soft driver (ARP, ND) between two soft devices
 * joined by a net_ring pair. The control thread runs both devices' poll()
 * (as the application's would); this thread, or an EAL worker, is the poll
 * thread of both queues. Frames are crafted here byte by byte, and the
 * ICMPv6 checksums of crafted and captured frames come from DPDK's
 * rte_ipv6_udptcp_cksum*, not from the code under test.
 */
#include <atomic>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rte_arp.h>
#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_launch.h>

#include "eal_env.h"
#include "rdgram/config.h"
#include "rdgram/tsan.h"
#include "soft_config_toml.h"
#include "soft_neigh.h"
#include "tsan_skip.h"

using namespace rdgram;
using namespace rdgram::test;
using namespace rdgram::soft;

namespace {

using bytes = std::vector<uint8_t>;

soft_pair::config_fn dynamic(uint32_t ttl_ms = 30000, uint32_t retry_ms = 20, uint32_t retries = 3,
			     uint32_t hold_ms = 300)
{
	return [=](soft_config &c, int) {
		c.neighbours.clear();
		c.resolve = true;
		c.neigh_ttl_ms = ttl_ms;
		c.neigh_retry_ms = retry_ms;
		c.neigh_retries = retries;
		c.neigh_fail_hold_ms = hold_ms;
	};
}

double now_s() { return double(rte_get_tsc_cycles()) / double(rte_get_tsc_hz()); }

bool same_mac(const uint8_t *a, const rte_ether_addr &b) { return memcmp(a, b.addr_bytes, 6) == 0; }
std::string mac_str(const uint8_t *m)
{
	char b[32];
	snprintf(b, sizeof(b), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
	return b;
}

/* Both devices polled by the control thread; this thread is the poll thread
 * of both queues (pump). Everything stops before the pair closes. */
struct rig {
	soft_pair &p;
	unsigned tid;
	bool polled[2] = {false, false};
	unsigned delivered[2] = {0, 0};
	wire::gid last_sgid[2]{};

	explicit rig(soft_pair &pp) : p(pp)
	{
		tid = rte_lcore_id();
		poll_thread_online(g_rt->qsbr(), tid);
		for (int i = 0; i < 2; i++)
			set_polled(i, true);
	}
	~rig()
	{
		for (int i = 0; i < 2; i++)
			set_polled(i, false);
		poll_thread_offline(g_rt->qsbr(), tid);
	}
	void set_polled(int i, bool on)
	{
		if (on == polled[i])
			return;
		if (on)
			EXPECT_EQ(g_rt->ctl().add_poller(&soft_device::control_poller, &p.dev[i]), 0);
		else
			g_rt->ctl().remove_poller(&soft_device::control_poller, &p.dev[i]);
		polled[i] = on;
	}

	/* One turn of a poll loop over the queues in mask. */
	void pump(unsigned mask = 3)
	{
		recv_wc wc[32];
		for (int i = 0; i < 2; i++) {
			if (!(mask & (1u << i)))
				continue;
			uint16_t n = p.q[i].rx_burst(wc, 32);
			for (uint16_t k = 0; k < n; k++) {
				delivered[i]++;
				last_sgid[i] = wc[k].sgid;
				rte_pktmbuf_free(wc[k].mbuf);
			}
		}
		rte_rcu_qsbr_quiescent(g_rt->qsbr(), tid);
		rte_delay_us_block(20);
	}
	bool pump_until(const std::function<bool()> &done, double seconds = 5, unsigned mask = 3)
	{
		const double end = now_s() + seconds;
		while (!done()) {
			if (now_s() > end)
				return false;
			pump(mask);
		}
		return true;
	}
	void pump_for(double seconds, unsigned mask = 3)
	{
		const double end = now_s() + seconds;
		while (now_s() < end)
			pump(mask);
	}

	int prepare(int i, const ibv_ah_attr &a)
	{
		int rc = -1;
		g_rt->ctl().call([&] { rc = p.dev[i].prepare_ah(a); });
		return rc;
	}
	/* prepare_ah until it stops saying EINPROGRESS, pumping meanwhile. */
	int resolve(int i, const ibv_ah_attr &a, int *first = nullptr, double seconds = 5)
	{
		int rc = prepare(i, a);
		if (first != nullptr)
			*first = rc;
		pump_until([&] { return (rc = prepare(i, a)) != EINPROGRESS; }, seconds);
		return rc;
	}
	ah_handle create(int i, const ibv_ah_attr &a, int *err)
	{
		ah_handle h = ah_null;
		g_rt->ctl().call([&] { h = p.dev[i].create_ah(a, err); });
		return h;
	}
	void destroy(int i, ah_handle h)
	{
		int rc = -1;
		g_rt->ctl().call([&] { rc = p.dev[i].destroy_ah(h); });
		EXPECT_EQ(rc, 0);
	}
	neigh_stats stats(int i)
	{
		neigh_stats s{};
		g_rt->ctl().call([&] { s = p.dev[i].neigh_stats(); });
		return s;
	}
	bool info(int i, const wire::gid &g, neigh_info *out)
	{
		bool found = false;
		g_rt->ctl().call([&] { found = p.dev[i].neighbour_info(g, out); });
		return found;
	}
	size_t entries(int i)
	{
		size_t n = 0;
		g_rt->ctl().call([&] { n = p.dev[i].nb_neighbours(); });
		return n;
	}
	/* One inline datagram from side i to the other side's QP. */
	void send(int i, ah_handle h)
	{
		uint8_t b[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
		send_wr wr{h, p.qpn[1 - i], p.qkey, nullptr, b, sizeof(b), 0, send_inline};
		EXPECT_EQ(p.q[i].tx_burst(&wr, 1), 1);
		p.q[i].tx_flush();
	}
	/* A frame as if it had arrived on side i's port (its mbuf from side
	 * pool_side's pool: default, side i's). */
	void inject(int i, const bytes &f, int pool_side = -1)
	{
		rte_mbuf *m = rte_pktmbuf_alloc(p.dev[pool_side < 0 ? i : pool_side].mempool());
		ASSERT_NE(m, nullptr);
		memcpy(rte_pktmbuf_append(m, uint16_t(f.size())), f.data(), f.size());
		/* net_ring is uninstrumented: state the hand-off (tsan.h). */
		RDGRAM_TSAN_RELEASE(m);
		ASSERT_EQ(rte_ring_enqueue(p.ring[i], m), 0);
	}
	/* Takes everything off the wire towards side i (nobody else reads it
	 * meanwhile: queue i is not pumped while capturing). */
	std::vector<rte_mbuf *> capture(int i)
	{
		std::vector<rte_mbuf *> v;
		void *o;
		while (rte_ring_dequeue(p.ring[i], &o) == 0) {
			RDGRAM_TSAN_ACQUIRE(o);
			v.push_back(static_cast<rte_mbuf *>(o));
		}
		return v;
	}
	/* Every pool back to where it started: nothing leaked, nothing stuck,
	 * nothing freed twice. */
	bool settle(unsigned base0, unsigned base1)
	{
		if (!pump_until([&] { return p.in_use(0) == base0 && p.in_use(1) == base1; }, 5))
			return false;
		return pool_intact(p.dev[0].mempool()) && pool_intact(p.dev[1].mempool());
	}
	/* An mbuf freed twice sits in its pool twice (the in-use count cannot
	 * show it: it saturates at 0). Take every free object out and look
	 * for duplicates, then put them all back. */
	static bool pool_intact(rte_mempool *mp)
	{
		std::vector<void *> objs;
		void *o;
		while (objs.size() < mp->size + 64 && rte_mempool_get(mp, &o) == 0)
			objs.push_back(o);
		const std::set<void *> uniq(objs.begin(), objs.end());
		for (void *x : objs)
			rte_mempool_put(mp, x);
		EXPECT_EQ(uniq.size(), objs.size()) << "an mbuf was freed twice";
		EXPECT_LE(objs.size(), size_t(mp->size));
		return uniq.size() == objs.size();
	}
};

void free_all(std::vector<rte_mbuf *> &v)
{
	for (rte_mbuf *m : v)
		rte_pktmbuf_free(m);
	v.clear();
}

const uint8_t *data(rte_mbuf *m) { return rte_pktmbuf_mtod(m, const uint8_t *); }
uint16_t ethertype(rte_mbuf *m) { return uint16_t(data(m)[12] << 8 | data(m)[13]); }
bool is_roce(rte_mbuf *m)
{
	const uint8_t *f = data(m);
	const size_t l4 = ethertype(m) == 0x0800 ? 34 : ethertype(m) == 0x86dd ? 54 : 0;
	return l4 != 0 && rte_pktmbuf_data_len(m) > l4 + 4 && f[l4 + 2] == 0x12 && f[l4 + 3] == 0xb7;
}

/* ---- frame crafting ---- */

void put_mac(bytes &f, size_t off, const rte_ether_addr &m) { memcpy(&f[off], m.addr_bytes, 6); }

bytes arp_frame(uint16_t op, const rte_ether_addr &eth_src, const rte_ether_addr &eth_dst,
		const rte_ether_addr &sha, const wire::gid &spa, const rte_ether_addr &tha, const wire::gid &tpa)
{
	bytes f(60, 0);
	put_mac(f, 0, eth_dst);
	put_mac(f, 6, eth_src);
	f[12] = 0x08, f[13] = 0x06;
	f[14] = 0, f[15] = 1;    /* Ethernet */
	f[16] = 8, f[17] = 0;    /* IPv4 */
	f[18] = 6, f[19] = 4;
	f[20] = uint8_t(op >> 8), f[21] = uint8_t(op);
	put_mac(f, 22, sha);
	memcpy(&f[28], spa.raw + 12, 4);
	put_mac(f, 32, tha);
	memcpy(&f[38], tpa.raw + 12, 4);
	return f;
}

struct nd_spec {
	uint8_t type = 135;
	rte_ether_addr eth_src{}, eth_dst{};
	wire::gid src{}, dst{}, target{};
	uint8_t flags = 0;     /* NA: 0x40 S, 0x20 O */
	uint8_t opt_type = 1;  /* 0: no option */
	uint8_t opt_len = 1;   /* in 8-byte units, as sent */
	rte_ether_addr opt_mac{};
	uint8_t hop = 255;
	uint8_t code = 0;
	bool bad_csum = false;
	int payload_len = -1;  /* -1: the real one */
};

bytes nd_frame(const nd_spec &s)
{
	const size_t ilen = 24 + (s.opt_type ? 8 : 0);
	bytes f(54 + ilen, 0);
	put_mac(f, 0, s.eth_dst);
	put_mac(f, 6, s.eth_src);
	f[12] = 0x86, f[13] = 0xdd;
	f[14] = 0x60;
	f[18] = uint8_t(ilen >> 8), f[19] = uint8_t(ilen);
	f[20] = 58;
	f[21] = s.hop;
	memcpy(&f[22], s.src.raw, 16);
	memcpy(&f[38], s.dst.raw, 16);
	uint8_t *icmp = &f[54];
	icmp[0] = s.type;
	icmp[1] = s.code;
	icmp[4] = s.flags;
	memcpy(icmp + 8, s.target.raw, 16);
	if (s.opt_type) {
		icmp[24] = s.opt_type;
		icmp[25] = s.opt_len;
		memcpy(icmp + 26, s.opt_mac.addr_bytes, 6);
	}
	/* DPDK's own checksum routine (one's complement zero becomes 0xffff,
	 * which is the same number). */
	const auto *ip = reinterpret_cast<const rte_ipv6_hdr *>(&f[14]);
	uint16_t c = rte_ipv6_udptcp_cksum(ip, icmp);
	memcpy(icmp + 2, &c, 2);
	if (s.bad_csum)
		icmp[3] ^= 0x5a;
	if (s.payload_len >= 0)
		f[18] = uint8_t(s.payload_len >> 8), f[19] = uint8_t(s.payload_len);
	return f;
}

wire::gid solicited(const wire::gid &t)
{
	wire::gid g = ip_of("ff02::1:ff00:0");
	memcpy(g.raw + 13, t.raw + 13, 3);
	return g;
}

const rte_ether_addr bcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
const rte_ether_addr stranger{{0x02, 0x00, 0x00, 0x00, 0x09, 0x09}};

/* ---- resolution between the two devices ---- */

class NeighFamily : public ::testing::TestWithParam<bool> {};

TEST_P(NeighFamily, ResolvesThenSends)
{
	const bool v6 = GetParam();
	soft_pair p(v6, 4096, 64, dynamic());
	ASSERT_TRUE(p.ok);
	const unsigned base0 = p.in_use(0), base1 = p.in_use(1);
	{
		rig r(p);
		const ibv_ah_attr a = soft_pair::attr_to(p.addr[1]);
		int err = 0;
		EXPECT_EQ(r.create(0, a, &err), ah_null);
		EXPECT_EQ(err, EHOSTUNREACH) << "create_ah never waits: nothing known yet";

		int first = 0;
		EXPECT_EQ(r.resolve(0, a, &first), 0);
		EXPECT_EQ(first, EINPROGRESS);
		ah_handle h = r.create(0, a, &err);
		ASSERT_EQ(err, 0);
		const soft_av *av = p.dev[0].ahs().lookup(h);
		ASSERT_NE(av, nullptr);
		EXPECT_TRUE(same_mac(av->hdr, p.hw[1])) << mac_str(av->hdr);
		neigh_info ni{};
		ASSERT_TRUE(r.info(0, p.addr[1], &ni));
		EXPECT_EQ(ni.state, neigh_state::reachable);
		EXPECT_EQ(ni.nb_ahs, 1u);

		neigh_stats s0 = r.stats(0), s1 = r.stats(1);
		EXPECT_GE(s0.requests_sent, 1u);
		EXPECT_EQ(s0.resolved, 1u);
		EXPECT_GE(s0.replies_received, 1u);
		EXPECT_EQ(s0.bad_frames, 0u);
		EXPECT_GE(s1.requests_received, 1u) << "the peer answers requests for its address";
		EXPECT_GE(s1.replies_sent, 1u);
		EXPECT_EQ(s1.learned, 1u) << "and learns the requester (RFC 826 / RFC 4861 7.2.3)";
		EXPECT_EQ(s1.bad_frames, 0u);
		/* So the way back needs no request. */
		EXPECT_EQ(r.prepare(1, soft_pair::attr_to(p.addr[0])), 0);
		EXPECT_EQ(r.stats(1).requests_sent, 0u);

		r.send(0, h);
		EXPECT_TRUE(r.pump_until([&] { return r.delivered[1] == 1; }));
		EXPECT_EQ(r.last_sgid[1], p.addr[0]);
		EXPECT_GE(p.q[0].counters().tx_control, 1u) << "queue 0 carried the control thread's frames";
		EXPECT_GE(p.q[0].counters().rx_to_control, 1u);
		EXPECT_GE(p.q[1].counters().rx_to_control, 1u);
		EXPECT_EQ(p.q[0].counters().rx_drops() + p.q[1].counters().rx_drops(), 0u);

		r.destroy(0, h);
		ASSERT_TRUE(r.info(0, p.addr[1], &ni));
		EXPECT_EQ(ni.nb_ahs, 0u);
		EXPECT_TRUE(r.settle(base0, base1)) << p.in_use(0) << " " << p.in_use(1);
	}
}

/* The request on the wire, checked field by field. */
TEST_P(NeighFamily, RequestFormat)
{
	const bool v6 = GetParam();
	soft_pair p(v6, 4096, 64, dynamic(30000, 1000, 1, 300));
	ASSERT_TRUE(p.ok);
	const unsigned base0 = p.in_use(0), base1 = p.in_use(1);
	{
		rig r(p);
		EXPECT_EQ(r.prepare(0, soft_pair::attr_to(p.addr[1])), EINPROGRESS);
		std::vector<rte_mbuf *> got;
		r.pump_until([&] {
			auto v = r.capture(1);
			got.insert(got.end(), v.begin(), v.end());
			return !got.empty();
		}, 5, 1);
		ASSERT_EQ(got.size(), 1u);
		const uint8_t *f = data(got[0]);
		const uint32_t len = rte_pktmbuf_data_len(got[0]);
		EXPECT_TRUE(same_mac(f + 6, p.hw[0]));
		if (!v6) {
			ASSERT_GE(len, 42u);
			EXPECT_TRUE(same_mac(f, bcast));
			EXPECT_EQ(ethertype(got[0]), 0x0806);
			const uint8_t hdr[8] = {0, 1, 8, 0, 6, 4, 0, 1};
			EXPECT_EQ(0, memcmp(f + 14, hdr, 8)) << "Ethernet/IPv4, request";
			EXPECT_TRUE(same_mac(f + 22, p.hw[0]));
			EXPECT_EQ(0, memcmp(f + 28, p.addr[0].raw + 12, 4)) << "sender: our address";
			EXPECT_EQ(0, memcmp(f + 38, p.addr[1].raw + 12, 4)) << "target";
		} else {
			ASSERT_EQ(len, 86u);
			const uint8_t mc[6] = {0x33, 0x33, 0xff, p.addr[1].raw[13], p.addr[1].raw[14], p.addr[1].raw[15]};
			EXPECT_EQ(0, memcmp(f, mc, 6)) << "solicited-node multicast MAC";
			EXPECT_EQ(ethertype(got[0]), 0x86dd);
			const auto *ip = reinterpret_cast<const rte_ipv6_hdr *>(f + 14);
			EXPECT_EQ(ip->proto, 58);
			EXPECT_EQ(ip->hop_limits, 255);
			EXPECT_EQ(rte_be_to_cpu_16(ip->payload_len), 32);
			EXPECT_EQ(0, memcmp(ip->src_addr, p.addr[0].raw, 16));
			EXPECT_EQ(0, memcmp(ip->dst_addr, solicited(p.addr[1]).raw, 16));
			EXPECT_EQ(rte_ipv6_udptcp_cksum_verify(ip, f + 54), 0) << "ICMPv6 checksum";
			EXPECT_EQ(f[54], 135);
			EXPECT_EQ(f[55], 0);
			EXPECT_EQ(0, memcmp(f + 62, p.addr[1].raw, 16)) << "target";
			EXPECT_EQ(f[78], 1) << "source link-layer address option";
			EXPECT_EQ(f[79], 1);
			EXPECT_TRUE(same_mac(f + 80, p.hw[0]));
		}
		free_all(got);
		EXPECT_TRUE(r.settle(base0, base1));
	}
}

/* Nobody answers: ETIMEDOUT after exactly neigh_retries requests, held for
 * neigh_fail_hold_ms, then a new prepare_ah starts over. */
TEST_P(NeighFamily, TimesOutAfterRetries)
{
	const bool v6 = GetParam();
	soft_pair p(v6, 4096, 64, dynamic(30000, 20, 3, 400));
	ASSERT_TRUE(p.ok);
	const unsigned base0 = p.in_use(0), base1 = p.in_use(1);
	{
		rig r(p);
		const wire::gid silent = ip_of(v6 ? "fd00::99" : "10.1.0.99");
		const ibv_ah_attr a = soft_pair::attr_to(silent);
		const double t0 = now_s();
		int first = 0;
		EXPECT_EQ(r.resolve(0, a, &first), ETIMEDOUT);
		const double took = now_s() - t0;
		EXPECT_EQ(first, EINPROGRESS);
		EXPECT_GE(took, 0.050) << "three requests 20 ms apart, then 20 ms more";
		neigh_stats s = r.stats(0);
		EXPECT_EQ(s.requests_sent, 3u);
		EXPECT_EQ(s.timeouts, 1u);
		EXPECT_EQ(s.resolved, 0u);
		int err = 0;
		EXPECT_EQ(r.create(0, a, &err), ah_null);
		EXPECT_EQ(err, ETIMEDOUT);
		EXPECT_EQ(r.prepare(0, a), ETIMEDOUT) << "the failure is remembered";
		neigh_info ni{};
		ASSERT_TRUE(r.info(0, silent, &ni));
		EXPECT_EQ(ni.state, neigh_state::failed);
		EXPECT_EQ(r.stats(0).requests_sent, 3u) << "no request while failed";
		/* The peer saw the requests and ignored them (not its address). */
		EXPECT_TRUE(r.pump_until([&] { return r.stats(1).ignored >= 3; }));
		EXPECT_EQ(r.stats(1).requests_received, 0u);
		EXPECT_EQ(r.stats(1).replies_sent, 0u);

		r.pump_for(0.45); /* past the hold */
		EXPECT_EQ(r.prepare(0, a), EINPROGRESS) << "hold over: starts over";
		EXPECT_EQ(r.stats(0).requests_sent, 4u);
		EXPECT_EQ(r.resolve(0, a), ETIMEDOUT);
		EXPECT_EQ(r.stats(0).timeouts, 2u);
		EXPECT_TRUE(r.settle(base0, base1));
	}
}

/* A request aimed at us from someone unknown: answered (to the requester,
 * from our MAC, for our address), and the requester learned. */
TEST_P(NeighFamily, AnswersRequestsForOwnAddress)
{
	const bool v6 = GetParam();
	soft_pair p(v6, 4096, 64, dynamic());
	ASSERT_TRUE(p.ok);
	const unsigned base0 = p.in_use(0), base1 = p.in_use(1);
	{
		rig r(p);
		const wire::gid who = ip_of(v6 ? "fd00::77" : "10.1.0.77");
		if (!v6) {
			r.inject(0, arp_frame(1, stranger, bcast, stranger, who, rte_ether_addr{}, p.addr[0]));
		} else {
			nd_spec s;
			s.eth_src = s.opt_mac = stranger;
			s.eth_dst = solicited_node_mac(p.addr[0].raw);
			s.src = who;
			s.dst = solicited(p.addr[0]);
			s.target = p.addr[0];
			r.inject(0, nd_frame(s));
		}
		std::vector<rte_mbuf *> got;
		r.pump_until([&] {
			auto v = r.capture(1);
			got.insert(got.end(), v.begin(), v.end());
			return !got.empty();
		}, 5, 1);
		ASSERT_EQ(got.size(), 1u);
		const uint8_t *f = data(got[0]);
		EXPECT_TRUE(same_mac(f, stranger)) << "unicast to the requester";
		EXPECT_TRUE(same_mac(f + 6, p.hw[0]));
		if (!v6) {
			EXPECT_EQ(f[21], 2) << "reply";
			EXPECT_TRUE(same_mac(f + 22, p.hw[0]));
			EXPECT_EQ(0, memcmp(f + 28, p.addr[0].raw + 12, 4));
			EXPECT_TRUE(same_mac(f + 32, stranger));
			EXPECT_EQ(0, memcmp(f + 38, who.raw + 12, 4));
		} else {
			const auto *ip = reinterpret_cast<const rte_ipv6_hdr *>(f + 14);
			EXPECT_EQ(ip->hop_limits, 255);
			EXPECT_EQ(0, memcmp(ip->src_addr, p.addr[0].raw, 16));
			EXPECT_EQ(0, memcmp(ip->dst_addr, who.raw, 16));
			EXPECT_EQ(rte_ipv6_udptcp_cksum_verify(ip, f + 54), 0);
			EXPECT_EQ(f[54], 136);
			EXPECT_EQ(f[58], 0x60) << "Solicited and Override";
			EXPECT_EQ(0, memcmp(f + 62, p.addr[0].raw, 16));
			EXPECT_EQ(f[78], 2) << "target link-layer address option";
			EXPECT_EQ(f[79], 1);
			EXPECT_TRUE(same_mac(f + 80, p.hw[0]));
		}
		free_all(got);
		neigh_info ni{};
		ASSERT_TRUE(r.info(0, who, &ni));
		EXPECT_EQ(ni.state, neigh_state::reachable);
		EXPECT_TRUE(same_mac(ni.mac.addr_bytes, stranger));
		neigh_stats s = r.stats(0);
		EXPECT_EQ(s.requests_received, 1u);
		EXPECT_EQ(s.replies_sent, 1u);
		EXPECT_EQ(s.learned, 1u);
		EXPECT_EQ(r.prepare(0, soft_pair::attr_to(who)), 0);
		EXPECT_TRUE(r.settle(base0, base1));
	}
}

/* RFC 826 merge / RFC 4861 7.2.5: replies nobody asked for create nothing;
 * nor do requests for someone else. */
TEST_P(NeighFamily, UnsolicitedCreatesNothing)
{
	const bool v6 = GetParam();
	soft_pair p(v6, 4096, 64, dynamic());
	ASSERT_TRUE(p.ok);
	const unsigned base0 = p.in_use(0), base1 = p.in_use(1);
	{
		rig r(p);
		const wire::gid a1 = ip_of(v6 ? "fd00::50" : "10.1.0.50");
		const wire::gid a2 = ip_of(v6 ? "fd00::51" : "10.1.0.51");
		const wire::gid other = ip_of(v6 ? "fd00::52" : "10.1.0.52");
		if (!v6) {
			r.inject(0, arp_frame(2, stranger, p.hw[0], stranger, a1, p.hw[0], p.addr[0]));
			r.inject(0, arp_frame(1, stranger, bcast, stranger, a2, rte_ether_addr{}, other));
			r.inject(0, arp_frame(1, stranger, bcast, stranger, a1, rte_ether_addr{}, a1)); /* gratuitous */
		} else {
			nd_spec s;
			s.type = 136;
			s.flags = 0x20; /* unsolicited, override */
			s.opt_type = 2;
			s.eth_src = s.opt_mac = stranger;
			s.eth_dst = rte_ether_addr{{0x33, 0x33, 0, 0, 0, 1}};
			s.src = s.target = a1;
			s.dst = ip_of("ff02::1");
			r.inject(0, nd_frame(s));
			s.flags = 0x60;
			s.eth_dst = p.hw[0];
			s.dst = p.addr[0];
			r.inject(0, nd_frame(s)); /* "solicited", but we never asked */
			nd_spec q;
			q.eth_src = q.opt_mac = stranger;
			q.eth_dst = solicited_node_mac(other.raw);
			q.src = a2;
			q.dst = solicited(other);
			q.target = other;
			r.inject(0, nd_frame(q));
		}
		EXPECT_TRUE(r.pump_until([&] { return r.stats(0).ignored == 3; }));
		neigh_stats s = r.stats(0);
		EXPECT_EQ(s.replies_received, v6 ? 2u : 1u);
		EXPECT_EQ(s.bad_frames, 0u);
		EXPECT_EQ(s.learned, 0u);
		EXPECT_EQ(s.replies_sent, 0u);
		EXPECT_EQ(r.entries(0), 0u);
		neigh_info ni{};
		EXPECT_FALSE(r.info(0, a1, &ni));
		EXPECT_FALSE(r.info(0, a2, &ni));
		int err = 0;
		EXPECT_EQ(r.create(0, soft_pair::attr_to(a1), &err), ah_null);
		EXPECT_EQ(err, EHOSTUNREACH);
		EXPECT_TRUE(r.settle(base0, base1));
	}
}

/* TTL: the entry re-resolves in the background; a new MAC rewrites the live
 * AV in place (same handle), packets follow it; a refresh nobody answers
 * keeps the old MAC. */
TEST_P(NeighFamily, TtlReresolutionRewritesLiveAv)
{
	const bool v6 = GetParam();
	soft_pair p(v6, 4096, 64, dynamic(250, 20, 3, 300));
	ASSERT_TRUE(p.ok);
	const unsigned base0 = p.in_use(0), base1 = p.in_use(1);
	const rte_ether_addr moved{{0x02, 0x00, 0x00, 0x00, 0x01, 0x99}};
	{
		rig r(p);
		const ibv_ah_attr a = soft_pair::attr_to(p.addr[1]);
		ASSERT_EQ(r.resolve(0, a), 0);
		int err = 0;
		ah_handle h = r.create(0, a, &err);
		ASSERT_EQ(err, 0);
		const soft_av *av = p.dev[0].ahs().lookup(h);
		ASSERT_NE(av, nullptr);
		const soft_av before = *av;

		/* Sends one datagram and returns the destination MAC it carried;
		 * the frame then goes on to side 1 and is delivered. */
		auto sent_to = [&](rte_ether_addr *dst) {
			r.pump_for(0.002, 2); /* wire towards side 1 empty */
			const unsigned d = r.delivered[1];
			r.send(0, h);
			auto v = r.capture(1);
			bool found = false;
			for (rte_mbuf *m : v) {
				if (is_roce(m)) {
					memcpy(dst->addr_bytes, data(m), 6);
					found = true;
				}
				RDGRAM_TSAN_RELEASE(m);
				EXPECT_EQ(rte_ring_enqueue(p.ring[1], m), 0);
			}
			EXPECT_TRUE(found);
			EXPECT_TRUE(r.pump_until([&] { return r.delivered[1] == d + 1; }));
		};
		rte_ether_addr d{};
		sent_to(&d);
		EXPECT_TRUE(rte_is_same_ether_addr(&d, &p.hw[1]));

		if (v6) {
			/* RFC 4861 7.2.5: an advertisement without the Override flag
			 * does not replace a known address. */
			nd_spec s;
			s.type = 136;
			s.flags = 0x40;
			s.opt_type = 2;
			s.eth_src = s.opt_mac = moved;
			s.eth_dst = p.hw[0];
			s.src = s.target = p.addr[1];
			s.dst = p.addr[0];
			const uint64_t ign = r.stats(0).ignored;
			r.inject(0, nd_frame(s));
			EXPECT_TRUE(r.pump_until([&] { return r.stats(0).ignored == ign + 1; }));
			EXPECT_EQ(r.stats(0).mac_changes, 0u);
			EXPECT_TRUE(same_mac(av->hdr, p.hw[1]));
		}

		/* The peer "moves" to another MAC and says so. */
		if (!v6) {
			r.inject(0, arp_frame(2, moved, p.hw[0], moved, p.addr[1], p.hw[0], p.addr[0]));
		} else {
			nd_spec s;
			s.type = 136;
			s.flags = 0x60;
			s.opt_type = 2;
			s.eth_src = s.opt_mac = moved;
			s.eth_dst = p.hw[0];
			s.src = s.target = p.addr[1];
			s.dst = p.addr[0];
			r.inject(0, nd_frame(s));
		}
		EXPECT_TRUE(r.pump_until([&] { return r.stats(0).mac_changes == 1; }));
		EXPECT_EQ(p.dev[0].ahs().lookup(h), av) << "same handle, same slot, still live";
		EXPECT_TRUE(same_mac(av->hdr, moved)) << mac_str(av->hdr);
		EXPECT_EQ(0, memcmp(av->hdr + 6, before.hdr + 6, sizeof(before.hdr) - 6)) << "only the MAC moved";
		EXPECT_EQ(r.stats(0).av_rewrites, 1u);
		sent_to(&d);
		EXPECT_TRUE(rte_is_same_ether_addr(&d, &moved)) << mac_str(d.addr_bytes);

		/* TTL (250 ms): stale, a request goes out, the real peer answers
		 * with its real MAC, and the AV moves back. */
		const uint64_t req = r.stats(0).requests_sent;
		EXPECT_TRUE(r.pump_until([&] { return r.stats(0).mac_changes == 2; }, 3));
		EXPECT_GT(r.stats(0).requests_sent, req);
		EXPECT_TRUE(same_mac(av->hdr, p.hw[1]));
		EXPECT_EQ(p.dev[0].ahs().lookup(h), av);
		neigh_info ni{};
		ASSERT_TRUE(r.info(0, p.addr[1], &ni));
		EXPECT_EQ(ni.state, neigh_state::reachable);
		sent_to(&d);
		EXPECT_TRUE(rte_is_same_ether_addr(&d, &p.hw[1]));

		/* The peer goes quiet: the refresh fails, the old MAC stays. */
		r.set_polled(1, false);
		EXPECT_TRUE(r.pump_until([&] { return r.stats(0).refresh_failures >= 1; }, 3));
		ASSERT_TRUE(r.info(0, p.addr[1], &ni));
		EXPECT_EQ(ni.state, neigh_state::stale);
		EXPECT_TRUE(same_mac(av->hdr, p.hw[1]));
		EXPECT_EQ(r.prepare(0, a), 0) << "stale is usable";
		ah_handle h2 = r.create(0, a, &err);
		EXPECT_EQ(err, 0);
		/* Back: the next round after the hold succeeds. */
		r.set_polled(1, true);
		EXPECT_TRUE(r.pump_until([&] {
			neigh_info x{};
			return r.info(0, p.addr[1], &x) && x.state == neigh_state::reachable;
		}, 3));
		ASSERT_TRUE(r.info(0, p.addr[1], &ni));
		EXPECT_EQ(ni.nb_ahs, 2u);
		EXPECT_EQ(r.stats(0).mac_changes, 2u);
		r.destroy(0, h2);
		r.destroy(0, h);
		EXPECT_EQ(r.stats(0).bad_frames, 0u);
		EXPECT_TRUE(r.settle(base0, base1));
	}
}

INSTANTIATE_TEST_SUITE_P(V4V6, NeighFamily, ::testing::Values(false, true),
			 [](const ::testing::TestParamInfo<bool> &i) { return i.param ? "IPv6" : "IPv4"; });

/* resolve = false: the static table only, as before neighbour resolution. */
TEST(Neigh, StaticOnlyWhenResolveOff)
{
	soft_pair p(false, 4096, 64, [](soft_config &c, int side) {
		c.resolve = false;
		if (side == 0)
			c.neighbours.clear();
	});
	ASSERT_TRUE(p.ok);
	const unsigned base0 = p.in_use(0), base1 = p.in_use(1);
	{
		rig r(p);
		const ibv_ah_attr a = soft_pair::attr_to(p.addr[1]);
		EXPECT_EQ(r.prepare(0, a), EHOSTUNREACH);
		int err = 0;
		EXPECT_EQ(r.create(0, a, &err), ah_null);
		EXPECT_EQ(err, EHOSTUNREACH);
		r.pump_for(0.05);
		EXPECT_EQ(r.stats(0).requests_sent, 0u);
		EXPECT_EQ(p.q[1].counters().rx_to_control, 0u) << "nothing on the wire";
		/* Side 1 has side 0 as a static neighbour. */
		EXPECT_EQ(r.prepare(1, soft_pair::attr_to(p.addr[0])), 0);
		ah_handle h = r.create(1, soft_pair::attr_to(p.addr[0]), &err);
		EXPECT_EQ(err, 0);
		/* Multicast and EINVAL need no neighbour either way. */
		EXPECT_EQ(r.prepare(0, soft_pair::attr_to(ip_of("239.1.2.3"))), 0);
		ibv_ah_attr bad = a;
		bad.port_num = 2;
		EXPECT_EQ(r.prepare(0, bad), EINVAL);
		bad = a;
		bad.is_global = 0;
		EXPECT_EQ(r.prepare(0, bad), EINVAL);
		EXPECT_EQ(r.prepare(0, soft_pair::attr_to(ip_of("fd00::1"))), EINVAL);
		/* Still answers requests for its own address, learns nothing. */
		r.inject(0, arp_frame(1, stranger, bcast, stranger, ip_of("10.1.0.40"), rte_ether_addr{}, p.addr[0]));
		EXPECT_TRUE(r.pump_until([&] { return r.stats(0).replies_sent == 1; }));
		EXPECT_EQ(r.stats(0).learned, 0u);
		EXPECT_EQ(r.entries(0), 0u);
		r.destroy(1, h);
		EXPECT_TRUE(r.settle(base0, base1));
	}
}

/* Static neighbours never expire and the network cannot change them. */
TEST(Neigh, StaticNeverChanges)
{
	soft_pair p(false, 4096, 64, [](soft_config &c, int) { c.neigh_ttl_ms = 50; });
	ASSERT_TRUE(p.ok);
	{
		rig r(p);
		int err = 0;
		ah_handle h = r.create(0, soft_pair::attr_to(p.addr[1]), &err);
		ASSERT_EQ(err, 0);
		r.inject(0, arp_frame(2, stranger, p.hw[0], stranger, p.addr[1], p.hw[0], p.addr[0]));
		EXPECT_TRUE(r.pump_until([&] { return r.stats(0).replies_received == 1; }));
		r.pump_for(0.15);
		neigh_info ni{};
		ASSERT_TRUE(r.info(0, p.addr[1], &ni));
		EXPECT_EQ(ni.state, neigh_state::static_);
		EXPECT_TRUE(same_mac(p.dev[0].ahs().lookup(h)->hdr, p.hw[1]));
		EXPECT_EQ(r.stats(0).requests_sent, 0u);
		EXPECT_EQ(r.stats(0).mac_changes, 0u);
		r.destroy(0, h);
	}
}

/* Malformed ARP/ND: each refused under its own reason, never answered,
 * every mbuf back in its pool. */
struct bad_case {
	const char *name;
	bool v6;
	std::function<bytes(const soft_pair &)> frame;
	uint64_t neigh_stats::*counter; /* nullptr: the queue drops it */
	uint64_t soft::soft_counters::*qcounter;
};

nd_spec good_ns(const soft_pair &p)
{
	nd_spec s;
	s.eth_src = s.opt_mac = stranger;
	s.eth_dst = solicited_node_mac(p.addr[0].raw);
	s.src = ip_of("fd00::77");
	s.dst = solicited(p.addr[0]);
	s.target = p.addr[0];
	return s;
}
bytes good_arp(const soft_pair &p)
{
	return arp_frame(1, stranger, bcast, stranger, ip_of("10.1.0.77"), rte_ether_addr{}, p.addr[0]);
}

const bad_case bad_cases[] = {
	{"arp_short", false, [](const soft_pair &p) { bytes f = good_arp(p); f.resize(40); return f; },
	 &neigh_stats::bad_short, nullptr},
	{"arp_htype", false, [](const soft_pair &p) { bytes f = good_arp(p); f[15] = 6; return f; },
	 &neigh_stats::bad_arp_header, nullptr},
	{"arp_ptype", false, [](const soft_pair &p) { bytes f = good_arp(p); f[16] = 0x86, f[17] = 0xdd; return f; },
	 &neigh_stats::bad_arp_header, nullptr},
	{"arp_hlen", false, [](const soft_pair &p) { bytes f = good_arp(p); f[18] = 8; return f; },
	 &neigh_stats::bad_arp_header, nullptr},
	{"arp_op", false, [](const soft_pair &p) { bytes f = good_arp(p); f[21] = 3; return f; },
	 &neigh_stats::bad_arp_op, nullptr},
	{"arp_multicast_sender", false, [](const soft_pair &p) { bytes f = good_arp(p); f[22] |= 1; return f; },
	 &neigh_stats::bad_sender, nullptr},
	{"ns_checksum", true, [](const soft_pair &p) { auto s = good_ns(p); s.bad_csum = true; return nd_frame(s); },
	 &neigh_stats::bad_checksum, nullptr},
	{"ns_hop_limit", true, [](const soft_pair &p) { auto s = good_ns(p); s.hop = 64; return nd_frame(s); },
	 &neigh_stats::bad_hop_limit, nullptr},
	{"ns_zero_option", true, [](const soft_pair &p) { auto s = good_ns(p); s.opt_len = 0; return nd_frame(s); },
	 &neigh_stats::bad_option, nullptr},
	{"ns_option_overrun", true, [](const soft_pair &p) { auto s = good_ns(p); s.opt_len = 2; return nd_frame(s); },
	 &neigh_stats::bad_option, nullptr},
	{"ns_code", true, [](const soft_pair &p) { auto s = good_ns(p); s.code = 1; return nd_frame(s); },
	 &neigh_stats::bad_icmp_code, nullptr},
	{"ns_short_payload", true,
	 [](const soft_pair &p) { auto s = good_ns(p); s.opt_type = 0; s.payload_len = 16; return nd_frame(s); },
	 &neigh_stats::bad_short, nullptr},
	{"ns_multicast_target", true,
	 [](const soft_pair &p) { auto s = good_ns(p); s.target = ip_of("ff02::1"); return nd_frame(s); },
	 &neigh_stats::bad_target, nullptr},
	{"ns_dad_with_option", true,
	 [](const soft_pair &p) { auto s = good_ns(p); s.src = wire::gid{}; return nd_frame(s); },
	 &neigh_stats::bad_target, nullptr},
	{"na_solicited_to_multicast", true,
	 [](const soft_pair &p) {
		 nd_spec s = good_ns(p);
		 s.type = 136, s.flags = 0x60, s.opt_type = 2, s.target = s.src;
		 s.dst = ip_of("ff02::1");
		 return nd_frame(s);
	 },
	 &neigh_stats::bad_target, nullptr},
	/* A payload length past the frame: the poll thread already drops it. */
	{"nd_length_lie", true, [](const soft_pair &p) { auto s = good_ns(p); s.payload_len = 200; return nd_frame(s); },
	 nullptr, &soft::soft_counters::rx_truncated},
};

class NeighBadFrames : public ::testing::TestWithParam<bad_case> {};

TEST_P(NeighBadFrames, CountedAndFreed)
{
	const bad_case &c = GetParam();
	soft_pair p(c.v6, 4096, 64, dynamic());
	ASSERT_TRUE(p.ok);
	const unsigned base0 = p.in_use(0), base1 = p.in_use(1);
	{
		rig r(p);
		/* The unmodified frame is accepted and answered (control case). */
		r.inject(0, c.v6 ? nd_frame(good_ns(p)) : good_arp(p));
		EXPECT_TRUE(r.pump_until([&] { return r.stats(0).replies_sent == 1; }));
		r.inject(0, c.frame(p));
		if (c.counter != nullptr) {
			EXPECT_TRUE(r.pump_until([&] { return r.stats(0).bad_frames == 1; }));
			neigh_stats s = r.stats(0);
			EXPECT_EQ(s.*(c.counter), 1u) << c.name;
		} else {
			EXPECT_TRUE(r.pump_until([&] { return p.q[0].counters().*(c.qcounter) == 1; }));
			EXPECT_EQ(r.stats(0).bad_frames, 0u);
		}
		r.pump_for(0.02);
		EXPECT_EQ(r.stats(0).replies_sent, 1u) << "a bad frame is never answered";
		EXPECT_EQ(r.stats(0).requests_received, 1u);
		EXPECT_TRUE(r.settle(base0, base1)) << p.in_use(0) << " vs " << base0;
	}
}

INSTANTIATE_TEST_SUITE_P(AllReasons, NeighBadFrames, ::testing::ValuesIn(bad_cases),
			 [](const ::testing::TestParamInfo<bad_case> &i) { return std::string(i.param.name); });

/* A full control ring: the frame is dropped and counted by the poll thread
 * (rx_control_full), not leaked. */
TEST(Neigh, ControlRingFullDropsAndCounts)
{
	soft_pair p(false, 4096, 64, dynamic());
	ASSERT_TRUE(p.ok);
	const unsigned base0 = p.in_use(0), base1 = p.in_use(1);
	{
		rig r(p);
		r.set_polled(0, false); /* nobody drains side 0's control ring */
		const bytes f = good_arp(p);
		unsigned sent = 0;
		while (sent < 1100) {
			for (int k = 0; k < 100; k++, sent++)
				r.inject(0, f);
			r.pump(1);
			r.pump(1);
			r.pump(1);
			r.pump(1);
		}
		r.pump_until([&] { return rte_ring_count(p.ring[0]) == 0; }, 5, 1);
		const soft::soft_counters &k = p.q[0].counters();
		EXPECT_EQ(k.rx_to_control + k.rx_control_full, sent);
		EXPECT_GE(k.rx_control_full, 1u);
		EXPECT_EQ(k.rx_drops(), k.rx_control_full);
		r.set_polled(0, true);
		EXPECT_TRUE(r.settle(base0, base1));
		EXPECT_EQ(r.stats(0).requests_received, k.rx_to_control);
	}
}

/* ---- concurrency: a poll thread sends on a live AH while the control
 * thread swaps its MAC (run under TSan by the 'concurrency' suite). ---- */

struct sender_ctx {
	soft_pair *p;
	ah_handle h;
	std::atomic<bool> stop{false};
	std::atomic<uint64_t> sent{0};
};

int sender_main(void *arg)
{
	auto *x = static_cast<sender_ctx *>(arg);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(g_rt->qsbr(), tid);
	uint8_t b[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	recv_wc wc[32];
	const uint64_t deadline = rte_get_tsc_cycles() + 30 * rte_get_tsc_hz();
	while (!x->stop.load(std::memory_order_acquire) && rte_get_tsc_cycles() < deadline) {
		/* This lcore owns queue 0: it also carries ARP in and out. */
		uint16_t n = x->p->q[0].rx_burst(wc, 32);
		for (uint16_t k = 0; k < n; k++)
			rte_pktmbuf_free(wc[k].mbuf);
		send_wr w[4];
		for (auto &wr : w)
			wr = send_wr{x->h, x->p->qpn[1], x->p->qkey, nullptr, b, sizeof(b), 0, send_inline};
		x->sent.fetch_add(x->p->q[0].tx_burst(w, 4), std::memory_order_relaxed);
		x->p->q[0].tx_flush();
		rte_rcu_qsbr_quiescent(g_rt->qsbr(), tid);
	}
	poll_thread_offline(g_rt->qsbr(), tid);
	return 0;
}

TEST(NeighConcurrent, MacSwapUnderTraffic)
{
	if (rte_lcore_count() < 2)
		GTEST_SKIP() << "needs two lcores";
	soft_pair p(false, 4096, 64, dynamic());
	ASSERT_TRUE(p.ok);
	const rte_ether_addr m[2] = {p.hw[1], rte_ether_addr{{0x02, 0x00, 0x00, 0x00, 0x01, 0x77}}};
	int err = 0;
	ah_handle h = ah_null;
	{
		rig r(p);
		ASSERT_EQ(r.resolve(0, soft_pair::attr_to(p.addr[1])), 0);
		h = r.create(0, soft_pair::attr_to(p.addr[1]), &err);
		ASSERT_EQ(err, 0);
		r.set_polled(1, false); /* side 1's control thread stays out of it */
		const unsigned base0 = p.in_use(0);

		sender_ctx x;
		x.p = &p;
		x.h = h;
		unsigned worker = rte_get_next_lcore(rte_get_main_lcore(), 1, 0);
		ASSERT_EQ(launch_on_lcore(sender_main, &x, worker), 0);
		uint64_t seen[2] = {0, 0}, torn = 0, flips = 0;
		const double end = now_s() + 1.0;
		while (now_s() < end || flips < 20) {
			if (now_s() > end + 10)
				break;
			/* Flip the peer's MAC with a reply "from" it, through the wire
			 * and the worker's rx_burst. */
			const rte_ether_addr &to = m[(flips + 1) & 1];
			/* (From side 1's idle pool: the sender may drain side 0's.) */
			r.inject(0, arp_frame(2, to, p.hw[0], to, p.addr[1], p.hw[0], p.addr[0]), 1);
			flips++;
			for (int k = 0; k < 20; k++) {
				for (rte_mbuf *f : r.capture(1)) {
					if (is_roce(f)) {
						const uint8_t *d = data(f);
						if (same_mac(d, m[0]))
							seen[0]++;
						else if (same_mac(d, m[1]))
							seen[1]++;
						else
							torn++;
						if (!same_mac(d + 6, p.hw[0]))
							torn++;
					}
					rte_pktmbuf_free(f);
				}
				rte_delay_us_block(50);
			}
		}
		x.stop.store(true, std::memory_order_release);
		wait_on_lcore(worker);
		for (rte_mbuf *f : r.capture(1))
			rte_pktmbuf_free(f);
		EXPECT_EQ(torn, 0u) << "every frame carries exactly one of the two MACs";
		EXPECT_GT(seen[0], 0u);
		EXPECT_GT(seen[1], 0u);
		EXPECT_GT(x.sent.load(), 1000u);
		neigh_stats s{};
		/* The worker is gone: this thread owns queue 0 now. */
		EXPECT_TRUE(r.pump_until([&] { return (s = r.stats(0)).mac_changes == flips; }, 5, 1));
		EXPECT_EQ(s.av_rewrites, flips);
		fprintf(stderr, "  %lu packets, %lu MAC swaps; saw %lu / %lu\n", (unsigned long)x.sent.load(),
			(unsigned long)flips, (unsigned long)seen[0], (unsigned long)seen[1]);
		r.destroy(0, h);
		r.pump_until([&] { return p.in_use(0) == base0; }, 5, 1);
		EXPECT_EQ(p.in_use(0), base0);
	}
}

/* ---- scale: 100,000 neighbours, no scan anywhere ---- */

wire::gid nth_v4(uint32_t i) { return wire::gid::from_v4(rte_cpu_to_be_32(0x0a000000u | (2u << 16) | i)); }

TEST(NeighScale, HundredThousandStatic)
{
	RDGRAM_SKIP_SINGLE_THREADED_UNDER_TSAN();
	const uint32_t N = 100000;
	soft_pair p(false, 4096, 1024, [&](soft_config &c, int side) {
		if (side != 0)
			return;
		for (uint32_t i = 0; i < N; i++)
			c.neighbours.push_back({nth_v4(i), rte_ether_addr{{0x02, 0x10, 0, uint8_t(i >> 16),
									  uint8_t(i >> 8), uint8_t(i)}}});
	});
	ASSERT_TRUE(p.ok);
	rig r(p);
	EXPECT_EQ(r.entries(0), N + 1);
	uint32_t ok = 0;
	double t = 0;
	g_rt->ctl().call([&] {
		const double t0 = now_s();
		for (uint32_t i = 0; i < N; i++)
			ok += p.dev[0].prepare_ah(soft_pair::attr_to(nth_v4(i))) == 0;
		t = now_s() - t0;
	});
	EXPECT_EQ(ok, N);
	fprintf(stderr, "  prepare_ah x %u static: %.1f ms (%.0f ns each)\n", N, t * 1e3, t * 1e9 / N);
	EXPECT_LT(t / N, 20e-6) << "a hash lookup, not a scan";
	/* AHs on the last entries carry their MACs. */
	int err = 0;
	ah_handle h = r.create(0, soft_pair::attr_to(nth_v4(N - 1)), &err);
	ASSERT_EQ(err, 0);
	const uint8_t want[6] = {0x02, 0x10, 0, uint8_t((N - 1) >> 16), uint8_t((N - 1) >> 8), uint8_t(N - 1)};
	EXPECT_EQ(0, memcmp(p.dev[0].ahs().lookup(h)->hdr, want, 6));
	/* No timers for static entries: a poll is cheap however big the table. */
	double tp = 0;
	g_rt->ctl().call([&] {
		const double t0 = now_s();
		for (int i = 0; i < 1000; i++)
			p.dev[0].poll(rte_get_tsc_cycles());
		tp = (now_s() - t0) / 1000;
	});
	fprintf(stderr, "  poll() with %u static entries: %.2f us\n", N, tp * 1e6);
	EXPECT_LT(tp, 200e-6);
	r.destroy(0, h);
}

TEST(NeighScale, HundredThousandDynamicExpire)
{
	const uint32_t N = 100000;
	soft_pair p(false, 4096, 64, dynamic(30000, 50, 1, 100));
	ASSERT_TRUE(p.ok);
	const unsigned base0 = p.in_use(0), base1 = p.in_use(1);
	{
		rig r(p);
		uint32_t inprog = 0;
		double t = 0;
		g_rt->ctl().call([&] {
			const double t0 = now_s();
			for (uint32_t i = 0; i < N; i++)
				inprog += p.dev[0].prepare_ah(soft_pair::attr_to(nth_v4(i))) == EINPROGRESS;
			t = now_s() - t0;
		});
		EXPECT_EQ(inprog, N);
		EXPECT_EQ(r.entries(0), N);
		fprintf(stderr, "  prepare_ah x %u new (request each): %.1f ms\n", N, t * 1e3);
		/* Every one times out (one request, 50 ms), is held 100 ms, then
		 * forgotten: the timers drive it all. */
		EXPECT_TRUE(r.pump_until([&] { return r.entries(0) == 0; }, 20));
		neigh_stats s = r.stats(0);
		EXPECT_EQ(s.timeouts, N);
		EXPECT_EQ(s.requests_sent + s.tx_failed, uint64_t(N)) << "every request sent or counted as not";
		EXPECT_TRUE(r.settle(base0, base1));
	}
}

/* ---- configuration (the port table every app reads, soft_config_toml.h) ---- */

/* The first port table of text, or the config_error it throws. */
soft::port_config load_port_text(const std::string &text, const std::string &name = "neigh.toml")
{
	toml::table root = parse_config_text(text, name);
	table_reader r(root, "", name);
	auto ports = soft::load_ports(r, {.name_prefix = "port", .devargs_required = false, .addresses_required = false,
					      .defaults = {}, .extra = {}});
	r.finish();
	return ports.empty() ? soft::port_config{} : ports[0];
}

TEST(NeighConfig, TomlKeys)
{
	soft::port_config c = load_port_text("[port]\nresolve = false\nneigh_ttl_ms = 500\nneigh_retry_ms = 7\n"
					     "neigh_retries = 5\nneigh_fail_hold_ms = 0\n");
	EXPECT_FALSE(c.resolve);
	EXPECT_EQ(c.neigh_ttl_ms, 500u);
	EXPECT_EQ(c.neigh_retry_ms, 7u);
	EXPECT_EQ(c.neigh_retries, 5u);
	EXPECT_EQ(c.neigh_fail_hold_ms, 0u);

	soft::port_config d;
	EXPECT_TRUE(d.resolve);
	EXPECT_EQ(d.neigh_ttl_ms, 30000u);

	try {
		load_port_text("[port]\nneigh_retries = 0\n");
		ADD_FAILURE() << "neigh_retries = 0 accepted";
	} catch (const config_error &e) {
		EXPECT_EQ(std::string(e.what()),
			  "neigh.toml:2:17: key 'port.neigh_retries': expected an integer from 1 to 100, got 0");
	}
	try {
		load_port_text("[port]\n\nresolve = 1\n");
		ADD_FAILURE() << "resolve = 1 accepted";
	} catch (const config_error &e) {
		EXPECT_EQ(std::string(e.what()).rfind("neigh.toml:3:11: key 'port.resolve'", 0), 0u) << e.what();
	}
}

TEST(NeighConfig, DeviceRefusesZeroRetries)
{
	soft_device d;
	soft_config c;
	c.addresses = {ip_of("10.1.0.1")};
	c.neigh_retries = 0;
	EXPECT_EQ(d.open(c), EINVAL);
	EXPECT_NE(d.error().find("neigh_retries"), std::string::npos) << d.error();
}

/* Two VLAN ports (soft_params.h vlan) resolve each other: ARP or ND goes
 * out tagged both ways (an untagged request would be dropped by the peer as
 * rx_vlan_untagged), and a datagram follows on the resolved AH. */
TEST_P(NeighFamily, VlanPortsResolveTagged)
{
	const bool v6 = GetParam();
	soft_pair p(v6, 4096, 64, [](soft_config &c, int side) {
		dynamic()(c, side);
		c.vlan = 42;
	});
	ASSERT_TRUE(p.ok);
	{
		rig r(p);
		const ibv_ah_attr a = soft_pair::attr_to(p.addr[1]);
		ASSERT_EQ(r.resolve(0, a), 0);
		int err = 0;
		ah_handle h = r.create(0, a, &err);
		ASSERT_EQ(err, 0);
		uint8_t b[4] = {1, 2, 3, 4};
		send_wr wr{h, p.qpn[1], p.qkey, nullptr, b, sizeof(b), 0, send_inline};
		ASSERT_EQ(p.q[0].tx_burst(&wr, 1), 1);
		ASSERT_TRUE(r.pump_until([&] { return r.delivered[1] == 1; }));
		for (int i = 0; i < 2; i++) {
			EXPECT_EQ(p.q[i].counters().rx_vlan_untagged, 0u) << i;
			EXPECT_EQ(p.q[i].counters().rx_drops(), 0u) << i;
		}
		EXPECT_GE(p.q[0].counters().tx_control, 1u);
		EXPECT_GE(p.q[1].counters().tx_control, 1u) << "the reply, tagged too";
		r.destroy(0, h);
	}
}

} // namespace
