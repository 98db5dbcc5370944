/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "rdgram/crc32_choose.h"

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace rdgram {

namespace {

using clk = std::chrono::steady_clock;

/* ns per call of kernel K over n bytes: independent calls, as a burst's
 * frames are (they overlap in an out-of-order core: throughput, not one
 * call's latency, is what a data path pays), each on one of 8 places of
 * buf hidden from the optimizer, so that no call can be hoisted or
 * merged; the whole batch timed. buf holds n + 56 bytes. */
template <crc32_kernel K> double time_calls(const uint8_t *buf, uint32_t n, unsigned calls)
{
	uint32_t acc = 0;
	const clk::time_point t0 = clk::now();
	for (unsigned i = 0; i < calls; i++) {
		const uint8_t *p = buf + (i & 7) * 8;
		__asm__ volatile("" : "+r"(p));
		acc ^= crc32_ieee_k<K>(p, n);
	}
	const clk::time_point t1 = clk::now();
	volatile uint32_t sink = acc;
	(void)sink;
	return std::chrono::duration<double, std::nano>(t1 - t0).count() / calls;
}

double time_kernel(crc32_kernel k, const uint8_t *buf, uint32_t n, unsigned calls)
{
	return crc32_with(k, [&](auto c) { return time_calls<decltype(c)::value>(buf, n, calls); });
}

} // namespace

crc32_plan crc32_measure(cpu_isa cap)
{
	const clk::time_point start = clk::now();
	cap = cpu_isa_min(cap, cpu_isa_max());
	crc32_plan p;
	std::vector<crc32_kernel> cand;
	const uint32_t maxlen = crc32_plan::class_len[crc32_plan::classes - 1];
	std::vector<uint8_t> buf(maxlen + 56);
	uint32_t x = 0x9e3779b9u;
	for (auto &b : buf) {
		x = x * 1664525u + 1013904223u;
		b = uint8_t(x >> 24);
	}
	/* The candidates: what runs here under the cap (crc32_select at each
	 * level), and agrees with the table (zlib's CRC) at every class's
	 * length and at a few ragged ones. */
	for (cpu_isa lvl : {cpu_isa::avx512, cpu_isa::avx2, cpu_isa::sse, cpu_isa::portable}) {
		const crc32_kernel k = crc32_select(cpu_isa_min(lvl, cap));
		if (!cand.empty() && cand.back() == k)
			continue;
		bool ok = true;
		for (uint32_t n : {1u, 7u, 60u, 100u, 128u, 200u, 256u, 511u, 512u, 1024u, 2048u, 4096u})
			ok &= crc32_ieee(k, buf.data(), n) == crc32_detail::crc32_table(buf.data(), n);
		if (ok)
			cand.push_back(k);
	}
	if (cand.empty())
		cand.push_back(crc32_kernel::table);
	/* The table kernel only when nothing else runs: it is an order of
	 * magnitude slower wherever PCLMUL is (and takes most of the time
	 * budget to time at 4 KB). */
	if (cand.size() > 1 && cand.back() == crc32_kernel::table)
		cand.pop_back();
	if (cand.size() == 1) {
		for (auto &k : p.kernel)
			k = cand[0];
		p.took_us = uint32_t(std::chrono::duration_cast<std::chrono::microseconds>(clk::now() - start).count());
		return p;
	}
	/* Warm-up: the wide units' first use (an AVX-512 license, a cold
	 * i-cache) is not what a data path sees. */
	for (crc32_kernel k : cand)
		time_kernel(k, buf.data(), 512, 64);
	/* Rounds; within a round every class and kernel in turn; per class
	 * and kernel the best round counts. About 16 calls per timing, so
	 * that the clock's cost (tens of ns) is small against the batch. */
	constexpr unsigned rounds = 5;
	for (unsigned r = 0; r < rounds; r++)
		for (unsigned c = 0; c < crc32_plan::classes; c++)
			for (crc32_kernel k : cand) {
				const uint32_t n = crc32_plan::class_len[c];
				const unsigned calls = n <= 512 ? 16 : 8;
				const float t = float(time_kernel(k, buf.data(), n, calls));
				float &best = p.ns[c][unsigned(k)];
				if (best == 0 || t < best)
					best = t;
			}
	for (unsigned c = 0; c < crc32_plan::classes; c++) {
		crc32_kernel win = cand[0];
		for (crc32_kernel k : cand)
			if (p.ns[c][unsigned(k)] < p.ns[c][unsigned(win)])
				win = k;
		p.kernel[c] = win;
	}
	p.measured = true;
	p.took_us = uint32_t(std::chrono::duration_cast<std::chrono::microseconds>(clk::now() - start).count());
	return p;
}

const crc32_plan &crc32_chosen()
{
	static crc32_plan plan;
	static std::once_flag once;
	std::call_once(once, [] {
		cpu_isa cap;
		if (cpu_isa_env_cap(&cap)) {
			const crc32_kernel k = crc32_select();
			for (auto &x : plan.kernel)
				x = k;
			plan.measured = false;
		} else {
			plan = crc32_measure();
		}
	});
	return plan;
}

std::string crc32_plan_describe(const crc32_plan &p)
{
	std::string s;
	for (unsigned c = 0; c < crc32_plan::classes; c++) {
		/* The last class of a run of the same kernel names its bound. */
		if (c + 1 < crc32_plan::classes && p.kernel[c + 1] == p.kernel[c])
			continue;
		if (!s.empty())
			s += ", ";
		s += crc32_kernel_name(p.kernel[c]);
		if (c + 1 < crc32_plan::classes)
			s += " up to " + std::to_string(crc32_plan::class_len[c]) + " B";
		else if (!p.uniform())
			s += " above";
	}
	if (p.measured)
		return s + " (measured in " + std::to_string(p.took_us) + " us)";
	if (const char *e = getenv("RDGRAM_CPU_MAX"); e != nullptr)
		return s + " (forced by RDGRAM_CPU_MAX=" + e + ")";
	return s + " (the one kernel to choose from)";
}

} // namespace rdgram
