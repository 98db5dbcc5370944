/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The destination cache (ah_key -> ah_handle): writer API errnos, bulk
 * lookups and their hit mask, 100,000 keys, a random insert/erase run
 * against a reference map (tombstone reuse and rebuilds), the bulk
 * lookup's neighbourhood hints case by case, tombstones and
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

/* Capacity 256 (512 buckets, 32 KiB: L1/L2-resident) and 8192 (1 MiB). */
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

/* Checks keys key_of(idx[i]) against want (0: absent) with lookup_bulk in
 * bursts of 1..64 from every offset and with lookup; mismatches. */
unsigned check_set(const dest_cache &dc, const std::vector<uint32_t> &idx,
		   const std::unordered_map<uint32_t, uint32_t> &want)
{
	unsigned bad = 0;
	const size_t n = idx.size();
	for (unsigned burst : {1u, 7u, 32u, 64u})
		for (size_t start = 0; start < n; start++) {
			const unsigned m = unsigned(std::min<size_t>(burst, n));
			std::vector<ah_key> keys(m);
			for (unsigned i = 0; i < m; i++)
				keys[i] = key_of(idx[(start + i) % n]);
			ah_handle out[64];
			uint64_t mask;
			const unsigned hits = dc.lookup_bulk(keys.data(), m, out, &mask);
			unsigned count = 0;
			for (unsigned i = 0; i < m; i++) {
				const uint32_t k = idx[(start + i) % n];
				const auto it = want.find(k);
				const uint32_t g = it == want.end() ? 0 : it->second;
				const bool hit = (mask >> i) & 1;
				ah_handle h1;
				const bool hit1 = dc.lookup(keys[i], &h1);
				bad += hit != (g != 0) || hit1 != hit;
				bad += hit ? out[i] != handle_of(k, g) || h1 != out[i] : out[i] != ah_null;
				count += hit;
			}
			bad += hits != count;
		}
	return bad;
}

/* Which of keys key_of(idx[i]) (at most 64) one lookup_bulk sent to the
 * plain probe loop. */
std::vector<uint32_t> probed_of(const dest_cache &dc, const std::vector<uint32_t> &idx)
{
	std::vector<ah_key> keys;
	for (uint32_t k : idx)
		keys.push_back(key_of(k));
	ah_handle out[64];
	uint64_t mask, probed = 0;
	dc.lookup_bulk(keys.data(), unsigned(keys.size()), out, &mask, &probed);
	std::vector<uint32_t> r;
	for (size_t i = 0; i < idx.size(); i++)
		if ((probed >> i) & 1)
			r.push_back(idx[i]);
	return r;
}

/* The pipelined lookup's neighbourhood hints (tables >= 4096 buckets),
 * case by case, on keys chosen by home bucket and fingerprint: keys placed
 * 16 or more buckets from home (beyond the hints), a displaced key whose
 * neighbour has its fingerprint, a missing key with a neighbour's
 * fingerprint, hinted buckets erased and reused by keys of other homes,
 * and the hints rebuilt with the table. Besides the results, it checks
 * which keys needed the plain probe: a hint that is lost, stale or points
 * to the wrong neighbour gives the right answer through the probe, only
 * slower. */
TEST(DestCache, NeighbourhoodHints)
{
	RDGRAM_SKIP_SINGLE_THREADED_UNDER_TSAN();
	const uint32_t cap = 8192, nb = 16384, H = 1000, H2 = 9000;
	dest_cache dc;
	ASSERT_EQ(dc.init(cap, SOCKET_ID_ANY, nullptr), 0); /* buckets reused at once */
	ASSERT_EQ(dc.buckets(), nb);
	auto fp = [](uint32_t i) { return dest_cache::fingerprint(dest_cache::hash(key_of(i))); };
	/* Key indices by home: 24 at H with distinct fingerprints, 4 at H + 1,
	 * 400 at H2 (so that three share a fingerprint). */
	std::vector<uint32_t> at_h, at_h1, at_h2;
	std::vector<bool> fp_used(256);
	for (uint32_t i = 0; at_h.size() < 24 || at_h1.size() < 4 || at_h2.size() < 400; i++) {
		const uint32_t home = dest_cache::home_of(dest_cache::hash(key_of(i)), nb);
		if (home == H && at_h.size() < 24 && !fp_used[fp(i)]) {
			fp_used[fp(i)] = true;
			at_h.push_back(i);
		}
		else if (home == H + 1 && at_h1.size() < 4)
			at_h1.push_back(i);
		else if (home == H2 && at_h2.size() < 400)
			at_h2.push_back(i);
	}
	std::vector<uint32_t> triple;
	for (size_t a = 0; a < at_h2.size() && triple.size() < 3; a++) {
		triple = {at_h2[a]};
		for (size_t b = a + 1; b < at_h2.size() && triple.size() < 3; b++)
			if (fp(at_h2[b]) == fp(at_h2[a]))
				triple.push_back(at_h2[b]);
	}
	ASSERT_EQ(triple.size(), 3u) << "no three keys at H2 share a fingerprint";
	uint32_t filler = 0; /* a key at H2 with another fingerprint */
	for (uint32_t k : at_h2)
		if (fp(k) != fp(triple[0])) {
			filler = k;
			break;
		}

	std::unordered_map<uint32_t, uint32_t> want;
	std::vector<uint32_t> all(at_h);
	all.insert(all.end(), at_h1.begin(), at_h1.end());
	all.insert(all.end(), triple.begin(), triple.end());
	all.push_back(filler);
	uint32_t gen = 1;
	auto add = [&](uint32_t k) {
		gen += 2;
		want[k] = gen;
		return dc.insert(key_of(k), handle_of(k, gen));
	};
	auto del = [&](uint32_t k) {
		want.erase(k);
		return dc.erase(key_of(k));
	};

	/* 12 keys homed at H in H .. H + 11. */
	for (unsigned j = 0; j < 12; j++)
		ASSERT_EQ(add(at_h[j]), 0);
	EXPECT_EQ(check_set(dc, all, want), 0u) << "displaced keys, and misses at H";
	EXPECT_EQ(probed_of(dc, at_h), std::vector<uint32_t>{}) << "every key of H found by its hint";

	/* At H2: the filler at home, then two keys with one fingerprint at
	 * H2 + 1 and H2 + 2. The second's first hint is the first; the third
	 * key of the triple, absent, matches both hints. */
	ASSERT_EQ(add(filler), 0);
	ASSERT_EQ(add(triple[0]), 0);
	ASSERT_EQ(add(triple[1]), 0);
	EXPECT_EQ(check_set(dc, all, want), 0u) << "a neighbour with the same fingerprint";
	EXPECT_EQ(probed_of(dc, {filler, triple[0], triple[1], triple[2]}),
		  (std::vector<uint32_t>{triple[1], triple[2]}));

	/* The bucket at H + 1 erased and reused by a key homed at H + 1, then
	 * H + 5 erased and reused by a key homed at H (hint 5 rewritten). No
	 * key of H lies beyond the hints yet, so a wrong hint is a miss here,
	 * not a detour through the plain probe. */
	ASSERT_EQ(del(at_h[1]), 0);
	EXPECT_EQ(check_set(dc, all, want), 0u);
	ASSERT_EQ(add(at_h1[0]), 0);
	EXPECT_EQ(check_set(dc, all, want), 0u) << "a hinted bucket reused by another home";
	ASSERT_EQ(del(at_h[5]), 0);
	ASSERT_EQ(add(at_h[1]), 0);
	EXPECT_EQ(check_set(dc, all, want), 0u) << "a hint rewritten for another key";
	EXPECT_EQ(probed_of(dc, at_h), std::vector<uint32_t>{}) << "erased keys' hints cleared";
	EXPECT_EQ(probed_of(dc, {at_h1[0]}), std::vector<uint32_t>{});

	/* 8 more in H + 12 .. H + 19: the last four beyond the hints. */
	for (unsigned j = 12; j < 20; j++)
		ASSERT_EQ(add(at_h[j]), 0);
	EXPECT_EQ(check_set(dc, all, want), 0u) << "keys 16+ buckets from home";
	{
		/* Present keys within the hints are found by them; those beyond
		 * and the missing keys of H (it now has keys beyond) are probed. */
		std::vector<uint32_t> probed = probed_of(dc, at_h), expect;
		for (unsigned j = 0; j < 24; j++)
			if (!want.count(at_h[j]) || j >= 16)
				expect.push_back(at_h[j]);
		EXPECT_EQ(probed, expect);
	}

	/* Keys beyond the hints erased (the overflow mark stays) and put back
	 * into the free buckets. */
	for (unsigned j = 16; j < 20; j++)
		ASSERT_EQ(del(at_h[j]), 0);
	EXPECT_EQ(check_set(dc, all, want), 0u);
	ASSERT_EQ(add(at_h[20]), 0);
	ASSERT_EQ(add(at_h[5]), 0);
	EXPECT_EQ(check_set(dc, all, want), 0u);

	/* Churn other keys until the table is rebuilt: the hints are built
	 * again from the live keys. */
	const uint64_t rebuilds = dc.rebuilds();
	for (uint32_t i = 2000000; dc.rebuilds() == rebuilds && i < 2200000; i++) {
		ASSERT_EQ(dc.insert(key_of(i), handle_of(i)), 0);
		ASSERT_EQ(dc.erase(key_of(i)), 0);
	}
	ASSERT_GT(dc.rebuilds(), rebuilds);
	EXPECT_EQ(check_set(dc, all, want), 0u) << "after a rebuild";
	for (unsigned j = 16; j < 24; j++) {
		if (!want.count(at_h[j])) {
			ASSERT_EQ(add(at_h[j]), 0);
		}
	}
	EXPECT_EQ(check_set(dc, all, want), 0u);
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
