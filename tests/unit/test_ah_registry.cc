/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The AH registry over the soft driver, on the control thread: dedup by
 * normalized attributes, refcounts, LRU eviction at capacity, the device's
 * max_ah as a cap, and one retry after eviction when the device says ENOMEM.
 */
#include <gtest/gtest.h>

#include "eal_env.h"
#include "rdgram/ah_registry.h"

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

} // namespace
