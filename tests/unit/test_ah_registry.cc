/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The AH registry over the soft driver, on the control thread: dedup by
 * normalized attributes, refcounts, LRU eviction at capacity, the device's
 * max_ah as a cap, and one retry after eviction when the device says ENOMEM;
 * batch creation; the LRU order checked against a reference model under
 * random churn; an AH storm of 100,000 distinct destinations.
 */
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <list>
#include <map>
#include <random>
#include <unordered_set>
#include <vector>

#include "eal_env.h"
#include "rdgram/ah_registry.h"
#include "tsan_skip.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

/* Distinct destinations behind the one neighbour: vary the hop limit. */
ibv_ah_attr dest(soft_pair &p, uint8_t variant)
{
	ibv_ah_attr a = soft_pair::attr_to(p.addr[1]);
	a.grh.hop_limit = uint8_t(1 + variant);
	return a;
}

struct reg_fixture {
	soft_pair p;
	ah_registry *reg = nullptr;
	reg_fixture(uint32_t cap, uint32_t max_ah) : p(false, 4096, max_ah)
	{
		g_rt->ctl().call([&] { reg = new ah_registry(p.dev[0], cap); });
	}
	~reg_fixture()
	{
		g_rt->ctl().call([&] { delete reg; });
		EXPECT_EQ(p.dev[0].live_ahs(), 0u) << "registry left AHs behind";
	}
	ah_handle acquire(const ibv_ah_attr &a, int *err)
	{
		ah_handle h;
		g_rt->ctl().call([&] { h = reg->acquire(a, err); });
		return h;
	}
	int release(ah_handle h)
	{
		int rc;
		g_rt->ctl().call([&] { rc = reg->release(h); });
		return rc;
	}
};

TEST(AhKey, NormalizedAttributes)
{
	ibv_ah_attr a{}, b{};
	a.port_num = b.port_num = 1;
	a.dlid = b.dlid = 7;
	/* is_global = 0: the GRH is ignored by verbs, so by the key too. */
	a.grh.hop_limit = 9;
	b.grh.flow_label = 0x123;
	EXPECT_TRUE(ah_key::of(a) == ah_key::of(b));
	a.is_global = b.is_global = 1;
	EXPECT_FALSE(ah_key::of(a) == ah_key::of(b));
	b = a;
	EXPECT_TRUE(ah_key::of(a) == ah_key::of(b));
	b.sl = 1;
	EXPECT_FALSE(ah_key::of(a) == ah_key::of(b));
}

TEST(AhRegistry, DedupAndRefcount)
{
	reg_fixture f(16, 1024);
	ASSERT_TRUE(f.p.ok);
	int err;
	ah_handle h1 = f.acquire(dest(f.p, 0), &err);
	ASSERT_EQ(err, 0);
	ah_handle h2 = f.acquire(dest(f.p, 0), &err);
	EXPECT_EQ(h1, h2) << "same attributes, same AH";
	EXPECT_EQ(f.reg->refs(h1), 2u);
	EXPECT_EQ(f.p.dev[0].live_ahs(), 1u);
	ah_handle h3 = f.acquire(dest(f.p, 1), &err);
	EXPECT_NE(h3, h1);
	EXPECT_EQ(f.release(h1), 0);
	EXPECT_EQ(f.release(h1), 0);
	EXPECT_EQ(f.release(h1), EINVAL) << "no reference left";
	EXPECT_EQ(f.reg->unreferenced(), 1u);
	/* Cached: the next acquire reuses it without the driver. */
	ah_handle h4 = f.acquire(dest(f.p, 0), &err);
	EXPECT_EQ(h4, h1);
	EXPECT_EQ(f.reg->stats().created, 2u);
	EXPECT_EQ(f.reg->stats().reused, 2u);
	EXPECT_EQ(f.release(ah_handle{999, 1}), EINVAL) << "unknown handle";
	EXPECT_EQ(f.reg->unreferenced(), 0u);
}

TEST(AhRegistry, LruEvictionAtCapacity)
{
	reg_fixture f(4, 1024);
	ASSERT_TRUE(f.p.ok);
	int err;
	ah_handle h[4];
	for (int i = 0; i < 4; i++) {
		h[i] = f.acquire(dest(f.p, uint8_t(i)), &err);
		ASSERT_EQ(err, 0);
	}
	/* All referenced: no room. */
	EXPECT_EQ(f.acquire(dest(f.p, 9), &err), ah_null);
	EXPECT_EQ(err, ENOMEM);
	/* Release 2 then 0: 2 is least recently released, so it goes first. */
	f.release(h[2]);
	f.release(h[0]);
	ah_handle n1 = f.acquire(dest(f.p, 10), &err);
	ASSERT_EQ(err, 0);
	EXPECT_EQ(f.p.dev[0].ahs().lookup(h[2]), nullptr) << "evicted AH must be stale";
	EXPECT_NE(f.p.dev[0].ahs().lookup(h[0]), nullptr) << "more recently released one stays";
	ah_handle n2 = f.acquire(dest(f.p, 11), &err);
	ASSERT_EQ(err, 0);
	EXPECT_EQ(f.p.dev[0].ahs().lookup(h[0]), nullptr);
	EXPECT_EQ(f.reg->stats().evicted, 2u);
	EXPECT_EQ(f.reg->size(), 4u);
	EXPECT_NE(n1, n2);
}

TEST(AhRegistry, DeviceMaxAhCapsCapacity)
{
	reg_fixture f(100, 3);
	ASSERT_TRUE(f.p.ok);
	EXPECT_EQ(f.reg->capacity(), 3u);
}

TEST(AhRegistry, DeviceEnomemEvictsAndRetriesOnce)
{
	reg_fixture f(16, 1024);
	ASSERT_TRUE(f.p.ok);
	int err;
	ah_handle old = f.acquire(dest(f.p, 0), &err);
	f.release(old);
	/* The device refuses the next creation (a full hardware table). */
	g_rt->ctl().call([&] { f.p.dev[0].inject_create_error(ENOMEM); });
	ah_handle h = f.acquire(dest(f.p, 1), &err);
	EXPECT_EQ(err, 0);
	EXPECT_NE(h, ah_null);
	EXPECT_EQ(f.reg->stats().device_enomem_retries, 1u);
	EXPECT_EQ(f.p.dev[0].ahs().lookup(old), nullptr) << "the unreferenced entry made room";
	/* Nothing unreferenced: the device's ENOMEM reaches the caller. */
	g_rt->ctl().call([&] { f.p.dev[0].inject_create_error(ENOMEM); });
	EXPECT_EQ(f.acquire(dest(f.p, 2), &err), ah_null);
	EXPECT_EQ(err, ENOMEM);
	/* Other errors pass through unchanged, with no eviction. */
	ah_handle keep = f.acquire(dest(f.p, 3), &err);
	f.release(keep);
	g_rt->ctl().call([&] { f.p.dev[0].inject_create_error(EHOSTUNREACH); });
	EXPECT_EQ(f.acquire(dest(f.p, 4), &err), ah_null);
	EXPECT_EQ(err, EHOSTUNREACH);
	EXPECT_NE(f.p.dev[0].ahs().lookup(keep), nullptr);
}

TEST(AhRegistry, StormOf100kThroughACapacityOf1k)
{
	reg_fixture f(1024, 2048);
	ASSERT_TRUE(f.p.ok);
	int failures = 0;
	g_rt->ctl().call([&] {
		/* 100,000 distinct destinations (hop limit x traffic class x flow
		 * label), each used once and released: the registry stays at its
		 * capacity by evicting, and the driver's slots are recycled after
		 * their grace periods. */
		for (uint32_t i = 0; i < 100000; i++) {
			ibv_ah_attr a = soft_pair::attr_to(f.p.addr[1]);
			a.grh.flow_label = i;
			int err;
			ah_handle h = f.reg->acquire(a, &err);
			if (err != 0) {
				failures++;
				continue;
			}
			f.reg->release(h);
			f.p.dev[0].reclaim();
		}
	});
	EXPECT_EQ(failures, 0);
	EXPECT_LE(f.reg->size(), 1024u);
	EXPECT_EQ(f.reg->stats().created, 100000u);
}

/* Destination i of many behind the one neighbour: flow label i + 1. */
ibv_ah_attr flow(soft_pair &p, uint32_t i)
{
	ibv_ah_attr a = soft_pair::attr_to(p.addr[1]);
	a.grh.flow_label = i + 1;
	return a;
}

uint64_t packed(ah_handle h) { return uint64_t(h.slot) << 32 | h.gen; }

TEST(AhRegistry, BatchCreation)
{
	reg_fixture f(256, 1024);
	ASSERT_TRUE(f.p.ok);
	constexpr unsigned n = 100;
	std::vector<ibv_ah_attr> attrs(n);
	for (unsigned i = 0; i < n; i++)
		attrs[i] = flow(f.p, i);
	attrs[42].grh.sgid_index = 7; /* a bad entry fails alone */
	std::vector<ah_handle> out(n);
	std::vector<int> errs(n, -1);
	unsigned ok = 0;
	g_rt->ctl().call([&] { ok = f.reg->acquire_batch(attrs.data(), n, out.data(), errs.data()); });
	EXPECT_EQ(ok, n - 1);
	EXPECT_EQ(errs[42], EINVAL);
	EXPECT_EQ(out[42], ah_null);
	std::unordered_set<uint64_t> seen;
	for (unsigned i = 0; i < n; i++) {
		if (i == 42)
			continue;
		EXPECT_EQ(errs[i], 0);
		EXPECT_TRUE(seen.insert(packed(out[i])).second) << "duplicate handle at " << i;
		EXPECT_EQ(f.reg->refs(out[i]), 1u);
		EXPECT_NE(f.p.dev[0].ahs().lookup(out[i]), nullptr);
	}
	EXPECT_EQ(f.reg->size(), n - 1);
	EXPECT_EQ(f.reg->stats().created, n - 1);
	EXPECT_EQ(f.reg->stats().failed, 1u);
	EXPECT_EQ(f.p.dev[0].live_ahs(), n - 1);
	/* The same batch again: all hits, one more reference each. errs may
	 * be nullptr. */
	std::vector<ah_handle> again(n);
	g_rt->ctl().call([&] { ok = f.reg->acquire_batch(attrs.data(), n, again.data(), nullptr); });
	EXPECT_EQ(ok, n - 1);
	for (unsigned i = 0; i < n; i++)
		if (i != 42) {
			EXPECT_EQ(again[i], out[i]);
			EXPECT_EQ(f.reg->refs(out[i]), 2u);
		}
	EXPECT_EQ(f.p.dev[0].live_ahs(), n - 1);
	/* An empty batch does nothing. */
	g_rt->ctl().call([&] { ok = f.reg->acquire_batch(attrs.data(), 0, out.data(), errs.data()); });
	EXPECT_EQ(ok, 0u);
}

TEST(AhRegistry, BatchDedupsWithinTheBatch)
{
	reg_fixture f(16, 1024);
	ASSERT_TRUE(f.p.ok);
	/* a b a c b a, plus b with a GRH field that the key keeps but a
	 * different spelling of the same key (is_global = 2 is still 1). */
	ibv_ah_attr a = flow(f.p, 0), b = flow(f.p, 1), c = flow(f.p, 2);
	ibv_ah_attr b2 = b;
	b2.is_global = 2;
	const ibv_ah_attr attrs[] = {a, b, a, c, b, a, b2};
	ah_handle out[7];
	int errs[7];
	unsigned ok = 0;
	g_rt->ctl().call([&] { ok = f.reg->acquire_batch(attrs, 7, out, errs); });
	EXPECT_EQ(ok, 7u);
	EXPECT_EQ(out[0], out[2]);
	EXPECT_EQ(out[0], out[5]);
	EXPECT_EQ(out[1], out[4]);
	EXPECT_EQ(out[1], out[6]);
	EXPECT_NE(out[0], out[1]);
	EXPECT_NE(out[0], out[3]);
	EXPECT_NE(out[1], out[3]);
	EXPECT_EQ(f.reg->refs(out[0]), 3u);
	EXPECT_EQ(f.reg->refs(out[1]), 3u);
	EXPECT_EQ(f.reg->refs(out[3]), 1u);
	EXPECT_EQ(f.reg->size(), 3u);
	EXPECT_EQ(f.reg->stats().created, 3u);
	EXPECT_EQ(f.reg->stats().reused, 4u);
	EXPECT_EQ(f.p.dev[0].live_ahs(), 3u);
}

/*
 * The registry against a reference model (std::map of entries, std::list
 * in LRU order) under seeded random churn: acquires of hot and cold keys,
 * releases, bad releases, occasional trims. Every result is compared: the
 * error, hit (same handle) or miss (a handle no live entry has), which
 * entry an eviction took (its handle is stale in the driver), refs, size,
 * unreferenced count, stats and the driver's live AH count.
 */
void run_model(reg_fixture &f, uint32_t cap, uint32_t universe, uint32_t ops, uint32_t seed)
{
	struct m_entry {
		ah_handle h;
		uint32_t refs;
		std::list<uint32_t>::iterator pos; /* in lru when refs == 0 */
	};
	std::map<uint32_t, m_entry> live;
	std::list<uint32_t> lru; /* least recently released first */
	std::vector<std::pair<uint32_t, ah_handle>> held; /* references we took */
	std::vector<ah_handle> dead;                         /* evicted handles */
	uint64_t created = 0, reused = 0, evicted = 0, failed = 0;
	std::mt19937 rng(seed);
	soft::soft_device &dev = f.p.dev[0];
	ah_registry &reg = *f.reg;

	auto evict_front = [&] {
		const uint32_t v = lru.front();
		lru.pop_front();
		dead.push_back(live.at(v).h);
		live.erase(v);
		evicted++;
	};
	for (uint32_t op = 0; op < ops; op++) {
		const uint32_t r = rng() % 100;
		if (r < 52) {
			/* Acquire: half the time one of a few hot keys. */
			const uint32_t u = rng() % 2 == 0 ? rng() % std::max(cap / 2, 1u) : rng() % universe;
			int err = -1;
			const ah_handle h = reg.acquire(flow(f.p, u), &err);
			auto it = live.find(u);
			if (it != live.end()) {
				ASSERT_EQ(err, 0) << "op " << op;
				ASSERT_EQ(h, it->second.h) << "op " << op << ": a hit must return the entry's handle";
				if (it->second.refs++ == 0)
					lru.erase(it->second.pos);
				reused++;
				held.emplace_back(u, h);
			} else if (live.size() >= cap && lru.empty()) {
				ASSERT_EQ(err, ENOMEM) << "op " << op;
				ASSERT_EQ(h, ah_null);
				failed++;
			} else {
				ah_handle victim = ah_null;
				if (live.size() >= cap) {
					victim = live.at(lru.front()).h;
					evict_front();
				}
				ASSERT_EQ(err, 0) << "op " << op;
				for (const auto &[k, e] : live)
					ASSERT_NE(e.h, h) << "op " << op << ": a new AH must not reuse a live handle";
				if (!(victim == ah_null)) {
					ASSERT_EQ(dev.ahs().lookup(victim), nullptr)
						<< "op " << op << ": the least recently released entry must go";
					ASSERT_EQ(reg.refs(victim), 0u);
				}
				live[u] = m_entry{h, 1, {}};
				created++;
				held.emplace_back(u, h);
			}
		} else if (r < 94) {
			/* Release one of our references. */
			if (held.empty())
				continue;
			const size_t i = rng() % held.size();
			const auto [u, h] = held[i];
			held[i] = held.back();
			held.pop_back();
			ASSERT_EQ(reg.release(h), 0) << "op " << op;
			m_entry &e = live.at(u);
			if (--e.refs == 0)
				e.pos = lru.insert(lru.end(), u);
		} else if (r < 99) {
			/* Bad releases: an evicted handle, or an entry without
			 * references. Neither changes anything. */
			if (!dead.empty()) {
				/* Its slot may be live again, with a newer generation. */
				const ah_handle h = dead[rng() % dead.size()];
				ASSERT_EQ(reg.release(h), EINVAL) << "op " << op;
			}
			if (!lru.empty()) {
				ASSERT_EQ(reg.release(live.at(lru.back()).h), EINVAL) << "op " << op;
			}
		} else {
			const size_t n = lru.size();
			ASSERT_EQ(reg.trim(), n) << "op " << op;
			while (!lru.empty())
				evict_front();
		}
		ASSERT_EQ(reg.size(), live.size()) << "op " << op;
		ASSERT_EQ(reg.unreferenced(), lru.size()) << "op " << op;
		if (op % 1024 == 0 || op + 1 == ops) {
			for (const auto &[k, e] : live)
				ASSERT_EQ(reg.refs(e.h), e.refs) << "op " << op << " key " << k;
			ASSERT_EQ(dev.live_ahs(), live.size()) << "op " << op;
			ASSERT_EQ(reg.stats().created, created);
			ASSERT_EQ(reg.stats().reused, reused);
			ASSERT_EQ(reg.stats().evicted, evicted);
			ASSERT_EQ(reg.stats().failed, failed);
			/* Keep the evicted list short (it is only for bad releases). */
			if (dead.size() > 4096)
				dead.erase(dead.begin(), dead.begin() + 2048);
		}
		dev.reclaim();
	}
	/* Drop every reference: all entries end up unreferenced, in the
	 * model's order; then trim evicts them all. */
	for (const auto &[u, h] : held) {
		ASSERT_EQ(reg.release(h), 0);
		m_entry &e = live.at(u);
		if (--e.refs == 0)
			e.pos = lru.insert(lru.end(), u);
	}
	ASSERT_EQ(reg.unreferenced(), live.size());
	ASSERT_EQ(reg.trim(), live.size());
	ASSERT_EQ(reg.size(), 0u);
	ASSERT_EQ(dev.live_ahs(), 0u);
}

TEST(AhRegistry, LruMatchesReferenceModelUnderChurn)
{
	RDGRAM_SKIP_SINGLE_THREADED_UNDER_TSAN();
	{
		/* Small: a 32-bucket index, so probe clusters and back-shifts
		 * are frequent; 8x more keys than capacity. */
		reg_fixture f(16, 1024);
		ASSERT_TRUE(f.p.ok);
		g_rt->ctl().call([&] { run_model(f, 16, 128, 100000, 12345); });
	}
	{
		reg_fixture f(300, 1024);
		ASSERT_TRUE(f.p.ok);
		g_rt->ctl().call([&] { run_model(f, 300, 1200, 100000, 777); });
	}
}

TEST(AhRegistry, DeviceEnomemEvictsLeastRecentlyReleased)
{
	reg_fixture f(6, 1024);
	ASSERT_TRUE(f.p.ok);
	int err;
	ah_handle h[4];
	for (unsigned i = 0; i < 4; i++) {
		h[i] = f.acquire(flow(f.p, i), &err);
		ASSERT_EQ(err, 0);
	}
	/* Released in the order 2, 0, 3: that is the eviction order. */
	f.release(h[2]);
	f.release(h[0]);
	f.release(h[3]);
	/* The registry has room (4 of 6), but the device says ENOMEM. */
	g_rt->ctl().call([&] { f.p.dev[0].inject_create_error(ENOMEM); });
	ah_handle n1 = f.acquire(flow(f.p, 10), &err);
	ASSERT_EQ(err, 0);
	EXPECT_EQ(f.p.dev[0].ahs().lookup(h[2]), nullptr);
	EXPECT_NE(f.p.dev[0].ahs().lookup(h[0]), nullptr);
	EXPECT_NE(f.p.dev[0].ahs().lookup(h[3]), nullptr);
	EXPECT_EQ(f.reg->stats().device_enomem_retries, 1u);
	EXPECT_EQ(f.reg->stats().evicted, 1u);
	EXPECT_EQ(f.reg->size(), 4u);

	/* In a batch: a hit, a miss the device refuses once (0 goes, the retry
	 * succeeds), a plain miss. */
	g_rt->ctl().call([&] { f.p.dev[0].inject_create_error(ENOMEM); });
	const ibv_ah_attr b1[] = {flow(f.p, 10), flow(f.p, 11), flow(f.p, 12)};
	ah_handle out[3];
	int errs[3];
	unsigned ok = 0;
	g_rt->ctl().call([&] { ok = f.reg->acquire_batch(b1, 3, out, errs); });
	EXPECT_EQ(ok, 3u);
	EXPECT_EQ(out[0], n1);
	EXPECT_EQ(f.p.dev[0].ahs().lookup(h[0]), nullptr);
	EXPECT_NE(f.p.dev[0].ahs().lookup(h[3]), nullptr);
	EXPECT_EQ(f.reg->stats().device_enomem_retries, 2u);
	EXPECT_EQ(f.reg->size(), 5u); /* 1 3 10 11 12 */

	/* 3 is the only unreferenced entry. The device refuses the first
	 * miss: 3 goes, the retry succeeds; the second miss fills the
	 * registry with referenced entries (6 of 6), so the next miss is
	 * ENOMEM without calling the device. */
	g_rt->ctl().call([&] { f.p.dev[0].inject_create_error(ENOMEM); });
	const ibv_ah_attr b2[] = {flow(f.p, 13), flow(f.p, 14)};
	g_rt->ctl().call([&] { ok = f.reg->acquire_batch(b2, 2, out, errs); });
	EXPECT_EQ(ok, 2u);
	EXPECT_EQ(errs[0], 0);
	EXPECT_EQ(errs[1], 0);
	EXPECT_EQ(f.p.dev[0].ahs().lookup(h[3]), nullptr);
	EXPECT_EQ(f.reg->size(), 6u);
	EXPECT_EQ(f.reg->unreferenced(), 0u);
	EXPECT_EQ(f.acquire(flow(f.p, 15), &err), ah_null);
	EXPECT_EQ(err, ENOMEM);
	ah_handle rel = f.acquire(flow(f.p, 13), &err); /* a hit still works */
	EXPECT_EQ(err, 0);
	EXPECT_EQ(f.release(rel), 0);
	EXPECT_EQ(f.release(out[0]), 0);
	EXPECT_EQ(f.release(out[1]), 0);
	/* Trim 13 and 14: the registry has room but nothing unreferenced, so
	 * a device ENOMEM goes to the caller. */
	unsigned trimmed = 0;
	g_rt->ctl().call([&] { trimmed = f.reg->trim(); });
	EXPECT_EQ(trimmed, 2u);
	g_rt->ctl().call([&] { f.p.dev[0].inject_create_error(ENOMEM); });
	EXPECT_EQ(f.acquire(flow(f.p, 16), &err), ah_null);
	EXPECT_EQ(err, ENOMEM);
	EXPECT_EQ(f.reg->size(), 4u);
	const auto &st = f.reg->stats();
	EXPECT_EQ(st.device_enomem_retries, 3u);
	EXPECT_EQ(st.evicted, 5u);
	EXPECT_EQ(f.p.dev[0].live_ahs(), 4u);
}

TEST(AhRegistry, StormOf100kDistinctAhs)
{
	RDGRAM_SKIP_SINGLE_THREADED_UNDER_TSAN();
	constexpr uint32_t n = 100000;
	reg_fixture f(n, 131072);
	ASSERT_TRUE(f.p.ok);
	ASSERT_EQ(f.reg->capacity(), n);
	std::vector<ibv_ah_attr> attrs(n);
	for (uint32_t i = 0; i < n; i++)
		attrs[i] = flow(f.p, i); /* flow labels 1..100000, one neighbour */
	std::vector<ah_handle> out(n);
	std::vector<int> errs(n, -1);
	unsigned ok = 0;
	double secs = 0;
	g_rt->ctl().call([&] {
		const auto t0 = std::chrono::steady_clock::now();
		ok = f.reg->acquire_batch(attrs.data(), n, out.data(), errs.data());
		secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	});
	EXPECT_EQ(ok, n);
	std::unordered_set<uint64_t> seen;
	seen.reserve(n);
	for (uint32_t i = 0; i < n; i++) {
		ASSERT_EQ(errs[i], 0) << i;
		ASSERT_TRUE(seen.insert(packed(out[i])).second) << "duplicate handle at " << i;
	}
	EXPECT_EQ(f.reg->size(), n);
	EXPECT_EQ(f.p.dev[0].live_ahs(), n);
	/* Every one resolves, through the registry and in the driver. */
	for (uint32_t i = 0; i < n; i += 97) {
		ASSERT_EQ(f.reg->refs(out[i]), 1u);
		ASSERT_NE(f.p.dev[0].ahs().lookup(out[i]), nullptr);
	}
	const size_t bytes = f.reg->memory_bytes();
	printf("AH storm: %u creations in %.1f ms (%.2f M/s, informational), registry %zu bytes = %.1f per AH\n",
	       n, secs * 1e3, n / secs / 1e6, bytes, double(bytes) / n);
	EXPECT_LE(bytes / n, 100u) << "bytes per AH";
	g_rt->ctl().call([&] { f.reg->clear(); });
	EXPECT_EQ(f.reg->size(), 0u);
	EXPECT_EQ(f.reg->unreferenced(), 0u);
	EXPECT_EQ(f.p.dev[0].live_ahs(), 0u);
	EXPECT_EQ(f.reg->refs(out[0]), 0u);
	EXPECT_EQ(f.release(out[0]), EINVAL);
	/* The registry is as new after clear: the storm again. */
	g_rt->ctl().call([&] { ok = f.reg->acquire_batch(attrs.data(), n, out.data(), errs.data()); });
	EXPECT_EQ(ok, n);
	EXPECT_EQ(f.p.dev[0].live_ahs(), n);
}

TEST(AhRegistry, EvictHookSeesEveryDestroyedEntry)
{
	reg_fixture f(2, 1024);
	ASSERT_TRUE(f.p.ok);
	struct seen_t {
		std::vector<ah_key> keys;
		std::vector<ah_handle> handles;
		static void cb(void *arg, const ah_key &k, ah_handle h)
		{
			static_cast<seen_t *>(arg)->keys.push_back(k);
			static_cast<seen_t *>(arg)->handles.push_back(h);
		}
	} seen, seen2;
	g_rt->ctl().call([&] {
		EXPECT_EQ(f.reg->add_evict_hook(seen_t::cb, &seen), 0);
		EXPECT_EQ(f.reg->add_evict_hook(seen_t::cb, &seen), EEXIST);
		/* A second component on the same registry sees the same. */
		EXPECT_EQ(f.reg->add_evict_hook(seen_t::cb, &seen2), 0);
	});
	int err;
	ah_handle a = f.acquire(flow(f.p, 0), &err);
	ah_handle b = f.acquire(flow(f.p, 1), &err);
	f.release(a);
	ah_handle c = f.acquire(flow(f.p, 2), &err); /* evicts a */
	ASSERT_EQ(err, 0);
	ASSERT_EQ(seen.handles.size(), 1u);
	EXPECT_EQ(seen.handles[0], a);
	EXPECT_TRUE(seen.keys[0] == ah_key::of(flow(f.p, 0)));
	f.release(c);
	unsigned t = 0;
	g_rt->ctl().call([&] { t = f.reg->trim(); });
	EXPECT_EQ(t, 1u);
	ASSERT_EQ(seen.handles.size(), 2u);
	EXPECT_EQ(seen.handles[1], c);
	g_rt->ctl().call([&] { f.reg->clear(); });
	ASSERT_EQ(seen.handles.size(), 3u);
	EXPECT_EQ(seen.handles[2], b);
	EXPECT_EQ(seen2.handles, seen.handles);
	g_rt->ctl().call([&] {
		f.reg->remove_evict_hook(seen_t::cb, &seen);
		f.reg->remove_evict_hook(seen_t::cb, &seen2);
		EXPECT_EQ(f.reg->nb_evict_hooks(), 0u);
	});
}

TEST(AhRegistry, MemoryPerEntry)
{
	EXPECT_EQ(ah_registry::entry_bytes(), 56u);
	reg_fixture f(65536, 65536);
	ASSERT_TRUE(f.p.ok);
	/* 56 (entry) + 16 (index: 131072 x 8 B) + 4 (slot index) per AH. */
	const size_t per = f.reg->memory_bytes() / f.reg->capacity();
	EXPECT_EQ(per, 76u);
}

TEST(AhRegistry, HandleIndexGrowsForSlotsBeyondCapacity)
{
	/* Capacity 8: the handle index starts at 64 slots. Another user of
	 * the device holds its first 200 slots, so the registry's AHs get
	 * slots 200 and up. */
	reg_fixture f(8, 1024);
	ASSERT_TRUE(f.p.ok);
	const size_t before = f.reg->memory_bytes();
	std::vector<ah_handle> other(200);
	g_rt->ctl().call([&] {
		for (uint32_t i = 0; i < 200; i++) {
			int e;
			other[i] = f.p.dev[0].create_ah(flow(f.p, 1000 + i), &e);
		}
	});
	int err;
	ah_handle h[8];
	for (uint32_t i = 0; i < 8; i++) {
		h[i] = f.acquire(flow(f.p, i), &err);
		ASSERT_EQ(err, 0);
		EXPECT_GE(h[i].slot, 200u);
		EXPECT_EQ(f.reg->refs(h[i]), 1u);
	}
	EXPECT_GT(f.reg->memory_bytes(), before) << "the handle index grew";
	EXPECT_EQ(f.acquire(flow(f.p, 0), &err), h[0]);
	EXPECT_EQ(f.reg->refs(h[0]), 2u);
	for (uint32_t i = 0; i < 8; i++)
		EXPECT_EQ(f.release(h[i]), 0);
	EXPECT_EQ(f.release(h[0]), 0);
	EXPECT_EQ(f.release(h[0]), EINVAL);
	EXPECT_EQ(f.release(other[0]), EINVAL) << "not the registry's";
	EXPECT_EQ(f.reg->refs(other[5]), 0u);
	g_rt->ctl().call([&] {
		for (ah_handle o : other)
			f.p.dev[0].destroy_ah(o);
	});
}

} // namespace

/* A poll thread that stops reporting quiescence holds every destroyed
 * slot in its grace period. The device then says ENOMEM; evicting more
 * would not make room (their slots would wait too), so the registry
 * reports ENOMEM and keeps its cache instead of draining it one entry per
 * failed create. Once the thread reports, creation works again. */
TEST(AhRegistry, StalledPollThreadDoesNotDrainTheCache)
{
	reg_fixture f(4, 4);
	ASSERT_TRUE(f.p.ok);
	int err;
	for (uint32_t i = 0; i < 4; i++) {
		ah_handle h = f.acquire(flow(f.p, i), &err);
		ASSERT_EQ(err, 0);
		f.release(h);
	}
	const unsigned tid = rte_lcore_id();
	poll_thread_online(g_rt->qsbr(), tid); /* ... and never quiescent */
	/* At capacity: one eviction for room; its slot waits; the device has
	 * no free slot: ENOMEM, and only that one entry is gone. */
	EXPECT_EQ(f.acquire(flow(f.p, 10), &err), ah_null);
	EXPECT_EQ(err, ENOMEM);
	EXPECT_EQ(f.reg->stats().evicted, 1u);
	EXPECT_EQ(f.reg->size(), 3u);
	for (int k = 0; k < 5; k++) {
		EXPECT_EQ(f.acquire(flow(f.p, 11 + k), &err), ah_null);
		EXPECT_EQ(err, ENOMEM);
	}
	EXPECT_EQ(f.reg->size(), 3u) << "failed creates must not drain the cache";
	EXPECT_EQ(f.reg->stats().evicted, 1u);
	rte_rcu_qsbr_quiescent(g_rt->qsbr(), tid);
	poll_thread_offline(g_rt->qsbr(), tid);
	EXPECT_NE(f.acquire(flow(f.p, 20), &err), ah_null);
	EXPECT_EQ(err, 0);
}
