// Receive attribution with EFA semantics: (ahn, source QPN, connection id)
// -> peer, in bursts of 32, side by side on the same input stream:
//   ahn_map_bulk     rdgram::ahn_map::lookup_bulk (first level indexed by
//                    ahn: one 8-byte word per ahn, prefetched for the whole
//                    burst; other QPNs of an ahn in a one-word-per-bucket
//                    open-addressing table; connection id checked in the
//                    peer record)
//   ahn_map_single   rdgram::ahn_map::lookup, 32 calls
//   rte_hash         libfabric's approach (efa_av: a hash keyed by
//                    (ahn, qpn), then the peer's connection id compared):
//                    rte_hash_lookup_bulk_data, key = ahn << 24 | qpn
//                    (8 bytes), rte_hash_crc, data = peer index; no extra
//                    flags (its fastest mode, NOT safe with a concurrent
//                    writer)
//   rte_hash_lf      the same with RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF
//                    (lock-free readers + one writer: the guarantee
//                    ahn_map gives)
//   unordered_map    std::unordered_map<uint64_t, uint32_t> on the same key
// Every implementation ends at the same peer record (connection id 16
// bytes per peer, checked like ahn_map checks it).
//
// Peers: 1k and 60k, in two layouts: one QPN per ahn (one process per
// remote host, the usual EFA/HPC layout: ahn_map's first level only) and
// four QPNs per ahn (four processes per host: three of four go to the
// second level). ahns are distinct random 16-bit values below 0xFFFF, QPNs
// random 24-bit, connection ids random non-zero. The query stream is the
// peers in random order (pre-shuffled, read sequentially, identical for
// every implementation). items_per_second = attributions/s on one core.
//
// Deps: libdpdk (rte_eal, rte_hash), benchmark.
// Run e.g.:  ./bench_ahn --benchmark_min_time=0.3
// On a shared or virtual machine, compare medians of interleaved runs:
//   --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true
//   --benchmark_report_aggregates_only=true
#include "rdgram/ahn_map.h"

#include <benchmark/benchmark.h>
#include <cstdlib>

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

using rdgram::ahn_map;

constexpr unsigned kBurst = 32;
constexpr uint32_t kNil = ahn_map::nil;

struct peer {
    uint16_t ahn;
    uint32_t qpn;
    uint32_t connid;
};

struct dataset {
    std::vector<peer> peers;      // peer i
    std::vector<uint16_t> q_ahn;  // the query stream, a multiple of kBurst
    std::vector<uint32_t> q_qpn, q_connid, q_peer;
};

uint64_t key_of(uint16_t ahn, uint32_t qpn) { return uint64_t(ahn) << 24 | (qpn & 0xffffff); }

const dataset &get_data(uint32_t n, uint32_t per_ahn) {
    static std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<dataset>> cache;
    auto &slot = cache[{n, per_ahn}];
    if (slot) return *slot;
    slot = std::make_unique<dataset>();
    dataset &d = *slot;
    std::mt19937_64 rng(n * 31 + per_ahn);
    std::vector<uint16_t> ahns(0xffff);
    for (uint32_t i = 0; i < 0xffff; i++) ahns[i] = uint16_t(i);
    std::shuffle(ahns.begin(), ahns.end(), rng);
    const uint32_t hosts = (n + per_ahn - 1) / per_ahn;
    for (uint32_t h = 0; h < hosts && d.peers.size() < n; h++) {
        std::unordered_set<uint32_t> qpns;
        for (uint32_t j = 0; j < per_ahn && d.peers.size() < n; j++) {
            uint32_t q;
            do q = uint32_t(rng()) & 0xffffff;
            while (!qpns.insert(q).second);
            d.peers.push_back(peer{ahns[h], q, uint32_t(rng() % 0xfffffffeu) + 1});
        }
    }
    const size_t total = (std::max<size_t>(n, 32768) + kBurst - 1) / kBurst * kBurst;
    std::vector<uint32_t> perm(n);
    for (uint32_t i = 0; i < n; i++) perm[i] = i;
    while (d.q_peer.size() < total) {
        std::shuffle(perm.begin(), perm.end(), rng);
        for (uint32_t i = 0; i < n && d.q_peer.size() < total; i++) d.q_peer.push_back(perm[i]);
    }
    for (uint32_t p : d.q_peer) {
        d.q_ahn.push_back(d.peers[p].ahn);
        d.q_qpn.push_back(d.peers[p].qpn);
        d.q_connid.push_back(d.peers[p].connid);
    }
    return d;
}

// The peer records the hash variants end at: what libfabric's efa_conn
// holds for the check (the connection id), 16 bytes per peer like
// ahn_map's record.
struct peer_table {
    struct rec {
        uint32_t connid;
        uint32_t prev;
        uint64_t cookie;
    };
    std::vector<rec> recs;
    void build(const dataset &d) {
        recs.resize(d.peers.size());
        for (uint32_t i = 0; i < d.peers.size(); i++) recs[i] = rec{d.peers[i].connid, kNil, i};
    }
    uint32_t check(uint32_t p, uint32_t connid) const {
        return p != kNil && recs[p].connid == connid ? p : kNil;
    }
};

struct AhnMapBulk {
    ahn_map m;
    bool build(const dataset &d) {
        if (m.init(uint32_t(d.peers.size()), int(rte_socket_id()), nullptr) != 0) return false;
        for (uint32_t i = 0; i < d.peers.size(); i++) {
            uint32_t p;
            if (m.bind(d.peers[i].ahn, d.peers[i].qpn, d.peers[i].connid, i, &p) != 0) return false;
            if (p != i) return false;  // a fresh map hands out 0, 1, 2, ...
        }
        return true;
    }
    unsigned burst(const uint16_t *a, const uint32_t *q, const uint32_t *c, uint32_t *out) const {
        ahn_map::result r[kBurst];
        m.lookup_bulk(a, q, c, kBurst, r);
        unsigned hits = 0;
        for (unsigned i = 0; i < kBurst; i++) {
            out[i] = r[i].peer;
            hits += r[i].peer != kNil;
        }
        return hits;
    }
};

struct AhnMapSingle : AhnMapBulk {
    unsigned burst(const uint16_t *a, const uint32_t *q, const uint32_t *c, uint32_t *out) const {
        unsigned hits = 0;
        for (unsigned i = 0; i < kBurst; i++) {
            out[i] = m.lookup(a[i], q[i], c[i]).peer;
            hits += out[i] != kNil;
        }
        return hits;
    }
};

template <uint8_t Flags>
struct RteHashT {
    rte_hash *h = nullptr;
    peer_table pt;
    ~RteHashT() { rte_hash_free(h); }
    bool build(const dataset &d) {
        static unsigned seq;
        char name[RTE_HASH_NAMESIZE];
        snprintf(name, sizeof(name), "bench_ahn%u_%u", unsigned(Flags), seq++);
        rte_hash_parameters p{};
        p.name = name;
        p.entries = std::max<uint32_t>(uint32_t(d.peers.size()) * 2, 64);  // as ahn_map: 2x
        p.key_len = sizeof(uint64_t);
        p.hash_func = rte_hash_crc;
        p.hash_func_init_val = 0;
        p.socket_id = int(rte_socket_id());
        p.extra_flag = Flags;
        h = rte_hash_create(&p);
        if (h == nullptr) return false;
        for (uint32_t i = 0; i < d.peers.size(); i++) {
            const uint64_t k = key_of(d.peers[i].ahn, d.peers[i].qpn);
            if (rte_hash_add_key_data(h, &k, reinterpret_cast<void *>(uintptr_t(i))) != 0) return false;
        }
        pt.build(d);
        return true;
    }
    unsigned burst(const uint16_t *a, const uint32_t *q, const uint32_t *c, uint32_t *out) const {
        uint64_t keys[kBurst];
        const void *kp[kBurst];
        void *data[kBurst];
        uint64_t mask;
        for (unsigned i = 0; i < kBurst; i++) {
            keys[i] = key_of(a[i], q[i]);
            kp[i] = &keys[i];
        }
        rte_hash_lookup_bulk_data(h, kp, kBurst, &mask, data);
        unsigned hits = 0;
        for (unsigned i = 0; i < kBurst; i++) {
            out[i] = pt.check((mask >> i) & 1 ? uint32_t(reinterpret_cast<uintptr_t>(data[i])) : kNil, c[i]);
            hits += out[i] != kNil;
        }
        return hits;
    }
};
using RteHash = RteHashT<0>;
using RteHashLf = RteHashT<RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF>;

struct StdMap {
    std::unordered_map<uint64_t, uint32_t> m;
    peer_table pt;
    bool build(const dataset &d) {
        m.reserve(d.peers.size());
        for (uint32_t i = 0; i < d.peers.size(); i++) m.emplace(key_of(d.peers[i].ahn, d.peers[i].qpn), i);
        pt.build(d);
        return true;
    }
    unsigned burst(const uint16_t *a, const uint32_t *q, const uint32_t *c, uint32_t *out) const {
        unsigned hits = 0;
        for (unsigned i = 0; i < kBurst; i++) {
            auto it = m.find(key_of(a[i], q[i]));
            out[i] = pt.check(it != m.end() ? it->second : kNil, c[i]);
            hits += out[i] != kNil;
        }
        return hits;
    }
};

// Frees what lives in DPDK memory before rte_eal_cleanup.
std::vector<std::function<void()>> &teardowns() {
    static std::vector<std::function<void()>> v;
    return v;
}

// Built once per (implementation, size, layout), checked, kept.
template <class Impl>
const Impl *get_impl(uint32_t n, uint32_t per_ahn, const dataset &d) {
    static std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<Impl>> cache;
    static bool registered = [] {
        teardowns().push_back([] { cache.clear(); });
        return true;
    }();
    (void)registered;
    auto it = cache.find({n, per_ahn});
    if (it != cache.end()) return it->second.get();
    auto impl = std::make_unique<Impl>();
    if (!impl->build(d)) return nullptr;
    // Every query must come back as its own peer, and a wrong connection
    // id as no peer.
    uint32_t out[kBurst];
    for (size_t pos = 0; pos < d.q_peer.size(); pos += kBurst) {
        if (impl->burst(&d.q_ahn[pos], &d.q_qpn[pos], &d.q_connid[pos], out) != kBurst) return nullptr;
        for (unsigned i = 0; i < kBurst; i++)
            if (out[i] != d.q_peer[pos + i]) return nullptr;
    }
    std::vector<uint32_t> wrong(d.q_connid.begin(), d.q_connid.begin() + kBurst);
    for (auto &c : wrong) c ^= 0x5a5a;
    if (impl->burst(&d.q_ahn[0], &d.q_qpn[0], wrong.data(), out) != 0) return nullptr;
    return (cache[{n, per_ahn}] = std::move(impl)).get();
}

template <class Impl>
void BM_attribute(benchmark::State &state) {
    const uint32_t n = uint32_t(state.range(0)), per_ahn = uint32_t(state.range(1));
    const dataset &d = get_data(n, per_ahn);
    const Impl *impl = get_impl<Impl>(n, per_ahn, d);
    if (impl == nullptr) {
        state.SkipWithError("build or verification failed");
        return;
    }
    const size_t q = d.q_peer.size();
    size_t pos = 0;
    uint64_t hits = 0, sink = 0;
    uint32_t out[kBurst];
    for (auto _ : state) {
        hits += impl->burst(&d.q_ahn[pos], &d.q_qpn[pos], &d.q_connid[pos], out);
        sink += out[0] ^ out[kBurst - 1];
        benchmark::ClobberMemory();
        pos += kBurst;
        if (pos == q) pos = 0;
    }
    benchmark::DoNotOptimize(sink);
    if (hits != uint64_t(state.iterations()) * kBurst) state.SkipWithError("an attribution missed");
    state.SetItemsProcessed(int64_t(state.iterations()) * kBurst);
}

void sizes(benchmark::internal::Benchmark *b) {
    b->ArgNames({"peers", "qpn_per_ahn"});
    for (int per_ahn : {1, 4})
        for (int n : {1000, 60000}) b->Args({n, per_ahn});
}

BENCHMARK_TEMPLATE(BM_attribute, AhnMapBulk)->Name("ahn_map_bulk")->Apply(sizes);
BENCHMARK_TEMPLATE(BM_attribute, AhnMapSingle)->Name("ahn_map_single")->Apply(sizes);
BENCHMARK_TEMPLATE(BM_attribute, RteHash)->Name("rte_hash")->Apply(sizes);
BENCHMARK_TEMPLATE(BM_attribute, RteHashLf)->Name("rte_hash_lf")->Apply(sizes);
BENCHMARK_TEMPLATE(BM_attribute, StdMap)->Name("unordered_map")->Apply(sizes);

}  // namespace

int main(int argc, char **argv) {
    const char *eal_args[] = {"bench", "--no-huge", "--no-shconf", "--no-pci", "-m", "512",
                              "-l", "0", "--file-prefix=bench_ahn", "--log-level=lib.eal:error"};
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
