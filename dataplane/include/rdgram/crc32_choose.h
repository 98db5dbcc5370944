/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The ICRC kernel chosen by measurement (crc32.h has the kernels).
 *
 * crc32_select(cap) names the widest kernel the CPU runs; the widest is
 * not always the fastest: on an Intel host the 512-bit kernel loses to the
 * 256-bit one up to 256 bytes (docs/PERFORMANCE.md), and which one wins
 * depends on the length. crc32_chosen() times every kernel the CPU runs,
 * once per process, at one length per size class, and keeps the winner of
 * each class: a crc32_plan. A data path asks the plan for a frame's kernel
 * (for_len), or takes its one kernel when every class has the same.
 *
 * RDGRAM_CPU_MAX (cpu_isa.h) still forces: when it is set, the plan is
 * crc32_select()'s kernel at every length, not measured. The choice is
 * visible in telemetry (/rdgram/icrc) and in rdgram-perf -v.
 */
#ifndef RDGRAM_CRC32_CHOOSE_H
#define RDGRAM_CRC32_CHOOSE_H

#include <cstddef>
#include <cstdint>
#include <string>

#include "rdgram/cpu_isa.h"
#include "rdgram/crc32.h"

namespace rdgram {

struct crc32_plan {
	/* Size classes by the CRC's length: up to 128, 256, 512, 1024, 2048
	 * bytes, and above. Each is timed at its upper bound (the last at
	 * 4096). */
	static constexpr unsigned classes = 6;
	static constexpr uint32_t class_len[classes] = {128, 256, 512, 1024, 2048, 4096};

	crc32_kernel kernel[classes] = {};
	/* false: forced (RDGRAM_CPU_MAX) or one kernel to choose from. */
	bool measured = false;
	/* ns per call at class_len[c] for kernel k (index: crc32_kernel's
	 * value); 0: not timed (not run by this CPU, or above the cap). */
	float ns[classes][4] = {};
	/* How long the measurement took. */
	uint32_t took_us = 0;

	static unsigned class_of(size_t len)
	{
		if (len <= 128)
			return 0;
		const unsigned w = 64u - unsigned(__builtin_clzll(uint64_t(len - 1))); /* bit width */
		return w - 7 < classes - 1 ? w - 7 : classes - 1;
	}
	crc32_kernel for_len(size_t len) const { return kernel[class_of(len)]; }
	/* The same kernel at every length. */
	bool uniform() const
	{
		for (unsigned c = 1; c < classes; c++)
			if (kernel[c] != kernel[0])
				return false;
		return true;
	}
};

/* Times each kernel this CPU runs at a level up to cap (and to
 * RDGRAM_CPU_MAX) at every class's length, and keeps the fastest per
 * class. A kernel must first give zlib's CRC of the probe buffers: one
 * that does not is never chosen. Every length's kernels are timed in
 * turn, several rounds, the best round of each counting (robust against a
 * preemption). Takes well under a millisecond. (Any thread.) */
crc32_plan crc32_measure(cpu_isa cap = cpu_isa::avx512);

/* The process's plan, made at the first call (thread-safe): with
 * RDGRAM_CPU_MAX set, crc32_select()'s kernel at every length (forced);
 * else crc32_measure(). */
const crc32_plan &crc32_chosen();

/* One line: "avx2 up to 256 B, avx512 above (measured in 85 us)" or
 * "avx2 (forced by RDGRAM_CPU_MAX=avx2)", or "pclmul (the one kernel to
 * choose from)". */
std::string crc32_plan_describe(const crc32_plan &p);

} // namespace rdgram

#endif
