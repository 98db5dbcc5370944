/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Which SIMD level the data path's run-time choices may use.
 *
 * A build targets one -march (meson option cpu_instruction_set: native,
 * generic = x86-64-v2, or any -march value). Code that can go faster with
 * more than that (the ICRC kernel in crc32.h, the mlx5 run writers) keeps
 * each faster version in a function of its own compiled with
 * __attribute__((target(...))) (RDGRAM_TARGET_*), and picks one once, at
 * queue set-up or first use, from cpu_isa_max(): so a generic build runs
 * the AVX-512 path on a CPU that has it and never an instruction a CPU
 * lacks. (DPDK does the same with rte_cpu_get_flag_enabled and its
 * max-SIMD-bitwidth cap, rte_vect_get_max_simd_bitwidth.)
 *
 * The levels, each including the ones before it:
 *   portable  nothing beyond the build's baseline
 *   sse       SSSE3, SSE4.1, SSE4.2 and PCLMULQDQ (128-bit kernels)
 *   avx2      AVX2 (256-bit)
 *   avx512    AVX-512 F, BW and VL (512-bit)
 * A kernel that needs more than its level (the AVX-512 and AVX2 ICRC
 * kernels need VPCLMULQDQ) checks that too (__builtin_cpu_supports).
 *
 * RDGRAM_CPU_MAX=portable|sse|avx2|avx512 in the environment caps the
 * level for the whole process (read once, at the first cpu_isa_max()), as
 * DPDK's --force-max-simd-bitwidth does for its own code; tests also cap a
 * single queue (mlx5 queue_config::isa_cap) or call a kernel by name. A
 * cap only lowers a choice made at run time: what the build's -march has
 * already compiled in (everything, in a native build on the build host)
 * stays.
 */
#ifndef RDGRAM_CPU_ISA_H
#define RDGRAM_CPU_ISA_H

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace rdgram {

enum class cpu_isa : uint8_t { portable = 0, sse = 1, avx2 = 2, avx512 = 3 };

inline const char *cpu_isa_name(cpu_isa l)
{
	switch (l) {
	case cpu_isa::portable:
		return "portable";
	case cpu_isa::sse:
		return "sse";
	case cpu_isa::avx2:
		return "avx2";
	case cpu_isa::avx512:
		return "avx512";
	}
	return "?";
}

/* "portable", "sse", "avx2" or "avx512" -> *out; false (and *out
 * unchanged) for anything else. */
inline bool cpu_isa_parse(const char *s, cpu_isa *out)
{
	for (cpu_isa l : {cpu_isa::portable, cpu_isa::sse, cpu_isa::avx2, cpu_isa::avx512})
		if (s != nullptr && std::strcmp(s, cpu_isa_name(l)) == 0) {
			*out = l;
			return true;
		}
	return false;
}

inline cpu_isa cpu_isa_min(cpu_isa a, cpu_isa b) { return a < b ? a : b; }

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define RDGRAM_CPU_ISA_X86 1
/* The target attributes of each level, for functions that use it. */
#define RDGRAM_TARGET_SSE __attribute__((target("ssse3,sse4.1,sse4.2,pclmul")))
#define RDGRAM_TARGET_AVX2 __attribute__((target("ssse3,sse4.1,sse4.2,pclmul,avx2")))
#define RDGRAM_TARGET_AVX512 \
	__attribute__((target("ssse3,sse4.1,sse4.2,pclmul,avx2,avx512f,avx512bw,avx512vl")))
#endif

/* The widest level this CPU (and its OS: libgcc reports AVX and AVX-512
 * only when XSAVE enables their registers) supports. (Any thread.) */
inline cpu_isa cpu_isa_of_cpu()
{
#if defined(RDGRAM_CPU_ISA_X86)
	__builtin_cpu_init(); /* idempotent; needed before constructors run */
	if (!(__builtin_cpu_supports("ssse3") && __builtin_cpu_supports("sse4.1") &&
	      __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul")))
		return cpu_isa::portable;
	if (!__builtin_cpu_supports("avx2"))
		return cpu_isa::sse;
	if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	      __builtin_cpu_supports("avx512vl")))
		return cpu_isa::avx2;
	return cpu_isa::avx512;
#else
	return cpu_isa::portable;
#endif
}

/* RDGRAM_CPU_MAX: true and *cap when set to a level's name; false when
 * unset (*cap = avx512: no cap) or not a name (*cap = avx512, ignored;
 * runtime::init warns). (Any thread.) */
inline bool cpu_isa_env_cap(cpu_isa *cap)
{
	*cap = cpu_isa::avx512;
	return cpu_isa_parse(std::getenv("RDGRAM_CPU_MAX"), cap);
}

/* The level run-time choices use: the CPU's, capped by RDGRAM_CPU_MAX.
 * Computed once per process (the first call; thread-safe), then one
 * load: call it at set-up, not per packet. (Any thread.) */
inline cpu_isa cpu_isa_max()
{
	static const cpu_isa v = [] {
		cpu_isa cap;
		cpu_isa_env_cap(&cap);
		return cpu_isa_min(cpu_isa_of_cpu(), cap);
	}();
	return v;
}

} // namespace rdgram

#endif
