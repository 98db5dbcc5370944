/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The memory floor of "Send rate as destinations grow" (docs/PERFORMANCE.md):
 * only the AV reads of the soft send path, in the order rdgram-perf --test
 * txonly --dests N sends, with nothing else per message. An
 * ah_table<soft_av> of N published slots (rte_malloc, 4 KiB pages as
 * rdgram-perf --no-huge), walked in bursts of 32 handles, in creation order
 * (rr) or a fixed-seed permutation (random); per handle: the lookup
 * (generation check) and a copy of the AV's 60 bytes into a frame buffer,
 * as build_masked does. Two ways to prefetch the slots:
 *
 *   walk/burst/N/order   every slot of the burst before the first copy
 *                        (what soft_queue::tx_burst does)
 *   walk/ahead/N/order   that, plus the next burst's slots while this
 *                        burst is copied (soft_queue::prefetch_ah, one
 *                        burst ahead)
 *   walk/ahead2/N/order  the same two bursts ahead
 *   walk/burst_crc, walk/ahead_crc: burst and ahead with a CRC-32 of 112
 *                        bytes per AV (the ICRC of a 64-byte message, the
 *                        queue's kernel): does the AV's miss hide behind
 *                        the work of the send path?
 *
 * items_per_second = AVs read per second (quote CPU time on a shared
 * machine); at N = 1M random its inverse is what one message's AV costs.
 *
 * Run e.g.:
 *   build/benchmarks/bench_av_walk --benchmark_repetitions=3 \
 *       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
 */
#include <benchmark/benchmark.h>

#include <rte_eal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "rdgram/ah_table.h"
#include "rdgram/crc32.h"
#include "soft_datapath.h"

namespace {

using namespace rdgram;
using table = ah_table<soft::soft_av>;

constexpr unsigned burst = 32;

struct walk_set {
	table t;
	std::vector<ah_handle> order;
};

/* One table and order per (N, random), built once and kept. */
walk_set &set_for(uint32_t n, bool random)
{
	static std::map<std::pair<uint32_t, bool>, std::unique_ptr<walk_set>> sets;
	auto &p = sets[{n, random}];
	if (p)
		return *p;
	p = std::make_unique<walk_set>();
	if (p->t.init(n, SOCKET_ID_ANY, nullptr) != 0) {
		fprintf(stderr, "bench_av_walk: no memory for %u slots\n", n);
		exit(1);
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = 0;
		p->t.reserve(&s);
		soft::soft_av &av = p->t.av_at(s);
		memset(av.hdr, int(i & 0xff), sizeof(av.hdr));
		av.l3 = 4;
		p->order.push_back(p->t.publish(s));
	}
	if (random) {
		std::mt19937_64 rng(0x5eed);
		std::shuffle(p->order.begin(), p->order.end(), rng);
	}
	/* At least a few bursts: N = 1 repeats its handle. */
	while (p->order.size() < 4 * burst)
		p->order.push_back(p->order[p->order.size() % n]);
	return *p;
}

void BM_walk(benchmark::State &state, unsigned ahead, bool crc)
{
	const auto n = uint32_t(state.range(0));
	const bool random = state.range(1) != 0;
	walk_set &w = set_for(n, random);
	const table::view v = w.t.replica(0);
	const ah_handle *h = w.order.data();
	const size_t len = w.order.size() / burst * burst;
	alignas(64) uint8_t frame[burst][128] = {};
	const crc32_kernel k = crc32_select();
	size_t i = 0;
	uint64_t sum = 0;
	for (auto _ : state) {
		for (unsigned j = 0; j < burst; j++)
			v.prefetch(h[i + j]);
		const size_t next = i + burst == len ? 0 : i + burst;
		if (ahead != 0) {
			const size_t far = (i + ahead * burst) % len;
			for (unsigned j = 0; j < burst; j++)
				v.prefetch(h[far + j]);
		}
		for (unsigned j = 0; j < burst; j++) {
			const soft::soft_av *av = v.lookup(h[i + j]);
			memcpy(frame[j], av->hdr, sizeof(av->hdr));
			sum += crc ? crc32_ieee(k, frame[j], 112) : frame[j][j & 7];
		}
		benchmark::DoNotOptimize(frame);
		i = next;
	}
	benchmark::DoNotOptimize(sum);
	state.SetItemsProcessed(int64_t(state.iterations()) * burst);
}

void args(benchmark::internal::Benchmark *b)
{
	for (int64_t n : {1, 1000, 100000, 1000000})
		for (int64_t r : {0, 1})
			if (n > 1 || r == 0)
				b->Args({n, r});
	b->ArgNames({"N", "random"});
}

BENCHMARK_CAPTURE(BM_walk, burst, 0u, false)->Apply(args);
BENCHMARK_CAPTURE(BM_walk, ahead, 1u, false)->Apply(args);
BENCHMARK_CAPTURE(BM_walk, ahead2, 2u, false)->Apply(args);
BENCHMARK_CAPTURE(BM_walk, burst_crc, 0u, true)->Apply(args);
BENCHMARK_CAPTURE(BM_walk, ahead_crc, 1u, true)->Apply(args);

} // namespace

int main(int argc, char **argv)
{
	const char *eal_args[] = {"bench_av_walk", "--no-huge", "--no-shconf", "--no-pci", "-m", "1024", "-l", "0",
				  "--file-prefix=bench_av_walk", "--log-level=lib.eal:error"};
	if (rte_eal_init(int(sizeof(eal_args) / sizeof(eal_args[0])), const_cast<char **>(eal_args)) < 0) {
		fprintf(stderr, "bench_av_walk: rte_eal_init failed\n");
		return 1;
	}
	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	return 0;
}
