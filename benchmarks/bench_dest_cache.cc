// Destination resolution (ah_key -> ah_handle) in bursts of 32, side by side:
//   dest_cache_bulk   rdgram::dest_cache::lookup_bulk (hash all, prefetch all
//                     home buckets, check them; displaced keys take their
//                     bucket from the home line's neighbourhood hints and
//                     cost one more line each; key inline in the bucket)
//   dest_cache_single rdgram::dest_cache::lookup, 32 calls (no pipelining)
//   rte_hash          rte_hash_lookup_bulk_data, key_len 32, rte_hash_crc,
//                     data = the handle; no extra flags (its fastest mode,
//                     NOT safe against a concurrent writer)
//   rte_hash_lf       the same with RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF
//                     (the mode that allows lock-free readers + one writer,
//                     i.e. what dest_cache provides)
//   unordered_map     std::unordered_map<ah_key, ah_handle, ah_key_hash>
//   paired_dest_cache_vs_rte_hash  the first and third in alternating timed
//                     blocks of one loop (see BM_paired): the ratio to quote
//                     on a noisy machine
// at 1k, 100k and 1M destinations: random keys, looked up in random order
// over the set (a pre-shuffled query stream, read sequentially, the same for
// every implementation). rte_hash gets 2x entries, as dest_cache gets 2x
// buckets. items_per_second = lookups/s.
//
// Deps: libdpdk (rte_eal, rte_hash), benchmark.
// Run e.g.:  ./bench_dest_cache --benchmark_min_time=0.3
// On a shared or virtual machine, compare medians of interleaved runs:
//   --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true
//   --benchmark_report_aggregates_only=true
// EAL: --no-huge -m 2048 (1M entries need ~130 MB for dest_cache and ~110 MB
// per rte_hash); 4 KiB pages, so at 1M every structure also pays TLB misses.
#include "rdgram/dest_cache.h"

#include <benchmark/benchmark.h>
#include <cstdlib>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

using rdgram::ah_handle;
using rdgram::ah_key;
using rdgram::ah_key_hash;

constexpr unsigned kBurst = 32;

struct dataset {
    std::vector<ah_key> keys;       // n distinct destinations; key i -> handle {i, 1}
    std::vector<ah_key> queries;    // random order over keys, a multiple of kBurst
    std::vector<uint32_t> qidx;     // index of each query's key
};

ah_key random_key(std::mt19937_64 &rng) {
    ah_key k;
    memset(&k, 0, sizeof(k));
    uint64_t a = rng(), b = rng(), c = rng();
    memcpy(k.dgid, &a, 8);
    memcpy(k.dgid + 8, &b, 8);
    k.flow_label = uint32_t(c) & 0xfffff;
    k.hop_limit = 64;
    k.traffic_class = uint8_t(c >> 20);
    k.sl = uint8_t(c >> 28) & 7;
    k.is_global = 1;
    k.port_num = 1;
    return k;
}

const dataset &get_data(uint32_t n) {
    static std::map<uint32_t, std::unique_ptr<dataset>> cache;
    auto &slot = cache[n];
    if (slot) return *slot;
    slot = std::make_unique<dataset>();
    dataset &d = *slot;
    std::mt19937_64 rng(n);
    std::unordered_set<ah_key, ah_key_hash> seen;
    while (d.keys.size() < n) {
        ah_key k = random_key(rng);
        if (seen.insert(k).second) d.keys.push_back(k);
    }
    const size_t q = (std::max<size_t>(n, 32768) + kBurst - 1) / kBurst * kBurst;
    std::vector<uint32_t> perm(n);
    for (uint32_t i = 0; i < n; i++) perm[i] = i;
    while (d.qidx.size() < q) {
        std::shuffle(perm.begin(), perm.end(), rng);
        for (uint32_t i = 0; i < n && d.qidx.size() < q; i++) d.qidx.push_back(perm[i]);
    }
    d.queries.reserve(q);
    for (uint32_t i : d.qidx) d.queries.push_back(d.keys[i]);
    return d;
}

uint64_t pack(ah_handle h) { return uint64_t(h.slot) << 32 | h.gen; }
ah_handle unpack(uint64_t v) { return ah_handle{uint32_t(v >> 32), uint32_t(v)}; }

struct DestCacheBulk {
    rdgram::dest_cache dc;
    bool build(const dataset &d) {
        if (dc.init(uint32_t(d.keys.size()), int(rte_socket_id()), nullptr) != 0) return false;
        for (uint32_t i = 0; i < d.keys.size(); i++)
            if (dc.insert(d.keys[i], ah_handle{i, 1}) != 0) return false;
        return true;
    }
    unsigned burst(const ah_key *q, ah_handle *out) const {
        uint64_t mask;
        return dc.lookup_bulk(q, kBurst, out, &mask);
    }
};

struct DestCacheSingle : DestCacheBulk {
    unsigned burst(const ah_key *q, ah_handle *out) const {
        unsigned hits = 0;
        for (unsigned i = 0; i < kBurst; i++) hits += dc.lookup(q[i], &out[i]);
        return hits;
    }
};

template <uint8_t Flags>
struct RteHashT {
    rte_hash *h = nullptr;
    ~RteHashT() { rte_hash_free(h); }
    bool build(const dataset &d) {
        static unsigned seq;
        char name[RTE_HASH_NAMESIZE];
        snprintf(name, sizeof(name), "bench_h%u_%u", unsigned(Flags), seq++);
        rte_hash_parameters p{};
        p.name = name;
        p.entries = std::max<uint32_t>(uint32_t(d.keys.size()) * 2, 64);
        p.key_len = sizeof(ah_key);
        p.hash_func = rte_hash_crc;
        p.hash_func_init_val = 0;
        p.socket_id = int(rte_socket_id());
        p.extra_flag = Flags;
        h = rte_hash_create(&p);
        if (h == nullptr) return false;
        for (uint32_t i = 0; i < d.keys.size(); i++)
            if (rte_hash_add_key_data(h, &d.keys[i], reinterpret_cast<void *>(pack(ah_handle{i, 1}))) != 0)
                return false;
        return true;
    }
    unsigned burst(const ah_key *q, ah_handle *out) const {
        const void *keys[kBurst];
        void *data[kBurst];
        uint64_t mask;
        for (unsigned i = 0; i < kBurst; i++) keys[i] = &q[i];
        int hits = rte_hash_lookup_bulk_data(h, keys, kBurst, &mask, data);
        for (unsigned i = 0; i < kBurst; i++)
            out[i] = (mask >> i) & 1 ? unpack(reinterpret_cast<uintptr_t>(data[i])) : rdgram::ah_null;
        return unsigned(hits);
    }
};
using RteHash = RteHashT<0>;
using RteHashLf = RteHashT<RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF>;

struct StdMap {
    std::unordered_map<ah_key, ah_handle, ah_key_hash> m;
    bool build(const dataset &d) {
        m.reserve(d.keys.size());
        for (uint32_t i = 0; i < d.keys.size(); i++) m.emplace(d.keys[i], ah_handle{i, 1});
        return true;
    }
    unsigned burst(const ah_key *q, ah_handle *out) const {
        unsigned hits = 0;
        for (unsigned i = 0; i < kBurst; i++) {
            auto it = m.find(q[i]);
            if (it != m.end()) {
                out[i] = it->second;
                hits++;
            } else {
                out[i] = rdgram::ah_null;
            }
        }
        return hits;
    }
};

// Frees what lives in DPDK memory before rte_eal_cleanup.
std::vector<std::function<void()>> &teardowns() {
    static std::vector<std::function<void()>> v;
    return v;
}

// Built once per (implementation, size), checked, kept for later runs.
template <class Impl>
const Impl *get_impl(uint32_t n, const dataset &d) {
    static std::map<uint32_t, std::unique_ptr<Impl>> cache;
    static bool registered = [] {
        teardowns().push_back([] { cache.clear(); });
        return true;
    }();
    (void)registered;
    auto it = cache.find(n);
    if (it != cache.end()) return it->second.get();
    auto impl = std::make_unique<Impl>();
    if (!impl->build(d)) return nullptr;
    // Every query must resolve to its own key's handle.
    ah_handle out[kBurst];
    for (size_t pos = 0; pos < d.queries.size(); pos += kBurst) {
        if (impl->burst(&d.queries[pos], out) != kBurst) return nullptr;
        for (unsigned i = 0; i < kBurst; i++)
            if (!(out[i] == ah_handle{d.qidx[pos + i], 1})) return nullptr;
    }
    return (cache[n] = std::move(impl)).get();
}

template <class Impl>
void BM_resolve(benchmark::State &state) {
    const uint32_t n = uint32_t(state.range(0));
    const dataset &d = get_data(n);
    const Impl *impl = get_impl<Impl>(n, d);
    if (impl == nullptr) {
        state.SkipWithError("build or verification failed");
        return;
    }
    const size_t q = d.queries.size();
    size_t pos = 0;
    uint64_t hits = 0, sink = 0;
    ah_handle out[kBurst];
    for (auto _ : state) {
        hits += impl->burst(&d.queries[pos], out);
        sink += out[0].slot ^ out[kBurst - 1].gen;
        benchmark::ClobberMemory();
        pos += kBurst;
        if (pos == q) pos = 0;
    }
    benchmark::DoNotOptimize(sink);
    if (hits != uint64_t(state.iterations()) * kBurst) state.SkipWithError("a lookup missed");
    state.SetItemsProcessed(int64_t(state.iterations()) * kBurst);
}

void sizes(benchmark::internal::Benchmark *b) {
    for (int n : {1000, 100000, 1000000}) b->Arg(n);
}

// Paired: dest_cache_bulk and rte_hash in one loop, alternating timed blocks
// of 2048 bursts (~2 ms; long enough that the switch from one table to the
// other, whose pages the TLB then has to relearn, is a few per cent of a
// block) over the same query stream (each block starts where the
// other left off in it), so that the host's contention, which on a shared
// VM drifts by 2x within seconds, hits both alike. Reports both rates
// (totals) and ratio = the median over pairs of (dest_cache rate / rte_hash
// rate in the adjacent block). items_per_second counts both.
void BM_paired(benchmark::State &state) {
    const uint32_t n = uint32_t(state.range(0));
    const dataset &d = get_data(n);
    const DestCacheBulk *a = get_impl<DestCacheBulk>(n, d);
    const RteHash *b = get_impl<RteHash>(n, d);
    if (a == nullptr || b == nullptr) {
        state.SkipWithError("build or verification failed");
        return;
    }
    constexpr unsigned kBlock = 2048;
    const size_t q = d.queries.size();
    size_t pos = 0;
    uint64_t hits = 0, sink = 0, ta = 0, tb = 0, blocks = 0;
    std::vector<double> ratios;
    ah_handle out[kBurst];
    auto block = [&](auto *impl) {
        const uint64_t t0 = rte_rdtsc_precise();
        for (unsigned k = 0; k < kBlock; k++) {
            hits += impl->burst(&d.queries[pos], out);
            sink += out[0].slot ^ out[kBurst - 1].gen;
            benchmark::ClobberMemory();
            pos += kBurst;
            if (pos == q) pos = 0;
        }
        return rte_rdtsc_precise() - t0;
    };
    for (auto _ : state) {
        const uint64_t ca = block(a), cb = block(b);
        ta += ca;
        tb += cb;
        blocks++;
        ratios.push_back(double(cb) / double(ca));
    }
    benchmark::DoNotOptimize(sink);
    if (hits != blocks * 2 * kBlock * kBurst) state.SkipWithError("a lookup missed");
    std::sort(ratios.begin(), ratios.end());
    const double hz = double(rte_get_tsc_hz()), lookups = double(blocks) * kBlock * kBurst;
    state.counters["dest_cache_Mps"] = lookups / (double(ta) / hz) / 1e6;
    state.counters["rte_hash_Mps"] = lookups / (double(tb) / hz) / 1e6;
    state.counters["ratio"] = ratios.empty() ? 0 : ratios[ratios.size() / 2];
    state.SetItemsProcessed(int64_t(2 * lookups));
}

BENCHMARK(BM_paired)->Name("paired_dest_cache_vs_rte_hash")->Apply(sizes);
BENCHMARK_TEMPLATE(BM_resolve, DestCacheBulk)->Name("dest_cache_bulk")->Apply(sizes);
BENCHMARK_TEMPLATE(BM_resolve, DestCacheSingle)->Name("dest_cache_single")->Apply(sizes);
BENCHMARK_TEMPLATE(BM_resolve, RteHash)->Name("rte_hash")->Apply(sizes);
BENCHMARK_TEMPLATE(BM_resolve, RteHashLf)->Name("rte_hash_lf")->Apply(sizes);
BENCHMARK_TEMPLATE(BM_resolve, StdMap)->Name("unordered_map")->Apply(sizes);

}  // namespace

int main(int argc, char **argv) {
    // RDGRAM_BENCH_HUGE=1: 2 MiB hugepages for both tables (reserve them
    // first); default: 4 KiB pages (--no-huge), as in a container.
    const bool huge = getenv("RDGRAM_BENCH_HUGE") != nullptr;
    const char *eal_args[] = {"bench", huge ? "--in-memory" : "--no-huge", "--no-shconf", "--no-pci", "-m", "2048",
                              "-l", "0", "--file-prefix=bench_dest_cache", "--log-level=lib.eal:error"};
    int eal_argc = static_cast<int>(sizeof(eal_args) / sizeof(eal_args[0]));
    if (rte_eal_init(eal_argc, const_cast<char **>(eal_args)) < 0) {
        std::fprintf(stderr, "rte_eal_init failed\n");
        return 1;
    }
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    for (auto &f : teardowns()) f();
    rte_eal_cleanup();
    return 0;
}
