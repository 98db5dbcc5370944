/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * ahn_attrib (EFA-style receive attribution) over two soft devices joined by
 * net_ring, side 1 reporting ahns (soft_config::report_ahn):
 *  - the unknown-sender flow through the control thread (a poller): the
 *    first datagram is unknown and counted, the control thread creates the
 *    AH and binds its ahn, the sender's next datagrams are attributed;
 *  - the 0xFFFF-after-creation race (libfabric #7856/#11831), step by step:
 *    datagrams received before the AH existed but read after it was bound
 *    are attributed by SGID; two poll threads asking for the same sender
 *    make one mapping; a known ahn with an unbound QPN, and a reused QPN
 *    with a new connection id, are never taken for the bound peer;
 *  - a full device AH table: a real one (a slot held outside the registry,
 *    so the device says ENOMEM before the registry is at capacity) and the
 *    fault switch: the LRU sender is evicted, the creation retried once, the
 *    evicted sender's ahn unbound (its datagrams 0xFFFF, then unknown and
 *    re-created), its slot reused by another sender without any datagram
 *    attributed to the wrong one.
 * Every datagram's payload carries its true sender (sender index, QPN,
 * connection id): each attribution is checked against it.
 */
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <rte_cycles.h>

#include "eal_env.h"
#include "rdgram/ah_service.h"
#include "rdgram/ahn_attrib.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

/* What the sender puts in the payload: the truth. */
struct truth {
	uint32_t sender; /* index of its address on side 0 */
	uint32_t qpn;
	uint32_t connid;
};

/* The cookie ahn_attrib stores: its request's (address, qpn, connid), so a
 * wrong peer shows as a cookie that is not the datagram's own. */
uint64_t cookie_of(const wire::gid &g, uint32_t qpn, uint32_t connid)
{
	return uint64_t(g.raw[15]) << 56 | uint64_t(qpn & 0xffffff) << 32 | connid;
}
uint64_t cookie_cb(void *, const ahn_sender &s) { return cookie_of(s.sgid, s.qpn, s.connid); }

/* Side 0 gets n_addr addresses (10.1.0.1, then .11, .12, ...), side 1 knows
 * them all (same MAC) and a spare 10.1.0.99; side 1 reports ahns and has a
 * table of max_ah1 AHs. */
soft_pair::config_fn multi(unsigned n_addr, uint32_t max_ah1)
{
	return [=](soft::soft_config &c, int side) {
		if (side == 0) {
			for (unsigned i = 1; i < n_addr; i++) {
				char s[32];
				snprintf(s, sizeof(s), "10.1.0.%u", 10 + i);
				c.addresses.push_back(ip_of(s));
			}
			return;
		}
		c.report_ahn = true;
		c.max_ah = max_ah1;
		const rte_ether_addr m = c.neighbours[0].mac;
		for (unsigned i = 1; i < n_addr; i++) {
			char s[32];
			snprintf(s, sizeof(s), "10.1.0.%u", 10 + i);
			c.neighbours.push_back({ip_of(s), m});
		}
		c.neighbours.push_back({ip_of("10.1.0.99"), m});
	};
}

/* A test bench: the pair, side 1's registry and ahn_attrib, one client per
 * "poll thread" (this thread plays them). */
struct bench {
	soft_pair p;
	std::vector<wire::gid> addr0; /* side 0's addresses */
	std::vector<ah_handle> to1;   /* side 0's AH to side 1 from each address */
	ah_registry *reg = nullptr;
	ahn_attrib at;
	ahn_attrib_client cl[2];
	uint64_t misattributed = 0;

	bench(unsigned n_addr, uint32_t max_ah1, uint32_t reg_cap, uint64_t forget_us = 1000000)
		: p(false, 4096, 1024, multi(n_addr, max_ah1))
	{
		if (!p.ok)
			return;
		addr0 = p.dev[0].port().gids;
		for (unsigned i = 0; i < n_addr; i++) {
			ibv_ah_attr a = soft_pair::attr_to(p.addr[1]);
			a.grh.sgid_index = uint8_t(i);
			int err = -1;
			ah_handle h = ah_null;
			g_rt->ctl().call([&] { h = p.dev[0].create_ah(a, &err); });
			EXPECT_EQ(err, 0);
			to1.push_back(h);
		}
		int rc = -1;
		g_rt->ctl().call([&] {
			reg = new ah_registry(p.dev[1], reg_cap);
			ahn_attrib_config c;
			c.max_peers = 256;
			c.max_senders = 64;
			c.qsbr = g_rt->qsbr();
			c.forget_after_us = forget_us;
			c.cookie_of = cookie_cb;
			rc = at.init(p.dev[1], *reg, c);
			ahn_attrib_client_config cc;
			cc.ring_size = 64;
			cc.reask_us = 0; /* every unknown datagram asks: the tests count them */
			for (auto &c1 : cl)
				if (rc == 0)
					rc = at.add_client(c1, cc);
		});
		EXPECT_EQ(rc, 0);
	}
	~bench()
	{
		g_rt->ctl().call([&] {
			for (auto &c1 : cl)
				at.remove_client(c1);
			at.fini();
			delete reg; /* destroys its AHs */
		});
		for (auto &c1 : cl)
			c1.fini();
		g_rt->ctl().call([&] {
			for (ah_handle h : to1)
				p.dev[0].destroy_ah(h);
		});
	}

	/* Sends one datagram from address s, local QP index qp, with connid. */
	void send(unsigned s, unsigned qp, uint32_t connid)
	{
		p.q[0].select_send_qp(qp);
		truth t{s, p.q[0].qp(qp)->qpn, connid};
		send_wr w{to1[s], p.qpn[1], p.qkey, nullptr, &t, sizeof(t), 0, send_inline};
		ASSERT_EQ(p.q[0].tx_burst(&w, 1), 1);
		p.q[0].tx_flush();
	}
	/* Receives exactly n datagrams on side 1. */
	std::vector<recv_wc> recv(unsigned n)
	{
		std::vector<recv_wc> out;
		recv_wc wc[32];
		for (int spin = 0; spin < 1000000 && out.size() < n; spin++) {
			uint16_t k = p.q[1].rx_burst(wc, 32);
			out.insert(out.end(), wc, wc + k);
		}
		EXPECT_EQ(out.size(), n) << "datagrams lost";
		return out;
	}
	static truth truth_of(const recv_wc &wc)
	{
		truth t;
		memcpy(&t, rte_pktmbuf_mtod_offset(wc.mbuf, void *, 40), sizeof(t));
		return t;
	}
	/* Attributes wc on client c; checks the result against the payload. */
	ahn_attribution attribute(unsigned c, const recv_wc &wc)
	{
		const truth t = truth_of(wc);
		const ahn_attribution r = cl[c].attribute(wc, t.connid, rte_get_tsc_cycles());
		if (r.peer != ahn_map::nil && r.cookie != cookie_of(addr0[t.sender], t.qpn, t.connid)) {
			misattributed++;
			ADD_FAILURE() << "datagram of sender " << t.sender << " qpn " << t.qpn << " connid "
				      << t.connid << " attributed to cookie " << std::hex << r.cookie;
		}
		EXPECT_EQ(wc.sgid, addr0[t.sender]) << "delivered with its SGID";
		return r;
	}
	/* Round trip: send, receive, attribute; the mbuf freed. */
	ahn_attribution one(unsigned s, unsigned qp, uint32_t connid, unsigned c = 0, uint16_t *slid = nullptr)
	{
		send(s, qp, connid);
		auto v = recv(1);
		if (v.empty())
			return {ahn_map::nil, 0, false};
		const ahn_attribution r = attribute(c, v[0]);
		if (slid != nullptr)
			*slid = v[0].slid;
		rte_pktmbuf_free(v[0].mbuf);
		return r;
	}
	/* The control thread's step, run now (tests that do not register the
	 * poller decide exactly when it runs). */
	void control_step()
	{
		g_rt->ctl().call([&] { at.poll(rte_get_tsc_cycles()); });
	}
	ahn_attrib_stats stats()
	{
		ahn_attrib_stats s;
		g_rt->ctl().call([&] { s = at.stats(); });
		return s;
	}
	ah_handle sender_ah(unsigned s)
	{
		ah_handle h;
		g_rt->ctl().call([&] { h = at.sender_ah(addr0[s]); });
		return h;
	}
};

} // namespace

/* Unknown sender -> counted, delivered with its SGID -> control thread
 * (poller) creates the AH and binds its ahn -> attributed by ahn. */
TEST(AhnAttrib, UnknownSenderThroughControlThread)
{
	bench b(1, 1024, 1024);
	ASSERT_TRUE(b.p.ok);
	ASSERT_EQ(b.p.q[0].add_qp(0x300, b.p.qkey), 0);
	ASSERT_EQ(b.at.start(g_rt->ctl()), 0);
	const uint32_t connid = 0xc0ffee01;
	unsigned unknown = 0, attributed = 0;
	uint16_t slid = 0;
	/* The control thread answers asynchronously: keep sending until the
	 * sender is attributed (bounded), then a run that must all hit. */
	for (int i = 0; i < 2000 && attributed == 0; i++) {
		auto r = b.one(0, 0, connid, 0, &slid);
		if (r.peer == ahn_map::nil) {
			unknown++;
			std::this_thread::sleep_for(std::chrono::microseconds(200));
		} else {
			attributed++;
		}
	}
	ASSERT_EQ(attributed, 1u) << "never attributed";
	EXPECT_GE(unknown, 1u);
	for (int i = 0; i < 50; i++) {
		auto r = b.one(0, 0, connid, 0, &slid);
		EXPECT_NE(r.peer, ahn_map::nil);
		EXPECT_FALSE(r.previous);
	}
	EXPECT_EQ(slid, b.sender_ah(0).slot) << "the device reports our AH's slot";
	const ahn_attrib_counters &c = b.cl[0].counters();
	EXPECT_EQ(c.unknown, unknown);
	EXPECT_EQ(c.asked, unknown) << "reask_us 0: every unknown datagram asks";
	/* The first attributed one may have been received (0xFFFF) just before
	 * the AH was created: the SGID fallback then took it. */
	EXPECT_EQ(c.by_ahn + c.by_gid, 51u);
	EXPECT_GE(c.by_ahn, 50u);
	/* Another QP of the same address: same AH, a second peer. */
	unsigned unknown2 = 0;
	bool hit = false;
	for (int i = 0; i < 2000 && !hit; i++) {
		auto r = b.one(0, 1, connid + 1, 0);
		hit = r.peer != ahn_map::nil;
		if (!hit) {
			unknown2++;
			std::this_thread::sleep_for(std::chrono::microseconds(200));
		}
	}
	EXPECT_TRUE(hit);
	EXPECT_GE(unknown2, 1u);
	b.at.stop();
	const ahn_attrib_stats s = b.stats();
	EXPECT_EQ(s.ahs_created, 1u) << "one AH per sender address";
	EXPECT_EQ(s.bound, 2u);
	EXPECT_EQ(s.requests, s.bound + s.duplicates);
	EXPECT_EQ(s.failed, 0u);
	EXPECT_EQ(b.misattributed, 0u);
}

/* The 0xFFFF-after-creation race, deterministically: the control thread runs
 * only when the test says so. */
TEST(AhnAttrib, UnknownAfterCreationRace)
{
	bench b(1, 1024, 1024, 0 /* forget previous incarnations at the next step */);
	ASSERT_TRUE(b.p.ok);
	ASSERT_EQ(b.p.q[0].add_qp(0x300, b.p.qkey), 0);
	const uint32_t c1 = 0x1111, c2 = 0x2222;

	/* Four datagrams in flight before the receiver has any AH: all 0xFFFF. */
	for (int i = 0; i < 4; i++)
		b.send(0, 0, c1);
	auto early = b.recv(4);
	ASSERT_EQ(early.size(), 4u);
	for (auto &wc : early)
		EXPECT_EQ(wc.slid, 0xffff);
	/* Two poll threads each read one and ask, before the control thread
	 * has run: two requests for the same peer. */
	EXPECT_EQ(b.attribute(0, early[0]).peer, ahn_map::nil);
	EXPECT_EQ(b.attribute(1, early[1]).peer, ahn_map::nil);
	EXPECT_EQ(b.cl[0].counters().asked + b.cl[1].counters().asked, 2u);
	b.control_step();
	ahn_attrib_stats s = b.stats();
	EXPECT_EQ(s.requests, 2u);
	EXPECT_EQ(s.duplicates, 1u) << "the second request must not make a second mapping";
	EXPECT_EQ(s.ahs_created, 1u);
	EXPECT_EQ(s.bound, 1u);
	EXPECT_EQ(b.at.map().live(), 1u);
	const ah_handle ah = b.sender_ah(0);
	ASSERT_NE(ah, ah_null);

	/* The other two still say 0xFFFF although the AH exists now: the SGID
	 * fallback attributes them (no new request). */
	for (int i = 2; i < 4; i++) {
		ahn_attribution r = b.attribute(0, early[i]);
		EXPECT_NE(r.peer, ahn_map::nil);
		EXPECT_FALSE(r.previous);
	}
	EXPECT_EQ(b.cl[0].counters().by_gid, 2u);
	EXPECT_EQ(b.cl[0].counters().asked, 1u);
	for (auto &wc : early)
		rte_pktmbuf_free(wc.mbuf);
	/* New datagrams carry the ahn. */
	uint16_t slid = 0;
	EXPECT_NE(b.one(0, 0, c1, 0, &slid).peer, ahn_map::nil);
	EXPECT_EQ(slid, ah.slot);
	EXPECT_EQ(b.cl[0].counters().by_ahn, 1u);

	/* A known ahn but an unbound QPN (another process behind the same
	 * address, not yet bound): unknown, never the bound peer. */
	EXPECT_EQ(b.one(0, 1, c1, 0, &slid).peer, ahn_map::nil);
	EXPECT_EQ(slid, ah.slot);
	b.control_step();
	EXPECT_NE(b.one(0, 1, c1).peer, ahn_map::nil);
	s = b.stats();
	EXPECT_EQ(s.ahs_created, 1u) << "same address, same AH";
	EXPECT_EQ(s.bound, 2u);

	/* QPN reuse: the process behind QPN 0x200 restarts with connection id
	 * c2. Its first datagram is unknown (not the old peer), then bound as a
	 * new incarnation; the old one's late datagrams are still its own. */
	EXPECT_EQ(b.one(0, 0, c2).peer, ahn_map::nil);
	b.control_step(); /* binds c2 */
	ahn_attribution now = b.one(0, 0, c2);
	EXPECT_NE(now.peer, ahn_map::nil);
	EXPECT_FALSE(now.previous);
	ahn_attribution late = b.one(0, 0, c1);
	EXPECT_NE(late.peer, ahn_map::nil);
	EXPECT_TRUE(late.previous);
	EXPECT_NE(late.peer, now.peer);
	EXPECT_EQ(b.cl[0].counters().previous, 1u);
	/* forget_after_us 0: the next step forgets it; its datagrams are
	 * unknown from then on, and the current one is untouched. */
	b.control_step();
	EXPECT_EQ(b.stats().forgotten, 1u);
	EXPECT_EQ(b.one(0, 0, c1).peer, ahn_map::nil);
	EXPECT_EQ(b.one(0, 0, c2).peer, now.peer);
	EXPECT_EQ(b.misattributed, 0u);
}

/* A full device table: the registry evicts the LRU sender, retries once;
 * the evicted sender's ahn is unbound at once and its slot reused. */
TEST(AhnAttrib, FullDeviceTableEvictsAndRetries)
{
	/* Side 1: 4 AH slots; one is held outside the registry, so the
	 * registry (capacity 4 = max_ah) meets a real device ENOMEM on its
	 * fourth creation. */
	constexpr unsigned n = 5;
	bench b(n, 4, 4);
	ASSERT_TRUE(b.p.ok);
	ah_handle foreign = ah_null;
	int err = -1;
	g_rt->ctl().call([&] { foreign = b.p.dev[1].create_ah(soft_pair::attr_to(ip_of("10.1.0.99")), &err); });
	ASSERT_EQ(err, 0);

	auto make_known = [&](unsigned s) {
		EXPECT_EQ(b.one(s, 0, 100 + s).peer, ahn_map::nil) << "sender " << s;
		b.control_step();
		uint16_t slid = 0;
		EXPECT_NE(b.one(s, 0, 100 + s, 0, &slid).peer, ahn_map::nil) << "sender " << s;
		EXPECT_EQ(slid, b.sender_ah(s).slot);
		return slid;
	};
	uint16_t slot_of[n];
	for (unsigned s = 0; s < 3; s++)
		slot_of[s] = make_known(s);
	/* The table is full (3 + the foreign one): sender 3 evicts the least
	 * recently created, sender 0, and takes its slot. */
	slot_of[3] = make_known(3);
	ahn_attrib_stats st = b.stats();
	ah_registry_stats rs;
	g_rt->ctl().call([&] { rs = b.reg->stats(); });
	EXPECT_EQ(rs.device_enomem_retries, 1u);
	EXPECT_EQ(rs.evicted, 1u);
	EXPECT_EQ(st.evicted, 1u);
	EXPECT_EQ(st.unbound, 1u);
	EXPECT_EQ(b.sender_ah(0), ah_null);
	EXPECT_EQ(slot_of[3], slot_of[0]) << "the evicted sender's slot is the one reused";
	/* Sender 0 again: the device no longer knows it (0xFFFF): unknown, not
	 * sender 3 although its old ahn is sender 3's now. */
	uint16_t slid = 0;
	EXPECT_EQ(b.one(0, 0, 100, 0, &slid).peer, ahn_map::nil);
	EXPECT_EQ(slid, 0xffff);
	/* Its re-creation evicts sender 1 (LRU). */
	b.control_step();
	EXPECT_NE(b.one(0, 0, 100, 0, &slid).peer, ahn_map::nil);
	EXPECT_EQ(slid, b.sender_ah(0).slot);
	EXPECT_EQ(b.sender_ah(1), ah_null);
	/* The fault switch: the device says ENOMEM although a slot is free
	 * (the foreign AH goes first), for sender 4: evict LRU (sender 2),
	 * retry once. */
	g_rt->ctl().call([&] {
		EXPECT_EQ(b.p.dev[1].destroy_ah(foreign), 0);
		b.p.dev[1].reclaim();
		b.p.dev[1].inject_create_error(ENOMEM);
	});
	slot_of[4] = make_known(4);
	g_rt->ctl().call([&] { rs = b.reg->stats(); });
	EXPECT_EQ(rs.device_enomem_retries, 3u);
	EXPECT_EQ(b.sender_ah(2), ah_null);
	EXPECT_NE(b.sender_ah(3), ah_null);
	/* Every sender once more: each is either attributed to itself or
	 * unknown (evicted), never to another. */
	for (unsigned round = 0; round < 3; round++)
		for (unsigned s = 0; s < n; s++) {
			b.one(s, 0, 100 + s);
			b.control_step();
		}
	st = b.stats();
	EXPECT_EQ(st.failed, 0u);
	EXPECT_EQ(st.bound - st.unbound, b.at.map().live());
	EXPECT_EQ(b.misattributed, 0u);
}

TEST(AhnAttrib, SharesAnAhServiceRegistry)
{
	/* One registry for the process's AHs: ah_service's, with ahn_attrib's
	 * eviction hook beside the service's own. */
	soft_pair p;
	ASSERT_TRUE(p.ok);
	ah_service svc;
	ah_service_config sc;
	sc.capacity = 64;
	sc.qsbr = g_rt->qsbr();
	ASSERT_EQ(svc.start(p.dev[1], g_rt->ctl(), sc), 0);
	ahn_attrib at;
	int rc = -1;
	ahn_sender s{};
	s.sgid = p.addr[0];
	s.dgid = p.addr[1];
	s.qpn = p.qpn[0];
	s.connid = ahn_map::any_connid;
	unsigned hooks = 0;
	g_rt->ctl().call([&] {
		ahn_attrib_config c;
		c.max_peers = 16;
		c.max_senders = 16;
		c.qsbr = g_rt->qsbr();
		rc = at.init(p.dev[1], svc.registry(), c);
		hooks = svc.registry().nb_evict_hooks();
		at.handle(s);
	});
	ASSERT_EQ(rc, 0);
	EXPECT_EQ(hooks, 2u);
	EXPECT_EQ(at.stats().bound, 1u);
	EXPECT_NE(at.sender_ah(p.addr[0]), ah_null);
	/* The registry trims the unreferenced sender AH: ahn_attrib follows. */
	g_rt->ctl().call([&] {
		svc.registry().trim();
		hooks = 0;
	});
	EXPECT_EQ(at.stats().evicted, 1u);
	EXPECT_EQ(at.sender_ah(p.addr[0]), ah_null);
	g_rt->ctl().call([&] {
		at.fini();
		hooks = svc.registry().nb_evict_hooks();
	});
	EXPECT_EQ(hooks, 1u) << "fini takes only its own hook";
	svc.stop();
}
