/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * AH creation on the control thread, side by side in one run, over one
 * soft-driver device (net_ring port, AH table of 2^20 slots, a QSBR
 * variable with no poll thread online so destroyed slots go through the
 * driver's deferred-free queue as in the runtime):
 *
 *   create/registry/N        rdgram::ah_registry::acquire, N distinct keys
 *   create/registry_batch/N  rdgram::ah_registry::acquire_batch, one call
 *   create/legacy/N          the previous registry (two std::unordered_map
 *                            + std::list; copied below as legacy_registry)
 *   create/driver/N          soft_device::create_ah alone: the floor
 *
 * N = 100k and 1M. Each iteration creates the N AHs (timed, in thread CPU
 * time: items/s = creations/s), then clears them (timed apart: counter
 * clear_ns = ns per AH destroyed) and lets the driver reclaim its slots
 * (untimed: the control loop does that between storms). One untimed round
 * first warms every structure, so page faults of first use are not in the
 * figures; before every round the driver's free slots are put back in
 * order (order_slots), so every round of every implementation starts from
 * the same driver state.
 *
 *   churn/<impl>             at capacity (65,536 entries, all cached and
 *                            unreferenced): acquire a key not cached
 *                            (evicts the least recently released entry:
 *                            driver destroy + create), release it; the
 *                            driver's reclaim every 1024 operations.
 *
 * Keys: one neighbour (10.1.0.2), flow labels 1..N, so the soft driver's
 * neighbour lookup costs the same in every case. Before the benchmarks, a
 * memory report: bytes per AH in the registry (new: its allocations;
 * legacy: mallinfo2 deltas, malloc overhead included), the soft driver's
 * own heap per AH, and per AV slot in the soft driver (its slot size per
 * replica; the rte_malloc delta of an ah_table<soft_av> plus its free
 * list).
 *
 * --no_memory_report skips the report (e.g. to profile the benchmarks).
 * --storm_sizes=N1,N2,... adds storm/registry_batch/N for each N: the
 * create/registry_batch benchmark at the AH counts of a job's AH storm
 * (benchmarks/ah_storm.py: N ranks' N(N - 1) AHs, or one rank's N - 1).
 *
 * Run e.g. (on a shared VM do not pin it with taskset: a busy CPU made
 * every figure 2-5x worse there):
 *   build/benchmarks/bench_ah --benchmark_min_time=1 \
 *       --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true \
 *       --benchmark_report_aggregates_only=true
 */
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "rdgram/ah_registry.h"
#include "soft_device.h"

namespace {

using namespace rdgram;

/* ---- the previous registry, verbatim but for its name ------------------ */

class legacy_registry {
public:
	legacy_registry(device &dev, uint32_t capacity)
		: dev_(dev), cap_(dev.port().max_ah != 0 && dev.port().max_ah < capacity ? dev.port().max_ah
											: capacity)
	{
	}
	legacy_registry(const legacy_registry &) = delete;
	legacy_registry &operator=(const legacy_registry &) = delete;
	~legacy_registry() { clear(); }

	ah_handle acquire(const ibv_ah_attr &attr, int *err)
	{
		const ah_key k = ah_key::of(attr);
		if (auto it = by_key_.find(k); it != by_key_.end()) {
			entry &e = it->second;
			if (e.refs++ == 0)
				lru_.erase(e.lru_pos);
			st_.reused++;
			*err = 0;
			return e.h;
		}
		if (by_key_.size() >= cap_ && !evict_one()) {
			st_.failed++;
			*err = ENOMEM;
			return ah_null;
		}
		int e = 0;
		ah_handle h = dev_.create_ah(attr, &e);
		if (e == ENOMEM && evict_one()) {
			st_.device_enomem_retries++;
			h = dev_.create_ah(attr, &e);
		}
		if (e != 0) {
			st_.failed++;
			*err = e;
			return ah_null;
		}
		entry &n = by_key_[k];
		n.h = h;
		n.refs = 1;
		by_handle_[pack(h)] = k;
		st_.created++;
		*err = 0;
		return h;
	}

	int release(ah_handle h)
	{
		auto it = by_handle_.find(pack(h));
		if (it == by_handle_.end())
			return EINVAL;
		entry &e = by_key_.at(it->second);
		if (e.refs == 0)
			return EINVAL;
		if (--e.refs == 0)
			e.lru_pos = lru_.insert(lru_.end(), it->second);
		return 0;
	}

	void clear()
	{
		for (auto &[k, e] : by_key_)
			dev_.destroy_ah(e.h);
		by_key_.clear();
		by_handle_.clear();
		lru_.clear();
	}

	size_t size() const { return by_key_.size(); }
	const ah_registry_stats &stats() const { return st_; }

private:
	struct entry {
		ah_handle h{};
		uint32_t refs = 0;
		std::list<ah_key>::iterator lru_pos{};
	};
	static uint64_t pack(ah_handle h) { return uint64_t(h.slot) << 32 | h.gen; }

	bool evict_one()
	{
		if (lru_.empty())
			return false;
		const ah_key k = lru_.front();
		lru_.pop_front();
		auto it = by_key_.find(k);
		dev_.destroy_ah(it->second.h);
		by_handle_.erase(pack(it->second.h));
		by_key_.erase(it);
		st_.evicted++;
		return true;
	}

	device &dev_;
	const uint32_t cap_;
	std::unordered_map<ah_key, entry, ah_key_hash> by_key_;
	std::unordered_map<uint64_t, ah_key> by_handle_;
	std::list<ah_key> lru_;
	ah_registry_stats st_{};
};

/* ---- the device and the keys ------------------------------------------- */

constexpr uint32_t max_ah = 1u << 20;
constexpr uint32_t churn_cap = 65536;
constexpr uint32_t churn_keys = 4 * churn_cap; /* cycled: never cached when reached */

soft::soft_device *g_dev;
wire::gid g_peer;

ibv_ah_attr attr_of_index(uint32_t i)
{
	ibv_ah_attr a{};
	a.is_global = 1;
	a.port_num = 1;
	a.grh.hop_limit = 64;
	a.grh.flow_label = i + 1; /* <= 2^20 - 1 */
	memcpy(a.grh.dgid.raw, g_peer.raw, 16);
	return a;
}

const std::vector<ibv_ah_attr> &attrs(uint32_t n)
{
	static std::vector<ibv_ah_attr> v;
	while (v.size() < n)
		v.push_back(attr_of_index(uint32_t(v.size())));
	return v;
}

/* The timer of the create benchmarks: this thread's CPU time, so that time
 * the (shared, oversubscribed) machine runs something else instead is not
 * counted. */
double now_s()
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

/* ---- the four ways to create N AHs -------------------------------------- */

struct reg_impl {
	ah_registry r;
	explicit reg_impl(uint32_t n) : r(*g_dev, n) {}
	bool create(const std::vector<ibv_ah_attr> &a, uint32_t n)
	{
		bool ok = true;
		for (uint32_t i = 0; i < n; i++) {
			int e;
			r.acquire(a[i], &e);
			ok &= e == 0;
		}
		return ok;
	}
	void clear() { r.clear(); }
};

struct reg_batch_impl : reg_impl {
	std::vector<ah_handle> out;
	explicit reg_batch_impl(uint32_t n) : reg_impl(n), out(n) {}
	bool create(const std::vector<ibv_ah_attr> &a, uint32_t n)
	{
		return r.acquire_batch(a.data(), n, out.data(), nullptr) == n;
	}
};

struct legacy_impl {
	legacy_registry r;
	explicit legacy_impl(uint32_t n) : r(*g_dev, n) {}
	bool create(const std::vector<ibv_ah_attr> &a, uint32_t n)
	{
		bool ok = true;
		for (uint32_t i = 0; i < n; i++) {
			int e;
			r.acquire(a[i], &e);
			ok &= e == 0;
		}
		return ok;
	}
	void clear() { r.clear(); }
};

struct driver_impl {
	std::vector<ah_handle> hs;
	explicit driver_impl(uint32_t n) { hs.reserve(n); }
	bool create(const std::vector<ibv_ah_attr> &a, uint32_t n)
	{
		bool ok = true;
		for (uint32_t i = 0; i < n; i++) {
			int e;
			hs.push_back(g_dev->create_ah(a[i], &e));
			ok &= e == 0;
		}
		return ok;
	}
	void clear()
	{
		for (ah_handle h : hs)
			g_dev->destroy_ah(h);
		hs.clear();
	}
};

/* Puts the driver's next n free AH slots in ascending order (untimed, before
 * each round): the order slots were freed in decides where the next AVs are
 * written (sequential or scattered over the 64 MB table), and a registry
 * that destroys in hash order (legacy) would otherwise scatter the rounds
 * after it, its own and other benchmarks' alike. The driver frees slots in
 * the order they were destroyed and hands out the last freed first. */
void order_slots(uint32_t n)
{
	const auto &a = attrs(n);
	std::vector<ah_handle> hs;
	hs.reserve(n);
	for (uint32_t i = 0; i < n; i++) {
		int e;
		const ah_handle h = g_dev->create_ah(a[i], &e);
		if (e != 0)
			break;
		hs.push_back(h);
	}
	std::sort(hs.begin(), hs.end(), [](ah_handle x, ah_handle y) { return x.slot > y.slot; });
	for (ah_handle h : hs)
		g_dev->destroy_ah(h);
	g_dev->reclaim();
}

template <class Impl> void BM_create(benchmark::State &state)
{
	const uint32_t n = uint32_t(state.range(0));
	const auto &a = attrs(n);
	auto impl = std::make_unique<Impl>(n);
	/* Warm-up round: first-touch page faults are not creation cost. */
	if (!impl->create(a, n) || g_dev->live_ahs() != n) {
		state.SkipWithError("creation failed");
		impl->clear();
		return;
	}
	impl->clear();
	g_dev->reclaim();
	order_slots(n);
	double clear_s = 0;
	for (auto _ : state) {
		const double t0 = now_s();
		const bool ok = impl->create(a, n);
		const double t1 = now_s();
		impl->clear();
		const double t2 = now_s();
		g_dev->reclaim();
		order_slots(n);
		state.SetIterationTime(t1 - t0);
		clear_s += t2 - t1;
		if (!ok) {
			state.SkipWithError("creation failed");
			break;
		}
	}
	state.SetItemsProcessed(int64_t(state.iterations()) * n);
	state.counters["clear_ns"] = clear_s * 1e9 / (double(state.iterations()) * n);
	if (g_dev->live_ahs() != 0)
		state.SkipWithError("AHs left behind");
}

void create_sizes(benchmark::internal::Benchmark *b)
{
	b->Arg(100000)->Arg(1000000)->UseManualTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK_TEMPLATE(BM_create, reg_impl)->Name("create/registry")->Apply(create_sizes);
BENCHMARK_TEMPLATE(BM_create, reg_batch_impl)->Name("create/registry_batch")->Apply(create_sizes);
BENCHMARK_TEMPLATE(BM_create, legacy_impl)->Name("create/legacy")->Apply(create_sizes);
BENCHMARK_TEMPLATE(BM_create, driver_impl)->Name("create/driver")->Apply(create_sizes);

/* ---- churn at capacity -------------------------------------------------- */

template <class Reg> void BM_churn(benchmark::State &state)
{
	const auto &a = attrs(churn_keys);
	order_slots(2 * churn_cap);
	auto r = std::make_unique<Reg>(*g_dev, churn_cap);
	uint32_t next = 0;
	int e;
	/* Fill: churn_cap cached, unreferenced entries. */
	for (; next < churn_cap; next++)
		r->release(r->acquire(a[next], &e));
	if (r->size() != churn_cap) {
		state.SkipWithError("fill failed");
		return;
	}
	const uint64_t ev0 = r->stats().evicted;
	uint64_t bad = 0;
	for (auto _ : state) {
		for (unsigned i = 0; i < 1024; i++) {
			const ah_handle h = r->acquire(a[next], &e);
			bad += r->release(h) != 0;
			if (++next == churn_keys)
				next = 0;
		}
		g_dev->reclaim();
	}
	state.SetItemsProcessed(int64_t(state.iterations()) * 1024);
	if (bad != 0 || r->stats().evicted - ev0 != uint64_t(state.iterations()) * 1024)
		state.SkipWithError("every operation must evict once and succeed");
	r.reset();
	g_dev->reclaim();
}

void BM_churn_driver(benchmark::State &state)
{
	const auto &a = attrs(churn_keys);
	order_slots(2 * churn_cap);
	uint32_t next = 0;
	uint64_t bad = 0;
	for (auto _ : state) {
		for (unsigned i = 0; i < 1024; i++) {
			int e;
			const ah_handle h = g_dev->create_ah(a[next], &e);
			bad += g_dev->destroy_ah(h) != 0;
			if (++next == churn_keys)
				next = 0;
		}
		g_dev->reclaim();
	}
	state.SetItemsProcessed(int64_t(state.iterations()) * 1024);
	if (bad != 0)
		state.SkipWithError("create/destroy failed");
}

BENCHMARK_TEMPLATE(BM_churn, ah_registry)->Name("churn/registry");
BENCHMARK_TEMPLATE(BM_churn, legacy_registry)->Name("churn/legacy");
BENCHMARK(BM_churn_driver)->Name("churn/driver");

/* ---- memory ------------------------------------------------------------- */

size_t heap_bytes()
{
	const struct mallinfo2 m = mallinfo2();
	return m.uordblks + m.hblkhd; /* in use: arenas + mmapped chunks */
}

size_t rte_heap_bytes()
{
	rte_malloc_socket_stats s{};
	rte_malloc_get_socket_stats(int(rte_socket_id()), &s);
	return s.heap_allocsz_bytes;
}

void memory_report()
{
	printf("Memory (bytes per AH):\n");
	{
		/* The driver's own heap (its neighbour table keeps each AH's slot,
		 * in vectors that grow and never shrink): reach the largest size
		 * first, so that the registry deltas below are the registry's. */
		const uint32_t n = 1000000;
		const auto &a = attrs(n);
		std::vector<ah_handle> hs(n);
		const size_t h0 = heap_bytes();
		for (uint32_t i = 0; i < n; i++) {
			int e;
			hs[i] = g_dev->create_ah(a[i], &e);
		}
		const size_t h1 = heap_bytes();
		for (ah_handle h : hs)
			g_dev->destroy_ah(h);
		g_dev->reclaim();
		printf("  soft driver heap, N=%u live AHs: %.1f B/AH (outside the AV table)\n", n,
		       double(h1 - h0) / n);
	}
	for (uint32_t n : {100000u, 1000000u}) {
		const auto &a = attrs(n);
		int e;
		size_t h0 = heap_bytes();
		{
			ah_registry r(*g_dev, n);
			for (uint32_t i = 0; i < n; i++)
				r.acquire(a[i], &e);
			const size_t h1 = heap_bytes();
			printf("  registry  N=%-8u entry %zu B; memory_bytes()/N %.1f; heap delta/N %.1f\n", n,
			       ah_registry::entry_bytes(), double(r.memory_bytes()) / n, double(h1 - h0) / n);
		}
		g_dev->reclaim();
		h0 = heap_bytes();
		{
			legacy_registry r(*g_dev, n);
			for (uint32_t i = 0; i < n; i++)
				r.acquire(a[i], &e);
			const size_t h1 = heap_bytes();
			printf("  legacy    N=%-8u heap delta/N %.1f (2 hash nodes + 1 list node + buckets)\n", n,
			       double(h1 - h0) / n);
		}
		g_dev->reclaim();
	}
	/* The driver: one AV (+ generation) per slot, per replica. */
	rte_rcu_qsbr *qs = nullptr;
	{
		const size_t sz = rte_rcu_qsbr_get_memsize(1);
		qs = static_cast<rte_rcu_qsbr *>(rte_zmalloc(nullptr, sz, RTE_CACHE_LINE_SIZE));
		rte_rcu_qsbr_init(qs, 1);
	}
	const size_t r0 = rte_heap_bytes(), h0 = heap_bytes();
	{
		ah_table<soft::soft_av> t;
		if (t.init(max_ah, int(rte_socket_id()), qs) == 0) {
			const size_t r1 = rte_heap_bytes(), h1 = heap_bytes();
			printf("  soft AV: sizeof(soft_av) %zu B, slot (AV + generation) %zu B per replica; "
			       "ah_table<soft_av> of %u slots, 1 replica: rte_malloc %.1f + heap (free list) "
			       "%.1f B/slot\n",
			       sizeof(soft::soft_av), ah_table<soft::soft_av>::bytes_per_replica, max_ah,
			       double(r1 - r0) / max_ah, double(h1 - h0) / max_ah);
		}
	}
	rte_free(qs);
	fflush(stdout);
}

} // namespace

int main(int argc, char **argv)
{
	const char *eal_args[] = {"bench_ah", "--no-huge", "--no-shconf", "--no-pci", "-m", "2048", "-l", "0",
				  "--file-prefix=bench_ah", "--log-level=lib.eal:error"};
	int eal_argc = int(sizeof(eal_args) / sizeof(eal_args[0]));
	if (rte_eal_init(eal_argc, const_cast<char **>(eal_args)) < 0) {
		fprintf(stderr, "rte_eal_init failed\n");
		return 1;
	}
	rte_ring *ring = rte_ring_create("bench_ah_ring", 1024, SOCKET_ID_ANY, 0);
	const int port = ring == nullptr ? -1 : rte_eth_from_rings("net_bench_ah", &ring, 1, &ring, 1, 0);
	rte_rcu_qsbr *qs = static_cast<rte_rcu_qsbr *>(
		rte_zmalloc(nullptr, rte_rcu_qsbr_get_memsize(1), RTE_CACHE_LINE_SIZE));
	if (port < 0 || qs == nullptr || rte_rcu_qsbr_init(qs, 1) != 0) {
		fprintf(stderr, "port or QSBR set-up failed\n");
		return 1;
	}
	wire::gid self{};
	const uint8_t v4m[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	memcpy(self.raw, v4m, 12);
	memcpy(g_peer.raw, v4m, 12);
	const uint8_t ip_self[4] = {10, 1, 0, 1}, ip_peer[4] = {10, 1, 0, 2};
	memcpy(self.raw + 12, ip_self, 4);
	memcpy(g_peer.raw + 12, ip_peer, 4);

	auto dev = std::make_unique<soft::soft_device>();
	soft::soft_config c;
	c.port_id = uint16_t(port);
	c.addresses = {self};
	c.neighbours = {{g_peer, rte_ether_addr{{0x02, 0, 0, 0, 1, 2}}}};
	c.max_ah = max_ah;
	c.nb_mbufs = 1023;
	c.mtu = 1024;
	c.qsbr = qs; /* registered threads: none, so grace periods end at once */
	if (dev->open(c) != 0) {
		fprintf(stderr, "soft device: %s\n", dev->error().c_str());
		return 1;
	}
	g_dev = dev.get();

	/* --no_memory_report: benchmarks only (e.g. under perf). */
	bool report = true;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--no_memory_report") == 0) {
			report = false;
			for (int j = i; j < argc; j++)
				argv[j] = argv[j + 1];
			argc--;
			break;
		}
	for (int i = 1; i < argc; i++)
		if (strncmp(argv[i], "--storm_sizes=", 14) == 0) {
			for (const char *p = argv[i] + 14; *p != '\0';) {
				char *end;
				const unsigned long n = strtoul(p, &end, 10);
				if (end == p || n == 0 || n > max_ah / 2 || (*end != ',' && *end != '\0')) {
					fprintf(stderr, "bench_ah: --storm_sizes: '%s' is not a list of AH counts 1..%u\n",
						argv[i] + 14, max_ah / 2);
					return 1;
				}
				benchmark::RegisterBenchmark("storm/registry_batch", BM_create<reg_batch_impl>)
					->Arg(int64_t(n))
					->UseManualTime()
					->Unit(benchmark::kMicrosecond);
				p = *end == ',' ? end + 1 : end;
			}
			for (int j = i; j < argc; j++)
				argv[j] = argv[j + 1];
			argc--;
			break;
		}
	if (report)
		memory_report();
	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();

	dev.reset();
	rte_eth_dev_close(uint16_t(port));
	rte_ring_free(ring);
	rte_free(qs);
	rte_eal_cleanup();
	return 0;
}
