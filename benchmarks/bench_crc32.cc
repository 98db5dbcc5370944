// CRC-32 (RoCEv2 ICRC) micro-benchmark: rdgram::crc32_ieee vs DPDK
// rte_net_crc_calc(RTE_NET_CRC32_ETH) vs zlib crc32, side by side.
// rdgram_crc32_queue is crc32_ieee(kernel, ...) with the kernel a queue
// keeps (the process's plan, crc32_chosen: the kernel measured fastest at
// the length's size class), as drivers/soft calls it; in a generic
// build (-Dcpu_instruction_set=generic) both rdgram rows are the run-time
// dispatch, in a native one on an AVX-512 host the first is the inlined
// kernel.
//
// rdgram_kernel_<name> is each ICRC kernel this CPU runs, called by name
// (crc32_ieee_k<K>), whatever crc32_select would choose: table, pclmul,
// avx2 (256-bit VPCLMULQDQ) and avx512 side by side in one run.
//
// rte_net_crc_calc is run twice: with the handler selected in main()
// (RTE_NET_CRC_AVX512, which DPDK falls back from to SSE42 if AVX-512 is not
// built/usable) and with RTE_NET_CRC_SSE42 forced.
//
// Deps: libdpdk (rte_eal, rte_net), benchmark, zlib (-lz).
// Run e.g.:  ./bench_crc32 --benchmark_min_time=0.2
//
// Two variants per implementation:
//   *_tput : independent calls on the same buffer (what a burst of packets
//            looks like: per-call cost when calls overlap in the OoO core);
//   *_lat  : each call's address depends on the previous result (serial
//            latency of one call, including the load).
// "cyc" = TSC cycles per call (rte_rdtsc around the timed loop).
#include "rdgram/crc32.h"
#include "rdgram/crc32_choose.h"

#include <benchmark/benchmark.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_net_crc.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr size_t kMaxLen = 4096;

const uint8_t *bench_buffer() {
    static std::vector<uint8_t> buf = [] {
        std::vector<uint8_t> v(kMaxLen + 128);
        std::mt19937 rng(42);
        for (auto &b : v) b = static_cast<uint8_t>(rng());
        return v;
    }();
    return buf.data() + 64;  // cache-line aligned-ish start; lengths are the point
}

struct Rdgram {
    static uint32_t crc(const uint8_t *p, size_t len) { return rdgram::crc32_ieee(p, len); }
};
// The data path's form (drivers/soft): the kernel a queue chose at attach
// (crc32_chosen's plan), read from memory at each call and switched on.
rdgram::crc32_plan g_queue_plan;
struct RdgramQueue {
    static void setup() { g_queue_plan = rdgram::crc32_chosen(); }
    static uint32_t crc(const uint8_t *p, size_t len) {
        return rdgram::crc32_ieee(g_queue_plan.for_len(len), p, len);
    }
};
// One kernel by name (registered in main() only where the CPU runs it).
template <rdgram::crc32_kernel K>
struct RdgramKernel {
    static uint32_t crc(const uint8_t *p, size_t len) { return rdgram::crc32_ieee_k<K>(p, len); }
};
struct RteNet {
    static uint32_t crc(const uint8_t *p, size_t len) {
        return rte_net_crc_calc(p, static_cast<uint32_t>(len), RTE_NET_CRC32_ETH);
    }
};
// Same DPDK call with the SSE4.2/PCLMULQDQ handler forced (what DPDK uses
// when AVX-512 is unavailable or the max SIMD bitwidth is < 512).
struct RteNetSse42 : RteNet {
    static void setup() { rte_net_crc_set_alg(RTE_NET_CRC_SSE42); }
    static void teardown() { rte_net_crc_set_alg(RTE_NET_CRC_AVX512); }
};
struct Zlib {
    static uint32_t crc(const uint8_t *p, size_t len) {
        return static_cast<uint32_t>(::crc32(0L, p, static_cast<uInt>(len)));
    }
};

// Optional per-implementation setup/teardown hooks.
template <class T>
auto setup(int) -> decltype(T::setup()) { T::setup(); }
template <class T>
void setup(long) {}
template <class T>
auto teardown(int) -> decltype(T::teardown()) { T::teardown(); }
template <class T>
void teardown(long) {}

template <class Impl>
void BM_tput(benchmark::State &state) {
    setup<Impl>(0);
    const size_t len = static_cast<size_t>(state.range(0));
    const uint8_t *p = bench_buffer();
    uint64_t cycles = 0;
    for (auto _ : state) {
        // Time in chunks so rdtsc overhead is negligible.
        const uint64_t t0 = rte_rdtsc();
        for (int i = 0; i < 64; ++i) {
            benchmark::DoNotOptimize(p);
            uint32_t c = Impl::crc(p, len);
            benchmark::DoNotOptimize(c);
        }
        cycles += rte_rdtsc() - t0;
    }
    const double calls = static_cast<double>(state.iterations()) * 64.0;
    state.SetItemsProcessed(static_cast<int64_t>(calls));
    state.SetBytesProcessed(static_cast<int64_t>(calls * static_cast<double>(len)));
    state.counters["cyc"] = static_cast<double>(cycles) / calls;
    state.counters["ns"] = benchmark::Counter(calls, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    teardown<Impl>(0);
}

template <class Impl>
void BM_lat(benchmark::State &state) {
    setup<Impl>(0);
    const size_t len = static_cast<size_t>(state.range(0));
    const uint8_t *p = bench_buffer();
    uint32_t zero = 0;
    benchmark::DoNotOptimize(zero);  // opaque 0: the next address depends on the last CRC
    uint32_t c = 0;
    uint64_t cycles = 0;
    for (auto _ : state) {
        const uint64_t t0 = rte_rdtsc();
        for (int i = 0; i < 64; ++i) c = Impl::crc(p + (c & zero), len);
        cycles += rte_rdtsc() - t0;
    }
    benchmark::DoNotOptimize(c);
    const double calls = static_cast<double>(state.iterations()) * 64.0;
    state.SetItemsProcessed(static_cast<int64_t>(calls));
    state.SetBytesProcessed(static_cast<int64_t>(calls * static_cast<double>(len)));
    state.counters["cyc"] = static_cast<double>(cycles) / calls;
    state.counters["ns"] = benchmark::Counter(calls, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    teardown<Impl>(0);
}

void lengths(benchmark::internal::Benchmark *b) {
    for (int len : {64, 120, 128, 256, 1024, 4096}) b->Arg(len);
}

BENCHMARK_TEMPLATE(BM_tput, Rdgram)->Name("rdgram_crc32_ieee/tput")->Apply(lengths);
BENCHMARK_TEMPLATE(BM_tput, RdgramQueue)->Name("rdgram_crc32_queue/tput")->Apply(lengths);
BENCHMARK_TEMPLATE(BM_tput, RteNet)->Name("rte_net_crc_calc/tput")->Apply(lengths);
BENCHMARK_TEMPLATE(BM_tput, RteNetSse42)->Name("rte_net_crc_calc_sse42/tput")->Apply(lengths);
BENCHMARK_TEMPLATE(BM_tput, Zlib)->Name("zlib_crc32/tput")->Apply(lengths);
BENCHMARK_TEMPLATE(BM_lat, Rdgram)->Name("rdgram_crc32_ieee/lat")->Apply(lengths);
BENCHMARK_TEMPLATE(BM_lat, RdgramQueue)->Name("rdgram_crc32_queue/lat")->Apply(lengths);
BENCHMARK_TEMPLATE(BM_lat, RteNet)->Name("rte_net_crc_calc/lat")->Apply(lengths);
BENCHMARK_TEMPLATE(BM_lat, RteNetSse42)->Name("rte_net_crc_calc_sse42/lat")->Apply(lengths);
BENCHMARK_TEMPLATE(BM_lat, Zlib)->Name("zlib_crc32/lat")->Apply(lengths);

}  // namespace

int main(int argc, char **argv) {
    // rte_net_crc picks its SIMD handler only after EAL init (CPU flags and
    // max SIMD bitwidth); without it, it stays on the scalar table code.
    const char *eal_args[] = {"bench", "--no-huge", "--no-shconf", "--no-pci", "-m", "64", "-l", "0",
                              "--log-level=lib.eal:error", "--force-max-simd-bitwidth=512"};
    int eal_argc = static_cast<int>(sizeof(eal_args) / sizeof(eal_args[0]));
    if (rte_eal_init(eal_argc, const_cast<char **>(eal_args)) < 0) {
        std::fprintf(stderr, "rte_eal_init failed\n");
        return 1;
    }
    rte_net_crc_set_alg(RTE_NET_CRC_AVX512);  // falls back to SSE42 if AVX512 not built/usable

    // Sanity: all three must agree, otherwise the numbers mean nothing.
    const uint8_t *p = bench_buffer();
    for (size_t len : {0, 1, 15, 64, 120, 128, 256, 1024, 4096}) {
        RdgramQueue::setup();
        const uint32_t a = Rdgram::crc(p, len), b = RteNet::crc(p, len), c = Zlib::crc(p, len);
        if (a != c || b != c || RdgramQueue::crc(p, len) != c) {
            std::fprintf(stderr, "CRC mismatch len=%zu rdgram=%08x rte=%08x zlib=%08x\n", len, a, b, c);
            return 1;
        }
    }
    std::printf("TSC %.3f GHz, rdgram::crc32_ieee back end: %s, a queue's (crc32_chosen): %s\n",
                static_cast<double>(rte_get_tsc_hz()) / 1e9, rdgram::crc32_ieee_backend(),
                rdgram::crc32_plan_describe(rdgram::crc32_chosen()).c_str());

    // Every kernel this CPU runs, by name (crc32_select(cap) at each level
    // lists them, RDGRAM_CPU_MAX included), checked against zlib first.
    std::vector<rdgram::crc32_kernel> kernels;
    for (rdgram::cpu_isa cap : {rdgram::cpu_isa::avx512, rdgram::cpu_isa::avx2, rdgram::cpu_isa::sse,
                                rdgram::cpu_isa::portable}) {
        const rdgram::crc32_kernel k = rdgram::crc32_select(cap);
        if (kernels.empty() || kernels.back() != k) kernels.push_back(k);
    }
    for (rdgram::crc32_kernel k : kernels) {
        for (size_t len : {0, 1, 15, 64, 120, 128, 256, 1024, 4096})
            if (rdgram::crc32_ieee(k, p, len) != Zlib::crc(p, len)) {
                std::fprintf(stderr, "CRC mismatch: kernel %s len=%zu\n", rdgram::crc32_kernel_name(k), len);
                return 1;
            }
        rdgram::crc32_with(k, [&](auto c) {
            using K = RdgramKernel<decltype(c)::value>;
            const std::string name = std::string("rdgram_kernel_") + rdgram::crc32_kernel_name(k);
            benchmark::RegisterBenchmark((name + "/tput").c_str(), BM_tput<K>)->Apply(lengths);
            benchmark::RegisterBenchmark((name + "/lat").c_str(), BM_lat<K>)->Apply(lengths);
        });
    }

    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    rte_eal_cleanup();
    return 0;
}
