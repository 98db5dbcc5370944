/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * ahn_map: receive attribution by (ahn, source QPN, connection id), with
 * QPN reuse, against a reference model, and with readers racing the writer
 * (TSan suite).
 */
#include <atomic>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_launch.h>

#include "eal_env.h"
#include "rdgram/ahn_map.h"

using namespace rdgram;
using namespace rdgram::test;

TEST(AhnMap, BindLookupSeveralQpnsPerAhn)
{
	ahn_map m;
	ASSERT_EQ(m.init(1000, SOCKET_ID_ANY, nullptr), 0);
	uint32_t p[4];
	ASSERT_EQ(m.bind(7, 0x100, 11, 1001, &p[0]), 0);
	ASSERT_EQ(m.bind(7, 0x101, 12, 1002, &p[1]), 0); /* same host, 2nd process */
	ASSERT_EQ(m.bind(8, 0x100, 13, 1003, &p[2]), 0); /* same QPN, other host */
	ASSERT_EQ(m.bind(0, 0xffffff, 14, 1004, &p[3]), 0);
	for (int i = 0; i < 4; i++)
		EXPECT_EQ(m.cookie(p[i]), 1001u + i);
	EXPECT_EQ(m.lookup(7, 0x100).peer, p[0]);
	EXPECT_EQ(m.lookup(7, 0x101).peer, p[1]);
	EXPECT_EQ(m.lookup(8, 0x100).peer, p[2]);
	EXPECT_EQ(m.lookup(0, 0xffffff, 14).peer, p[3]);
	EXPECT_EQ(m.lookup(7, 0x102).peer, ahn_map::nil);
	EXPECT_EQ(m.lookup(9, 0x100).peer, ahn_map::nil);
	EXPECT_EQ(m.lookup(ahn_map::ahn_unknown, 0x100).peer, ahn_map::nil);
	uint32_t q;
	EXPECT_EQ(m.bind(ahn_map::ahn_unknown, 1, 1, 0, &q), EINVAL);
	EXPECT_EQ(m.bind(1, 1u << 24, 1, 0, &q), EINVAL);
	EXPECT_EQ(m.bind(7, 0x101, 12, 0, &q), EEXIST);
	EXPECT_EQ(q, p[1]);
	/* Removing the first peer of ahn 7 keeps the second reachable. */
	EXPECT_EQ(m.unbind(p[0]), 0);
	EXPECT_EQ(m.unbind(p[0]), EINVAL);
	EXPECT_EQ(m.lookup(7, 0x100).peer, ahn_map::nil);
	EXPECT_EQ(m.lookup(7, 0x101).peer, p[1]);
}

TEST(AhnMap, QpnReuseKeepsIncarnationsApart)
{
	ahn_map m;
	ASSERT_EQ(m.init(16, SOCKET_ID_ANY, nullptr), 0);
	uint32_t old_p, new_p;
	ASSERT_EQ(m.bind(3, 0x42, 0xaaaa, 1, &old_p), 0);
	/* The remote process restarts and gets the same QPN, a new Q_Key. */
	ASSERT_EQ(m.bind(3, 0x42, 0xbbbb, 2, &new_p), 0);
	EXPECT_NE(old_p, new_p);
	auto r = m.lookup(3, 0x42, 0xbbbb);
	EXPECT_EQ(r.peer, new_p);
	EXPECT_FALSE(r.previous);
	r = m.lookup(3, 0x42, 0xaaaa); /* a late datagram of the old process */
	EXPECT_EQ(r.peer, old_p);
	EXPECT_TRUE(r.previous);
	EXPECT_EQ(m.lookup(3, 0x42).peer, new_p) << "no connid: the current one";
	EXPECT_EQ(m.lookup(3, 0x42, 0xcccc).peer, ahn_map::nil) << "an incarnation not bound yet";
	/* A third incarnation: both older ones still attributed. */
	uint32_t third;
	ASSERT_EQ(m.bind(3, 0x42, 0xcccc, 3, &third), 0);
	EXPECT_EQ(m.lookup(3, 0x42, 0xaaaa).peer, old_p);
	EXPECT_EQ(m.lookup(3, 0x42, 0xbbbb).peer, new_p);
	EXPECT_EQ(m.forget(third), EINVAL) << "current, not previous";
	EXPECT_EQ(m.forget(new_p), 0); /* forgets new_p and everything older */
	EXPECT_EQ(m.lookup(3, 0x42, 0xbbbb).peer, ahn_map::nil);
	EXPECT_EQ(m.lookup(3, 0x42, 0xaaaa).peer, ahn_map::nil);
	EXPECT_EQ(m.lookup(3, 0x42, 0xcccc).peer, third);
	EXPECT_EQ(m.live(), 1u);
	m.reclaim();
	EXPECT_EQ(m.free_records(), 15u);
}

TEST(AhnMap, FullAndRecordReuse)
{
	ahn_map m;
	ASSERT_EQ(m.init(4, SOCKET_ID_ANY, nullptr), 0);
	uint32_t p[5];
	for (uint32_t i = 0; i < 4; i++)
		ASSERT_EQ(m.bind(1, i, 1, i, &p[i]), 0);
	EXPECT_EQ(m.bind(1, 9, 1, 9, &p[4]), ENOSPC);
	ASSERT_EQ(m.unbind(p[2]), 0);
	ASSERT_EQ(m.bind(1, 9, 1, 9, &p[4]), 0) << "record reused (no readers: at once)";
	EXPECT_EQ(m.lookup(1, 9).peer, p[4]);
	EXPECT_EQ(m.lookup(1, 2).peer, ahn_map::nil);
}

/* Random binds, rebinds (QPN reuse), unbinds and forgets against a model,
 * with many QPNs per ahn so the second level fills and empties. */
TEST(AhnMap, MatchesModel)
{
	ahn_map m;
	constexpr uint32_t cap = 60000;
	ASSERT_EQ(m.init(cap, SOCKET_ID_ANY, nullptr), 0);
	using key = std::tuple<uint16_t, uint32_t>;
	struct inc {
		uint32_t peer, connid;
	};
	std::map<key, std::vector<inc>> model; /* newest last */
	std::mt19937_64 rng(42);
	uint32_t connseq = 1;
	for (int op = 0; op < (RDGRAM_TSAN ? 60000 : 300000); op++) {
		const uint16_t ahn = uint16_t(rng() % 500);
		const uint32_t qpn = uint32_t(rng() % 200);
		const key k{ahn, qpn};
		auto it = model.find(k);
		const unsigned what = unsigned(rng() % 10);
		if (what < 5) { /* bind (new incarnation if present) */
			uint32_t p;
			const uint32_t c = connseq++;
			const int rc = m.bind(ahn, qpn, c, uint64_t(ahn) << 32 | c, &p);
			if (rc == ENOSPC)
				continue;
			ASSERT_EQ(rc, 0);
			model[k].push_back({p, c});
		} else if (what < 7 && it != model.end()) { /* unbind */
			ASSERT_EQ(m.unbind(it->second.back().peer), 0);
			model.erase(it);
		} else if (what < 8 && it != model.end() && it->second.size() > 1) { /* forget older */
			auto &v = it->second;
			const size_t cut = rng() % (v.size() - 1);
			ASSERT_EQ(m.forget(v[cut].peer), 0);
			v.erase(v.begin(), v.begin() + long(cut) + 1);
		} else { /* lookups */
			if (it == model.end()) {
				ASSERT_EQ(m.lookup(ahn, qpn).peer, ahn_map::nil);
				continue;
			}
			const auto &v = it->second;
			ASSERT_EQ(m.lookup(ahn, qpn).peer, v.back().peer);
			const auto &pick = v[rng() % v.size()];
			auto r = m.lookup(ahn, qpn, pick.connid);
			ASSERT_EQ(r.peer, pick.peer);
			ASSERT_EQ(r.previous, pick.peer != v.back().peer);
			ASSERT_EQ(m.cookie(r.peer), uint64_t(ahn) << 32 | pick.connid);
		}
		if (op % 1000 == 0)
			m.reclaim();
	}
	size_t n = 0;
	for (auto &[k, v] : model)
		n += v.size();
	EXPECT_EQ(m.live(), n);
}

/* Readers attribute 10,000 stable peers while the writer churns others
 * (bind, rebind, unbind, forget) on the same ahns: every stable peer is
 * found with its own cookie, and a churned key, when found, always maps to
 * a record whose cookie names that very (ahn, qpn, connid). (TSan.) */
namespace {
struct churn_ctx {
	ahn_map *m;
	std::atomic<bool> stop{false};
	std::atomic<uint64_t> lookups{0}, wrong{0}, missing{0};
};
int reader_main(void *arg)
{
	auto *c = static_cast<churn_ctx *>(arg);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(g_rt->qsbr(), tid);
	uint64_t n = 0, wrong = 0, missing = 0;
	std::mt19937 rng(tid);
	while (!c->stop.load(std::memory_order_relaxed)) {
		uint16_t ahn[32];
		uint32_t qpn[32], conn[32];
		ahn_map::result r[32];
		for (unsigned i = 0; i < 32; i++) {
			const uint32_t s = rng() % 10000; /* stable peer s */
			ahn[i] = uint16_t(s % 1000);
			qpn[i] = 0x1000 + s / 1000;
			conn[i] = 0x50000 + s;
		}
		c->m->lookup_bulk(ahn, qpn, conn, 32, r);
		for (unsigned i = 0; i < 32; i++) {
			if (r[i].peer == ahn_map::nil)
				missing++;
			else if (c->m->cookie(r[i].peer) != (uint64_t(ahn[i]) << 32 | conn[i]))
				wrong++;
		}
		/* Churned keys: if found, must be right. */
		for (unsigned i = 0; i < 32; i++) {
			const uint16_t a = uint16_t(rng() % 1000);
			const uint32_t q = 0x9000 + rng() % 8;
			auto x = c->m->lookup(a, q);
			if (x.peer != ahn_map::nil) {
				const uint64_t ck = c->m->cookie(x.peer);
				if ((ck >> 32) != a || ((ck >> 24) & 0xff) != (q & 0xff))
					wrong++;
			}
		}
		n += 64;
		rte_rcu_qsbr_quiescent(g_rt->qsbr(), tid);
	}
	poll_thread_offline(g_rt->qsbr(), tid);
	c->lookups += n;
	c->wrong += wrong;
	c->missing += missing;
	return 0;
}
} // namespace

TEST(AhnMap, ReadersNeverMisattributeWhileWriterChurns)
{
	ahn_map m;
	churn_ctx c;
	c.m = &m;
	uint64_t churn_ops = 0;
	g_rt->ctl().call([&] { ASSERT_EQ(m.init(20000, SOCKET_ID_ANY, g_rt->qsbr()), 0); });
	g_rt->ctl().call([&] {
		for (uint32_t s = 0; s < 10000; s++) {
			uint32_t p;
			const uint16_t ahn = uint16_t(s % 1000);
			ASSERT_EQ(m.bind(ahn, 0x1000 + s / 1000, 0x50000 + s, uint64_t(ahn) << 32 | (0x50000 + s), &p), 0);
		}
	});
	const unsigned worker = rte_get_next_lcore(-1, 1, 0);
	ASSERT_LT(worker, unsigned(RTE_MAX_LCORE));
	ASSERT_EQ(launch_on_lcore(reader_main, &c, worker), 0);
	/* The control thread churns: each churned key's cookie carries its
	 * ahn and the low byte of its QPN. */
	const uint64_t end = rte_get_tsc_cycles() + rte_get_tsc_hz() * (RDGRAM_TSAN ? 3 : 1);
	std::mt19937 rng(7);
	std::vector<uint32_t> bound;
	while (rte_get_tsc_cycles() < end) {
		g_rt->ctl().call([&] {
			for (int k = 0; k < 200; k++) {
				const uint16_t a = uint16_t(rng() % 1000);
				const uint32_t q = 0x9000 + rng() % 8;
				uint32_t p;
				const uint32_t conn = 1 + rng() % 1000;
				int rc = m.bind(a, q, conn, uint64_t(a) << 32 | uint64_t(q & 0xff) << 24 | conn, &p);
				if (rc == 0)
					bound.push_back(p);
				if (bound.size() > 2000 || (rc == ENOSPC && !bound.empty())) {
					const uint32_t victim = bound[rng() % bound.size()];
					if (m.unbind(victim) != 0)
						m.forget(victim); /* it had become a previous incarnation */
					bound.erase(std::find(bound.begin(), bound.end(), victim));
				}
				m.reclaim();
				churn_ops++;
			}
		});
	}
	c.stop = true;
	wait_on_lcore(worker);
	EXPECT_GT(c.lookups.load(), 0u);
	EXPECT_EQ(c.wrong.load(), 0u);
	EXPECT_EQ(c.missing.load(), 0u) << "a stable peer went missing";
	EXPECT_GT(churn_ops, 1000u);
	g_rt->ctl().call([&] { m.fini(); });
}
