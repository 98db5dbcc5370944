/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The destination cache (ah_key -> ah_handle): writer API errnos, bulk
 * lookups and their hit mask, 100,000 keys, a random insert/erase run
 * against a reference map (tombstone reuse and rebuilds), tombstones and
 * old tables held back until a QSBR grace period, and one poll thread
 * looking up while another thread inserts and erases.
 *
 * The cache needs exactly one writer thread, not specifically the control
 * thread: these tests write from the test's main thread.
 */
#include <atomic>
#include <random>
#include <utility>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_launch.h>

#include "eal_env.h"
#include "rdgram/dest_cache.h"
#include "tsan_skip.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

/* Distinct destinations: ::ffff:10.a.b.c with the index's low 24 bits and
 * the flow label carrying the rest. */
ah_key key_of(uint32_t idx)
{
	ibv_ah_attr a{};
	a.is_global = 1;
	a.port_num = 1;
	a.grh.hop_limit = 64;
	a.grh.dgid.raw[10] = 0xff;
	a.grh.dgid.raw[11] = 0xff;
	a.grh.dgid.raw[12] = 10;
	a.grh.dgid.raw[13] = uint8_t(idx >> 16);
	a.grh.dgid.raw[14] = uint8_t(idx >> 8);
	a.grh.dgid.raw[15] = uint8_t(idx);
	a.grh.flow_label = idx >> 24;
	return ah_key::of(a);
}
/* The handle inserted for key idx carries idx, so a reader can tell. */
ah_handle handle_of(uint32_t idx, uint32_t gen = 1) { return ah_handle{idx, gen}; }

TEST(DestCache, InitErrors)
{
	dest_cache dc;
	ah_handle h;
	EXPECT_FALSE(dc.lookup(key_of(1), &h)) << "lookup before init misses";
	EXPECT_EQ(dc.insert(key_of(1), handle_of(1)), EINVAL);
	EXPECT_EQ(dc.erase(key_of(1)), ENOENT);
	EXPECT_EQ(dc.init(0, SOCKET_ID_ANY, g_rt->qsbr()), EINVAL);
	EXPECT_EQ(dc.init(dest_cache::max_capacity + 1, SOCKET_ID_ANY, g_rt->qsbr()), EINVAL);
	ASSERT_EQ(dc.init(3, SOCKET_ID_ANY, g_rt->qsbr()), 0);
	EXPECT_EQ(dc.buckets(), 8u) << "power of two >= 2x capacity";
	dc.fini();
	EXPECT_FALSE(dc.lookup(key_of(1), &h)) << "lookup after fini misses";
}

TEST(DestCache, InsertLookupErase)
{
	for (rte_rcu_qsbr *qs : {g_rt->qsbr(), static_cast<rte_rcu_qsbr *>(nullptr)}) {
		dest_cache dc;
		ASSERT_EQ(dc.init(16, SOCKET_ID_ANY, qs), 0);
		EXPECT_EQ(dc.buckets(), 32u);
		ah_handle h = ah_null;
		EXPECT_FALSE(dc.lookup(key_of(1), &h));
		EXPECT_EQ(dc.insert(key_of(1), handle_of(1)), 0);
		ASSERT_TRUE(dc.lookup(key_of(1), &h));
		EXPECT_EQ(h, handle_of(1));
		EXPECT_EQ(dc.insert(key_of(1), handle_of(1, 3)), EEXIST);
		ASSERT_TRUE(dc.lookup(key_of(1), &h));
		EXPECT_EQ(h, handle_of(1)) << "EEXIST leaves the handle alone";
		EXPECT_EQ(dc.erase(key_of(1)), 0);
		EXPECT_FALSE(dc.lookup(key_of(1), &h));
		EXPECT_EQ(dc.erase(key_of(1)), ENOENT);
		EXPECT_EQ(dc.erase(key_of(2)), ENOENT);
		EXPECT_EQ(dc.insert(key_of(1), handle_of(1, 5)), 0) << "re-insert after erase";
		ASSERT_TRUE(dc.lookup(key_of(1), &h));
		EXPECT_EQ(h, handle_of(1, 5));

		/* Fill to capacity: ENOSPC, but EEXIST wins for a present key. */
		for (uint32_t i = 2; i <= 16; i++)
			ASSERT_EQ(dc.insert(key_of(i), handle_of(i)), 0) << i;
		EXPECT_EQ(dc.size(), 16u);
		EXPECT_EQ(dc.insert(key_of(17), handle_of(17)), ENOSPC);
		EXPECT_EQ(dc.insert(key_of(5), handle_of(5)), EEXIST);
		EXPECT_EQ(dc.erase(key_of(5)), 0);
		EXPECT_EQ(dc.insert(key_of(17), handle_of(17)), 0);
		EXPECT_EQ(dc.insert(key_of(5), handle_of(5)), ENOSPC);
		for (uint32_t i = 1; i <= 17; i++) {
			bool hit = dc.lookup(key_of(i), &h);
			EXPECT_EQ(hit, i != 5) << i;
			EXPECT_EQ(h.slot, hit ? i : ah_null.slot) << i;
		}
		/* Keys differing in one normalized field only are distinct. */
		ah_key a = key_of(100), b = a;
		b.sl = 1;
		EXPECT_EQ(dc.erase(key_of(2)), 0);
		EXPECT_EQ(dc.erase(key_of(3)), 0);
		EXPECT_EQ(dc.insert(a, handle_of(100)), 0);
		EXPECT_EQ(dc.insert(b, handle_of(101)), 0);
		ASSERT_TRUE(dc.lookup(b, &h));
		EXPECT_EQ(h, handle_of(101));
		ASSERT_TRUE(dc.lookup(a, &h));
		EXPECT_EQ(h, handle_of(100));
	}
}

TEST(DestCache, TinyCapacityChurn)
{
	/* However many tombstones pile up, a tiny table keeps an empty bucket
	 * to end probes (this would loop forever otherwise). */
	for (uint32_t cap : {1u, 2u, 3u}) {
		dest_cache dc;
		ASSERT_EQ(dc.init(cap, SOCKET_ID_ANY, g_rt->qsbr()), 0);
		EXPECT_GE(dc.buckets(), 4u);
		ah_handle h;
		for (uint32_t i = 0; i < 1000; i++) {
			ASSERT_EQ(dc.insert(key_of(i), handle_of(i)), 0) << cap << " " << i;
			ASSERT_TRUE(dc.lookup(key_of(i), &h));
			EXPECT_EQ(h, handle_of(i));
			if (i % 2 == 0) {
				ASSERT_EQ(dc.erase(key_of(i)), 0);
			} else if (cap == 1 || i % 3 == 0) {
				EXPECT_EQ(dc.insert(key_of(i + 100000), handle_of(i)), cap == 1 ? ENOSPC : 0);
				ASSERT_EQ(dc.erase(key_of(i)), 0);
				dc.erase(key_of(i + 100000));
			} else {
				ASSERT_EQ(dc.erase(key_of(i)), 0);
			}
		}
		EXPECT_EQ(dc.size(), 0u);
	}
}

/* Capacity 256: a table small enough for the plain per-key loop; 8192:
 * the pipelined one. */
class DestCacheBulk : public ::testing::TestWithParam<uint32_t> {};

TEST_P(DestCacheBulk, HitsMissesAndMask)
{
	dest_cache dc;
	ASSERT_EQ(dc.init(GetParam(), SOCKET_ID_ANY, g_rt->qsbr()), 0);
	/* Keys 0..99 present when i % 3 != 0. */
	for (uint32_t i = 0; i < 100; i++) {
		if (i % 3 != 0) {
			ASSERT_EQ(dc.insert(key_of(i), handle_of(i, 7)), 0);
		}
	}
	std::vector<ah_key> keys;
	for (uint32_t i = 0; i < 64; i++)
		keys.push_back(key_of(i * 3 / 2)); /* a mix of present and absent */
	ah_handle out[64];
	uint64_t mask = ~0ull;
	for (unsigned n : {64u, 33u, 1u}) {
		unsigned hits = dc.lookup_bulk(keys.data(), n, out, &mask);
		uint64_t want = 0;
		for (unsigned i = 0; i < n; i++) {
			uint32_t idx = i * 3 / 2;
			if (idx % 3 != 0) {
				want |= 1ull << i;
				EXPECT_EQ(out[i], handle_of(idx, 7)) << i;
			} else {
				EXPECT_EQ(out[i], ah_null) << i;
			}
		}
		EXPECT_EQ(mask, want) << n;
		EXPECT_EQ(hits, unsigned(__builtin_popcountll(want)));
	}
	EXPECT_EQ(dc.lookup_bulk(keys.data(), 0, out, &mask), 0u);
	EXPECT_EQ(mask, 0u);
	/* All hits and all misses. */
	std::vector<ah_key> all;
	for (uint32_t i = 1; i < 100 && all.size() < 64; i++)
		if (i % 3 != 0)
			all.push_back(key_of(i));
	EXPECT_EQ(dc.lookup_bulk(all.data(), 64, out, &mask), 64u);
	EXPECT_EQ(mask, ~0ull);
	for (uint32_t i = 0; i < 64; i++)
		all[i] = key_of(1000 + i);
	EXPECT_EQ(dc.lookup_bulk(all.data(), 64, out, &mask), 0u);
	EXPECT_EQ(mask, 0u);
}
INSTANTIATE_TEST_SUITE_P(Sizes, DestCacheBulk, ::testing::Values(256u, 8192u));

/* Checks every key in [0, n) against want (gen 0: absent), singly and in
 * bursts of 64. Returns the number of mismatches. */
unsigned check_all(const dest_cache &dc, uint32_t n, const std::vector<uint32_t> &want)
{
	unsigned bad = 0;
	std::vector<ah_key> keys(64);
	ah_handle out[64];
	for (uint32_t base = 0; base < n; base += 64) {
		unsigned m = std::min(64u, n - base);
		for (unsigned i = 0; i < m; i++)
			keys[i] = key_of(base + i);
		uint64_t mask;
		unsigned hits = dc.lookup_bulk(keys.data(), m, out, &mask);
		unsigned count = 0;
		for (unsigned i = 0; i < m; i++) {
			uint32_t g = want[base + i];
			bool hit = (mask >> i) & 1;
			ah_handle h1;
			bool hit1 = dc.lookup(keys[i], &h1);
			bad += hit != (g != 0) || hit1 != hit;
			if (g != 0)
				bad += out[i] != handle_of(base + i, g) || h1 != out[i];
			count += hit;
		}
		bad += hits != count;
	}
	return bad;
}

TEST(DestCache, HundredThousandKeys)
{
	RDGRAM_SKIP_SINGLE_THREADED_UNDER_TSAN();
	const uint32_t N = 100000;
	dest_cache dc;
	ASSERT_EQ(dc.init(N, SOCKET_ID_ANY, g_rt->qsbr()), 0);
	EXPECT_EQ(dc.buckets(), 262144u);
	std::vector<uint32_t> want(N + 64, 0);
	for (uint32_t i = 0; i < N; i++) {
		ASSERT_EQ(dc.insert(key_of(i), handle_of(i, 1)), 0) << i;
		want[i] = 1;
	}
	EXPECT_EQ(dc.size(), N);
	EXPECT_EQ(dc.insert(key_of(N), handle_of(N)), ENOSPC);
	EXPECT_EQ(check_all(dc, N + 64, want), 0u);
	for (uint32_t i = 0; i < N; i += 2) {
		ASSERT_EQ(dc.erase(key_of(i)), 0);
		want[i] = 0;
	}
	EXPECT_EQ(dc.size(), N / 2);
	EXPECT_EQ(check_all(dc, N + 64, want), 0u);
	for (uint32_t i = 0; i < N; i += 2) {
		ASSERT_EQ(dc.insert(key_of(i), handle_of(i, 3)), 0) << i;
		want[i] = 3;
	}
	EXPECT_EQ(check_all(dc, N + 64, want), 0u);
	for (uint32_t i = 0; i < N; i++)
		ASSERT_EQ(dc.erase(key_of(i)), 0);
	EXPECT_EQ(dc.size(), 0u);
	EXPECT_EQ(check_all(dc, N, std::vector<uint32_t>(N, 0)), 0u);
}

/* Random inserts and erases over a universe 20x the capacity, checked
 * against a reference map: tombstones are reused and the table rebuilt. */
TEST(DestCache, RandomChurnAgainstModel)
{
	for (auto [qs, cap] : {std::pair{g_rt->qsbr(), 1000u}, std::pair{g_rt->qsbr(), 5000u},
			       std::pair{static_cast<rte_rcu_qsbr *>(nullptr), 1000u}}) {
		const uint32_t U = 20000;
		dest_cache dc;
		ASSERT_EQ(dc.init(cap, SOCKET_ID_ANY, qs), 0);
		std::vector<uint32_t> want(U, 0);
		uint32_t live = 0, gen = 1;
		std::mt19937 rng(7);
		unsigned bad = 0;
		for (int op = 0; op < 200000; op++) {
			uint32_t i = rng() % U;
			if (want[i] != 0) {
				bad += dc.erase(key_of(i)) != 0;
				want[i] = 0;
				live--;
			} else {
				int rc = dc.insert(key_of(i), handle_of(i, gen += 2));
				if (live < cap) {
					bad += rc != 0;
					want[i] = gen;
					live++;
				} else {
					bad += rc != ENOSPC;
				}
			}
			if (op % 20000 == 0)
				bad += check_all(dc, U, want);
		}
		EXPECT_EQ(bad, 0u);
		EXPECT_EQ(check_all(dc, U, want), 0u);
		EXPECT_EQ(dc.size(), live);
		EXPECT_GT(dc.rebuilds(), 0u) << "tombstones must have forced a rebuild";
		EXPECT_LE(dc.size() + dc.tombstones(), dc.buckets() * 3 / 4);
	}
}

/* A registered reader that stays online without reporting: the writer must
 * not reuse a tombstoned bucket nor free an old table until it reports. */
struct fake_reader {
	rte_rcu_qsbr *qs;
	unsigned tid = RTE_MAX_LCORE - 1; /* not an EAL lcore */
	explicit fake_reader(rte_rcu_qsbr *q) : qs(q)
	{
		poll_thread_online(qs, tid);
		rte_rcu_qsbr_quiescent(qs, tid);
	}
	~fake_reader() { poll_thread_offline(qs, tid); }
	void quiescent() { rte_rcu_qsbr_quiescent(qs, tid); }
};

TEST(DestCache, ReuseWaitsForGracePeriod)
{
	fake_reader r(g_rt->qsbr());
	dest_cache dc;
	ASSERT_EQ(dc.init(4, SOCKET_ID_ANY, g_rt->qsbr()), 0);
	for (uint32_t i = 0; i < 3; i++)
		ASSERT_EQ(dc.insert(key_of(i), handle_of(i)), 0);
	ASSERT_EQ(dc.erase(key_of(0)), 0);
	EXPECT_EQ(dc.waiting(), 1u);
	dc.reclaim();
	EXPECT_EQ(dc.waiting(), 1u) << "the reader has not reported";
	/* Re-inserting the key cannot take its old bucket yet. */
	ASSERT_EQ(dc.insert(key_of(0), handle_of(0, 3)), 0);
	EXPECT_EQ(dc.tombstones(), 1u);
	EXPECT_EQ(dc.waiting(), 1u);
	ah_handle h;
	ASSERT_TRUE(dc.lookup(key_of(0), &h));
	EXPECT_EQ(h, handle_of(0, 3));
	r.quiescent();
	dc.reclaim();
	EXPECT_EQ(dc.waiting(), 0u);
	EXPECT_EQ(dc.tombstones(), 1u) << "reusable now, still a tombstone";
	/* Once reusable, the next insert along the probe path takes it. */
	ASSERT_EQ(dc.erase(key_of(0)), 0);
	r.quiescent();
	dc.reclaim();
	EXPECT_EQ(dc.tombstones(), 2u);
	ASSERT_EQ(dc.insert(key_of(0), handle_of(0, 5)), 0);
	EXPECT_EQ(dc.tombstones(), 1u);
	ASSERT_TRUE(dc.lookup(key_of(0), &h));
	EXPECT_EQ(h, handle_of(0, 5));

	/* Tombstones the reader holds back force rebuilds; the old tables wait
	 * for it too (stop at two: a third rebuild would block the writer). */
	uint32_t next = 10;
	while (dc.rebuilds() < 2) {
		ASSERT_EQ(dc.insert(key_of(next), handle_of(next)), 0);
		ASSERT_EQ(dc.erase(key_of(next)), 0);
		next++;
		ASSERT_LT(next, 1000u);
	}
	EXPECT_EQ(dc.retired_tables(), 2u);
	dc.reclaim();
	EXPECT_EQ(dc.retired_tables(), 2u);
	r.quiescent();
	dc.reclaim();
	EXPECT_EQ(dc.retired_tables(), 0u);
	for (uint32_t i = 0; i < 3; i++) {
		ASSERT_TRUE(dc.lookup(key_of(i), &h)) << i;
		EXPECT_EQ(h.slot, i);
	}
	EXPECT_FALSE(dc.lookup(key_of(10), &h));
}

/* One poll thread on a worker lcore looks up a stable set (must always hit
 * with its handle) and a churned set (a hit must carry that key's index)
 * while the main thread, the cache's one writer, inserts and erases the
 * churned keys as fast as it can. */
constexpr uint32_t n_stable = 512;
constexpr uint32_t churn_base = 1u << 20;
constexpr uint32_t n_churn = 20000;

struct reader_ctx {
	const dest_cache *dc;
	std::atomic<bool> done{false};
	std::atomic<uint64_t> iterations{0}, stable_bad{0}, churn_bad{0}, churn_hits{0}, churn_misses{0};
};

int reader_main(void *arg)
{
	auto *x = static_cast<reader_ctx *>(arg);
	const unsigned tid = rte_lcore_id();
	rte_rcu_qsbr *qs = g_rt->qsbr();
	poll_thread_online(qs, tid);
	std::vector<ah_key> stable(n_stable), churn(n_churn);
	for (uint32_t i = 0; i < n_stable; i++)
		stable[i] = key_of(i);
	for (uint32_t i = 0; i < n_churn; i++)
		churn[i] = key_of(churn_base + i);
	std::mt19937 rng(11);
	uint64_t it = 0, sbad = 0, cbad = 0, chits = 0, cmiss = 0;
	const uint64_t deadline = rte_rdtsc() + 2 * rte_get_tsc_hz();
	ah_handle out[64];
	ah_key burst[64];
	uint32_t idx[64];
	while (it < 200000 && rte_rdtsc() < deadline) {
		/* Stable keys: a burst of 32, and one single lookup. */
		uint32_t s0 = uint32_t(it * 32) % n_stable;
		uint64_t mask;
		unsigned hits = x->dc->lookup_bulk(&stable[s0], 32, out, &mask);
		sbad += hits != 32 || mask != 0xffffffffull;
		for (uint32_t i = 0; i < 32; i++)
			sbad += out[i] != handle_of(s0 + i);
		uint32_t s = rng() % n_stable;
		ah_handle h;
		sbad += !x->dc->lookup(stable[s], &h) || h != handle_of(s);
		/* Churned keys: a random burst of 64. */
		for (unsigned i = 0; i < 64; i++) {
			idx[i] = rng() % n_churn;
			burst[i] = churn[idx[i]];
		}
		hits = x->dc->lookup_bulk(burst, 64, out, &mask);
		cbad += hits != unsigned(__builtin_popcountll(mask));
		for (unsigned i = 0; i < 64; i++) {
			if ((mask >> i) & 1) {
				cbad += out[i].slot != churn_base + idx[i];
				chits++;
			} else {
				cbad += out[i] != ah_null;
				cmiss++;
			}
		}
		uint32_t c = rng() % n_churn;
		if (x->dc->lookup(churn[c], &h))
			cbad += h.slot != churn_base + c;
		it++;
		rte_rcu_qsbr_quiescent(qs, tid);
	}
	poll_thread_offline(qs, tid);
	x->iterations = it;
	x->stable_bad = sbad;
	x->churn_bad = cbad;
	x->churn_hits = chits;
	x->churn_misses = cmiss;
	x->done.store(true, std::memory_order_release);
	return 0;
}

TEST(DestCache, ConcurrentReaderAndWriter)
{
	if (rte_lcore_count() < 2)
		GTEST_SKIP() << "needs two lcores (this process may use only one CPU)";
	const uint32_t cap = 4096;
	dest_cache dc;
	ASSERT_EQ(dc.init(cap, SOCKET_ID_ANY, g_rt->qsbr()), 0);
	for (uint32_t i = 0; i < n_stable; i++)
		ASSERT_EQ(dc.insert(key_of(i), handle_of(i)), 0);

	reader_ctx x;
	x.dc = &dc;
	unsigned worker = rte_get_next_lcore(rte_get_main_lcore(), 1, 0);
	ASSERT_EQ(launch_on_lcore(reader_main, &x, worker), 0);

	/* The writer: this thread. */
	std::vector<uint32_t> gen(n_churn, 0);
	uint32_t live = n_stable, g = 1;
	uint64_t ops = 0, bad = 0;
	std::mt19937 rng(13);
	const uint64_t deadline = rte_rdtsc() + 10 * rte_get_tsc_hz();
	while (!x.done.load(std::memory_order_acquire) && rte_rdtsc() < deadline) {
		uint32_t i = rng() % n_churn;
		if (gen[i] != 0) {
			bad += dc.erase(key_of(churn_base + i)) != 0;
			gen[i] = 0;
			live--;
		} else if (live < cap) {
			g += 2;
			bad += dc.insert(key_of(churn_base + i), handle_of(churn_base + i, g)) != 0;
			gen[i] = g;
			live++;
		}
		if (++ops % 1024 == 0)
			dc.reclaim();
	}
	EXPECT_EQ(wait_on_lcore(worker), 0);
	EXPECT_TRUE(x.done.load());
	dc.reclaim();

	EXPECT_EQ(bad, 0u) << "writer return codes";
	EXPECT_EQ(x.stable_bad.load(), 0u) << "stable keys must always hit with their handle";
	EXPECT_EQ(x.churn_bad.load(), 0u) << "a churned hit must carry its own key's handle";
	EXPECT_GT(x.iterations.load(), 0u);
	EXPECT_GT(x.churn_hits.load(), 0u);
	EXPECT_GT(x.churn_misses.load(), 0u);
	EXPECT_GT(dc.rebuilds(), 0u) << "the run should have rebuilt the table under the reader";
	EXPECT_EQ(dc.retired_tables(), 0u) << "reader offline: old tables freed";
	EXPECT_EQ(dc.waiting(), 0u);
	std::vector<uint32_t> want(n_stable, 1);
	EXPECT_EQ(check_all(dc, n_stable, want), 0u);
	printf("reader iterations %lu, churn hits %lu misses %lu, writer ops %lu, rebuilds %lu\n",
	       (unsigned long)x.iterations.load(), (unsigned long)x.churn_hits.load(),
	       (unsigned long)x.churn_misses.load(), (unsigned long)ops, (unsigned long)dc.rebuilds());
}

} // namespace
