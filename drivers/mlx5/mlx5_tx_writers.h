/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/mlx5 run writers: the loops that write a run of send WQEs that
 * differ only in their payload (see mlx5_tx.h, tx_run), one WQE per
 * iteration, with the checks made once for the run by the caller. One loop
 * body (run_loop_body), compiled three ways: portable (copy_writer, one
 * instance per copy size class; mbuf_writer for single-segment mbufs),
 * AVX2 (block_writer_avx2 in run_loop_avx2) and AVX-512BW
 * (block_writer_avx512 in run_loop_avx512). Which one a queue uses is
 * chosen at attach from the CPU and RDGRAM_CPU_MAX (rdgram/cpu_isa.h,
 * mlx5_txq_data::isa), so a generic build (-Dcpu_instruction_set=generic)
 * runs the AVX paths where the CPU has them; tests/tools/check_isa.py
 * names the target-attributed functions here. Nothing here touches a
 * queue: every writer gets what it needs by value (run_args).
 * (Thread safety: pure functions of their arguments.)
 */
#ifndef RDGRAM_MLX5_TX_WRITERS_H
#define RDGRAM_MLX5_TX_WRITERS_H

#include <cstdint>
#include <cstring>

#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_mbuf.h>
#include <rte_memcpy.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "ibv_lkey_map.h"
#include "mlx5_ring.h"
#include "rdgram/cpu_isa.h"
#include "rdgram/ud.h"

namespace rdgram::mlx5 {

struct run_result {
	uint32_t n;     /* WRs written */
	uint8_t *last;  /* the last one's control segment */
	uint64_t bytes; /* their payloads */
};

/* What inline_run's loops need, by value (no local of theirs has its
 * address taken, so all of it stays in registers). */
struct run_args {
	send_wr *wr, *end;
	const uint8_t *key; /* the head's 16-byte key */
	uint8_t *ctrl;      /* the first WQE's block */
	uint8_t *limit;     /* how far the ring may be written */
	uint8_t *bbsp;      /* mlx5_txq_data::sq_bbs at the first WQE */
	uint32_t pi, len, seg_len, bbs, seg_off, hdr;
	bool full;          /* extended AV: the head is a whole block */
	/* mbuf runs (mbuf_writer) */
	uintptr_t mr_start, mr_end; /* the memory region of the run's first mbuf */
	uint32_t lkey_be, mtu;
	rte_mbuf **slots;   /* mlx5_txq_data::sq_mbuf */
	uint32_t mask;      /* sq_wqe_cnt - 1 */
};

/*
 * Asks for the bbs blocks from ctrl for writing (prefetchw), one WQE
 * ahead of the stores. An SQ larger than L1 (1024 blocks are 64 KiB)
 * has each block evicted since its last lap, and the stores of a WQE
 * would otherwise wait, in order, for each block's read for
 * ownership: with it, tx/mlx5_path costs about 0.6x as much
 * (bench_mlx5_wqe, PERFORMANCE.md). A prefetch never faults: blocks
 * past the ring's end or not yet free are only fetched, never
 * written. __builtin_prefetch, not DPDK 22.11's rte_prefetch0_write:
 * that one is __rte_experimental, so in its own section, so GCC does
 * not inline it, finds it has no effect and drops the call.
 */
__rte_always_inline void prefetch_next(const uint8_t *ctrl, uint32_t bbs)
{
	/* Unconditionally the first three (a branch per WQE costs
	 * more than a spare prefetch: bench_mlx5_wqe), and the last. */
	__builtin_prefetch(ctrl, 1, 3);
	__builtin_prefetch(ctrl + wqe_bb, 1, 3);
	__builtin_prefetch(ctrl + 2 * wqe_bb, 1, 3);
	__builtin_prefetch(ctrl + size_t(bbs - 1) * wqe_bb, 1, 3);
}

struct b16 { uint64_t w[2]; };
struct b32 { uint64_t w[4]; };
struct b64 { uint64_t w[8]; };
/* copy_inline's size classes (two copies of T, the second ending at
 * len's last byte); the run loop takes one per run. */
template <class T> struct copy_two {
	static __rte_always_inline void copy(uint8_t *dst, const uint8_t *src, uint32_t len)
	{
		T x, y;
		memcpy(&x, src, sizeof(x));
		memcpy(&y, src + len - sizeof(y), sizeof(y));
		memcpy(dst, &x, sizeof(x));
		memcpy(dst + len - sizeof(y), &y, sizeof(y));
	}
};

/* Copies the len bytes of an inline payload to dst (not wrapping).
 * Up to 128 bytes, the common inline sizes: two fixed-size loads
 * and stores of the length's size class, the second ending at the
 * last byte (they overlap unless len is twice the class), with no
 * alignment dispatch; src is never read past len. Longer: rte_memcpy. */
__rte_always_inline void copy_inline(uint8_t *dst, const uint8_t *src, uint32_t len)
{
	if (len > 128) {
		rte_memcpy(dst, src, len);
	} else if (len > 64) {
		copy_two<b64>::copy(dst, src, len);
	} else if (len > 32) {
		copy_two<b32>::copy(dst, src, len);
	} else if (len > 16) {
		copy_two<b16>::copy(dst, src, len);
	} else if (len >= 8) {
		copy_two<uint64_t>::copy(dst, src, len);
	} else if (len >= 4) {
		copy_two<uint32_t>::copy(dst, src, len);
	} else if (len != 0) {
		/* 1 to 3 bytes: first, middle and last (may coincide). */
		const uint8_t a = src[0], b = src[len / 2], c = src[len - 1];
		dst[0] = a;
		dst[len / 2] = b;
		dst[len - 1] = c;
	}
}

struct copy_any {
	static __rte_always_inline void copy(uint8_t *dst, const uint8_t *src, uint32_t len)
	{
		copy_inline(dst, src, len);
	}
};

/* One run: WRs from a.wr while W matches them and they fit; see run_loop. */
template <class W> __rte_always_inline run_result run_loop_body(run_args a, const uint8_t *blk)
{
	const W w(a, blk);
	const size_t step = size_t(a.bbs) * wqe_bb;
	send_wr *const first = a.wr;
	/* The WRs that fit in the blocks allowed, as the loop's one
	 * bound (a division per run, not a compare per WR). */
	const size_t fit = size_t(a.limit - a.ctrl) / step;
	send_wr *const stop = size_t(a.end - first) < fit ? a.end : first + fit;
	send_wr *wr = a.wr;
	uint8_t *ctrl = a.ctrl;
	uint8_t *bbsp = a.bbsp;
	uint32_t pi = a.pi;
	uint64_t bytes = 0;
	for (; wr != stop && w.match(wr); ++wr) {
		prefetch_next(ctrl + step, a.bbs);
		if constexpr (W::same_len)
			w.write(ctrl, wr, pi);
		else
			bytes += w.write(ctrl, wr, pi);
		*bbsp = uint8_t(a.bbs);
		bbsp += a.bbs;
		pi += a.bbs;
		ctrl += step;
	}
	const uint32_t n = uint32_t(wr - first);
	if constexpr (W::same_len)
		bytes = uint64_t(n) * a.len;
	return {n, ctrl - step, bytes};
}

/* inline_run's loop; W writes one WQE (built once per run from the
 * arguments and the head block). run_loop_avx512 and run_loop_avx2
 * are the same loop compiled for those levels: their writers' methods
 * carry the level's RDGRAM_TARGET_* and inline only into a function of
 * that target (flatten makes sure they do, at -O1 too; a generic
 * build's other code never calls them). */
template <class W> __rte_noinline run_result run_loop(run_args a, const uint8_t *blk)
{
	return run_loop_body<W>(a, blk);
}
#if defined(RDGRAM_CPU_ISA_X86)
template <class W>
RDGRAM_TARGET_AVX512 __attribute__((flatten)) __rte_noinline run_result
run_loop_avx512(run_args a, const uint8_t *blk)
{
	return run_loop_body<W>(a, blk);
}
template <class W>
RDGRAM_TARGET_AVX2 __attribute__((flatten)) __rte_noinline run_result
run_loop_avx2(run_args a, const uint8_t *blk)
{
	return run_loop_body<W>(a, blk);
}
#endif

/* What every inline writer's run takes: the head's key, plain inline
 * SEND, the run's length. */
struct inline_match {
	static constexpr bool same_len = true; /* every WQE a.len bytes */
	const uint8_t *key;
	uint32_t len;
	explicit inline_match(const run_args &a) : key(a.key), len(a.len) {}
	__rte_always_inline bool match(const send_wr *wr) const
	{
		return wr->inline_len == len && wr->flags == send_inline && memcmp(wr, key, 16) == 0;
	}
};

/* write_head's and write_inline's stores, C one of the copy classes. */
template <class C> struct copy_writer : inline_match {
	alignas(64) uint8_t blk[wqe_bb];
	uint32_t seg_off, seg_len, hdr;
	bool full;
	copy_writer(const run_args &a, const uint8_t *b)
		: inline_match(a), seg_off(a.seg_off), seg_len(a.seg_len), hdr(a.hdr), full(a.full)
	{
		memcpy(blk, b, wqe_bb);
	}
	__rte_always_inline uint32_t write(uint8_t *ctrl, const send_wr *wr, uint32_t pi) const
	{
		const auto *src = static_cast<const uint8_t *>(wr->inline_data);
		if (likely(full))
			memcpy(ctrl, blk, wqe_bb);
		else
			memcpy(ctrl, blk, 16 + compact_av_len);
		const uint16_t idx = htobe16(uint16_t(pi));
		memcpy(ctrl + 1, &idx, 2);
		uint8_t *seg = ctrl + seg_off;
		memset(seg + seg_len - 16, 0, 16);
		memcpy(seg, &hdr, 4);
		C::copy(seg + 4, src, len);
		return len;
	}
};

#if defined(RDGRAM_CPU_ISA_X86)
/*
 * For the extended AV and payloads of at most 124 bytes: whole aligned
 * 64-byte blocks, the head with the WQE index put in, then the inline
 * header and payload shifted by the header's 4 bytes. The masked
 * loads read nothing past len and leave the padding zero; the bytes
 * after the WQE's last 16-byte unit, to the end of its last block, are
 * zeroed too (the device reads DS units only, and the block is the
 * WQE's own). AVX-512F/BW (cpu_isa::avx512); only run_loop_avx512
 * calls it.
 */
struct block_writer_avx512 : inline_match {
	__m512i head, hv;
	__mmask64 m0, m1;
	bool two_blocks;
	RDGRAM_TARGET_AVX512 block_writer_avx512(const run_args &a, const uint8_t *blk)
		: inline_match(a), head(_mm512_load_si512(blk)),
		  hv(_mm512_maskz_set1_epi32(__mmask16(1u << 15), int(a.hdr))),
		  m0(a.len >= 64 ? ~__mmask64(0) : (__mmask64(1) << a.len) - 1),
		  m1(a.len <= 64 ? 0 : (__mmask64(1) << (a.len - 64)) - 1), two_blocks(a.bbs == 3)
	{
	}
	/* hi's 4 bytes then lo's first 60 (valignd by 15 dwords); maskz
	 * with every lane set, the same instruction as
	 * _mm512_alignr_epi32, whose _mm512_undefined_epi32 GCC 12 warns
	 * about (-Wmaybe-uninitialized, GCC PR 105593). */
	RDGRAM_TARGET_AVX512 static __m512i shift_in(__m512i lo, __m512i hi)
	{
		return _mm512_maskz_alignr_epi32(__mmask16(0xffff), lo, hi, 15);
	}
	RDGRAM_TARGET_AVX512 uint32_t write(uint8_t *ctrl, const send_wr *wr, uint32_t pi) const
	{
		const auto *src = static_cast<const uint8_t *>(wr->inline_data);
		const uint32_t w0 = htobe32((pi & 0xffff) << 8 | MLX5_OPCODE_SEND);
		_mm512_store_si512(ctrl, _mm512_mask_set1_epi32(head, 1, int(w0)));
		const __m512i d0 = _mm512_maskz_loadu_epi8(m0, src);
		_mm512_store_si512(ctrl + wqe_bb, shift_in(d0, hv));
		if (two_blocks) {
			const __m512i d1 = _mm512_maskz_loadu_epi8(m1, src + wqe_bb);
			_mm512_store_si512(ctrl + 2 * wqe_bb, shift_in(d1, d0));
		}
		return len;
	}
};
/*
 * block_writer_avx512 for AVX2 (no byte-masked loads): payloads of a
 * whole number of 4-byte words, at most 124 bytes. Each 32-byte half
 * of the inline blocks is its payload words rotated by one (vpermd)
 * with the word before it (the header, or the last word of the
 * previous half) blended in; the dword-masked loads (vpmaskmovd) read
 * nothing past len and leave the padding zero. The index goes into the
 * head's first word the same way, so every store is an aligned 32-byte
 * half. AVX2 (cpu_isa::avx2); only run_loop_avx2 calls it.
 */
struct block_writer_avx2 : inline_match {
	__m256i head0, head1, hv, rot;
	__m256i m[4];
	bool two_blocks, none;
	RDGRAM_TARGET_AVX2 block_writer_avx2(const run_args &a, const uint8_t *blk)
		: inline_match(a), head0(_mm256_load_si256(reinterpret_cast<const __m256i *>(blk))),
		  head1(_mm256_load_si256(reinterpret_cast<const __m256i *>(blk + 32))),
		  hv(_mm256_set1_epi32(int(a.hdr))), rot(_mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6)),
		  two_blocks(a.bbs == 3), none(a.len == 0)
	{
		const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
		const int words = int(a.len / 4);
		for (int k = 0; k < 4; k++) /* lane j of half k loads word 8k + j */
			m[k] = _mm256_cmpgt_epi32(_mm256_set1_epi32(words - 8 * k), lane);
	}
	RDGRAM_TARGET_AVX2 uint32_t write(uint8_t *ctrl, const send_wr *wr, uint32_t pi) const
	{
		const auto *src = static_cast<const uint8_t *>(wr->inline_data);
		const int w0 = int(htobe32((pi & 0xffff) << 8 | MLX5_OPCODE_SEND));
		auto *d = reinterpret_cast<__m256i *>(ctrl);
		_mm256_store_si256(d, _mm256_blend_epi32(head0, _mm256_set1_epi32(w0), 0x01));
		_mm256_store_si256(d + 1, head1);
		/* A zero-length payload may have no buffer: read nothing. */
		const auto *p = reinterpret_cast<const int *>(none ? ctrl : src);
		const __m256i y0 = _mm256_permutevar8x32_epi32(_mm256_maskload_epi32(p, m[0]), rot);
		const __m256i y1 = _mm256_permutevar8x32_epi32(_mm256_maskload_epi32(p + 8, m[1]), rot);
		_mm256_store_si256(d + 2, _mm256_blend_epi32(y0, hv, 0x01));
		_mm256_store_si256(d + 3, _mm256_blend_epi32(y1, y0, 0x01));
		if (two_blocks) {
			const __m256i y2 =
				_mm256_permutevar8x32_epi32(_mm256_maskload_epi32(p + 16, m[2]), rot);
			const __m256i y3 =
				_mm256_permutevar8x32_epi32(_mm256_maskload_epi32(p + 24, m[3]), rot);
			_mm256_store_si256(d + 4, _mm256_blend_epi32(y2, y1, 0x01));
			_mm256_store_si256(d + 5, _mm256_blend_epi32(y3, y2, 0x01));
		}
		return len;
	}
};
#endif

/* The mbuf run's writer (mlx5_queue::mbuf_run): the head with its WQE
 * index and one data segment per WQE; the mbuf goes to its SQ slot. */
struct mbuf_writer {
	static constexpr bool same_len = false;
	alignas(64) uint8_t blk[wqe_bb];
	const uint8_t *key;
	uintptr_t mr_start, mr_end;
	rte_mbuf **slots;
	uint32_t seg_off, lkey_be, mtu, mask;
	bool full;
	mbuf_writer(const run_args &a, const uint8_t *b)
		: key(a.key), mr_start(a.mr_start), mr_end(a.mr_end), slots(a.slots), seg_off(a.seg_off),
		  lkey_be(a.lkey_be), mtu(a.mtu), mask(a.mask), full(a.full)
	{
		memcpy(blk, b, wqe_bb);
	}
	__rte_always_inline bool match(const send_wr *wr) const
	{
		if (wr->flags != 0 || memcmp(wr, key, 16) != 0)
			return false;
		const rte_mbuf *m = wr->mbuf;
		const uintptr_t addr = rte_pktmbuf_mtod(m, uintptr_t);
		const uint32_t len = m->data_len;
		/* len - 1 < mtu: 1 <= len <= mtu in one compare. */
		return m->nb_segs == 1 && len - 1 < mtu && ibv::lkey_map::inside(mr_start, mr_end, addr, len);
	}
	__rte_always_inline uint32_t write(uint8_t *ctrl, const send_wr *wr, uint32_t pi) const
	{
		rte_mbuf *m = wr->mbuf;
		const uint32_t len = m->data_len;
		if (likely(full))
			memcpy(ctrl, blk, wqe_bb);
		else
			memcpy(ctrl, blk, 16 + compact_av_len);
		const uint16_t idx = htobe16(uint16_t(pi));
		memcpy(ctrl + 1, &idx, 2);
		auto *d = reinterpret_cast<mlx5_wqe_data_seg *>(ctrl + seg_off);
		d->byte_count = htobe32(len);
		d->lkey = lkey_be;
		d->addr = htobe64(uint64_t(rte_pktmbuf_mtod(m, uintptr_t)));
		slots[pi & mask] = m;
		return len;
	}
};

} // namespace rdgram::mlx5

#endif
