// rdgram/crc32.h - fast CRC-32 (IEEE 802.3 / zlib crc32) for short buffers.
//
//   uint32_t rdgram::crc32_ieee(const void *buf, size_t len)
//
// returns exactly zlib's crc32(0, buf, len): reflected polynomial 0xEDB88320,
// init 0xFFFFFFFF, final xor 0xFFFFFFFF.  It is the RoCEv2 ICRC kernel, so it
// is tuned for 60..200-byte buffers rather than for bulk throughput.
//
// Back ends (x86-64, GCC/Clang):
//   * avx512: 512-bit VPCLMULQDQ folding, masked loads for the ragged head
//     (needs AVX512F/BW/VL + VPCLMULQDQ + PCLMUL).
//   * avx2:   256-bit (VEX) VPCLMULQDQ folding, for CPUs that have the
//     256-bit carry-less multiply but no AVX-512 (AMD Zen 3, Intel Alder
//     Lake and later client cores) (needs AVX2 + VPCLMULQDQ + PCLMUL).
//   * pclmul: 128-bit PCLMULQDQ folding (needs PCLMUL, SSSE3, SSE4.1).
//   * table:  portable slicing-by-8 (every other target).
// Selection: if the including TU is compiled with the ISA enabled
// (__AVX512F__ && __AVX512BW__ && __AVX512VL__ && __VPCLMULQDQ__, resp.
// __PCLMUL__ && __SSE4_1__ && __SSSE3__), crc32_ieee(buf, len) uses that
// back end, fully inlined (a native build on an AVX-512 host).  Otherwise
// the SIMD kernels are still compiled (function-level
// __attribute__((target))) and crc32_ieee(buf, len) uses the kernel
// crc32_select() picked at its first call (cpu_isa.h: the CPU's level,
// capped by RDGRAM_CPU_MAX), so a generic (x86-64-v2) build runs the
// AVX-512 kernel where the CPU has it and the table where it lacks PCLMUL.
// A data path chooses once per queue instead: crc32_select() at set-up,
// then crc32_ieee(kernel, buf, len) (a switch on the queue's own field) or
// crc32_with(kernel, f) (the kernel a compile-time constant in f, one
// switch per burst).  Defining RDGRAM_CRC32_NO_AVX512 / RDGRAM_CRC32_NO_AVX2
// / RDGRAM_CRC32_NO_PCLMUL before including removes the corresponding
// kernels.  All compiled kernels are reachable as
// rdgram::crc32_detail::crc32_{table,pclmul,avx2,avx512} (guarded by
// RDGRAM_CRC32_HAVE_{PCLMUL,AVX2,AVX512} and cpu_has_{pclmul,avx2,avx512}())
// so a test can check each of them.
//
// Every function here is `static inline` on purpose: the body depends on the
// ISA macros of the including translation unit, so giving it internal linkage
// keeps the linker from merging, say, an AVX-512 body into a TU compiled for a
// lesser target (which an `inline` function with external linkage would allow).
//
// ---------------------------------------------------------------------------
// Algorithm (why it is fast for short buffers)
// ---------------------------------------------------------------------------
// Reference: V. Gopal et al., "Fast CRC Computation for Generic Polynomials
// Using PCLMULQDQ Instruction", Intel white paper 323102 (2009), [WP] below.
// Section references are by topic ([WP]-Fold: the fold-by-4 / fold-by-1
// constants k1..k4, "fold a 128-bit value forward by D bits as
// lo*(x^(D+32) mod P) ^ hi*(x^(D-32) mod P)"; [WP]-Barrett: the reduction with
// mu and P'; [WP]-Reflect: its treatment of bit-reflected CRCs, where
// constants are the reflected remainders shifted left by one).
//
// Notation: G(x) = 0x104C11DB7 (normal form), arithmetic in GF(2)[x].  Data
// are bit-reflected: in a 128-bit lane, bit j (j = 0 is the LSB of byte 0)
// is the coefficient of x^(127-j); PCLMULQDQ of reflected 64-bit operands
// A, B yields the lane of A*B*x (the product comes out one bit "short"),
// hence every multiplier below is the 33-bit value rev33(x^n mod G), i.e.
// [WP]-Reflect's "reflected remainder << 1".
//
// 1. The buffer is cut into 16-byte blocks aligned to its END; the first
//    block holds the 1..16 leftover bytes with zero padding in front (leading
//    zeros do not change the message polynomial).  The CRC pre-inversion is
//    xored into message bytes 0..3 (which may straddle the first two blocks).
// 2. Block B_i, d = n-1-i blocks before the end, contributes B_i * x^(128d)
//    to M(x).  Instead of [WP]-Fold's serial "fold by 128 bits, add next
//    block" chain, every block is multiplied independently by its own
//    distance constants ([WP]-Fold generalised from one fold distance to any
//    distance 128*d): low qword by x^(128d+96) mod G, high qword by
//    x^(128d+32) mod G.  The extra x^64 relative to [WP]'s x^(D+32), x^(D-32)
//    makes every product land in lane bits 0..95 already in the form the
//    final Barrett step wants, so the products are simply xored together:
//    no dependency between blocks, latency = one multiply plus an xor tree.
//    Buffers up to 512 bytes are done entirely this way (32 distances).
// 3. Longer buffers run [WP]-Fold's parallel loop (4 accumulators; fold
//    distance 512 bits for xmm, 1024 bits for 4 ymm, 2048 bits for 4 zmm)
//    and then hand the accumulators and the last < 4 blocks/groups to
//    step 2.
// 4. The xor Y (lane bits 0..95, poly(Y) = Z*x^32, Z == M'(x)*x^32 mod G,
//    M' = message with pre-inversion) is reduced by ONE Barrett step taken
//    from 96 bits instead of [WP]-Barrett's 64 (which removes [WP]'s
//    128->64 and 64->32 folds): q = floor(floor(Z/x^32) * mu / x^63) with
//    mu = floor(x^95/G) (64 bits, so q is simply the high qword of one
//    64x64 carry-less product; exact because deg Z <= 95), then
//    CRC = (Z + q*G) mod x^32.  Two dependent PCLMULQDQs.
//
// The constants were derived with GF(2) polynomial arithmetic and the whole
// scheme (lane layout, reflection, Barrett) was modelled bit-exactly against
// zlib in Python before transcription.  Cross-check against the [WP]-style
// reflected CRC-32 constants used by Linux crc32-pclmul / Chromium zlib
// crc32_simd: fold-by-512 gives k1 = 0x154442bd4, k2 = 0x1c6e41596;
// fold-by-128 gives k3 = 0x1751997d0 (== kFoldY d=1 hi), k4 = 0xccaa009e
// (== kFoldY d=0 lo); P' = 0x1DB710641 (== kPoly).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "rdgram/cpu_isa.h"

#if !defined(RDGRAM_CRC32_NO_PCLMUL) && (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define RDGRAM_CRC32_HAVE_PCLMUL 1
#define RDGRAM_CRC32_TARGET_PCLMUL __attribute__((target("pclmul,ssse3,sse4.1")))
#if defined(__PCLMUL__) && defined(__SSSE3__) && defined(__SSE4_1__)
#define RDGRAM_CRC32_STATIC_PCLMUL 1
#endif
#if !defined(RDGRAM_CRC32_NO_AVX512)
#define RDGRAM_CRC32_HAVE_AVX512 1
#define RDGRAM_CRC32_TARGET_AVX512 \
    __attribute__((target("pclmul,ssse3,sse4.1,avx2,avx512f,avx512bw,avx512vl,vpclmulqdq")))
#if defined(RDGRAM_CRC32_STATIC_PCLMUL) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512VL__) && defined(__VPCLMULQDQ__)
#define RDGRAM_CRC32_STATIC_AVX512 1
#endif
#endif
#if !defined(RDGRAM_CRC32_NO_AVX2)
#define RDGRAM_CRC32_HAVE_AVX2 1
// VEX-encoded VPCLMULQDQ on ymm: the vpclmulqdq feature with AVX, no
// AVX-512 (GCC's vpclmulqdqintrin.h gates _mm256_clmulepi64_epi128 on
// "vpclmulqdq,avx").
#define RDGRAM_CRC32_TARGET_AVX2 __attribute__((target("pclmul,ssse3,sse4.1,avx2,vpclmulqdq")))
#endif
#endif

#if defined(RDGRAM_CRC32_STATIC_AVX512)
#define RDGRAM_CRC32_STATIC_AVX512_NAME "avx512 (static)"
#else
#define RDGRAM_CRC32_STATIC_AVX512_NAME "avx512 (runtime dispatch)"
#endif
#if defined(RDGRAM_CRC32_STATIC_PCLMUL)
#define RDGRAM_CRC32_STATIC_PCLMUL_NAME "pclmul (static)"
#else
#define RDGRAM_CRC32_STATIC_PCLMUL_NAME "pclmul (runtime dispatch)"
#endif

namespace rdgram {
namespace crc32_detail {

// ---------------------------------------------------------------------------
// Portable path: slicing-by-8 (Intel "Slicing-by-8", Kounavis & Berry 2005).
// Tables are computed at compile time (constexpr): no static constructor.
// ---------------------------------------------------------------------------
using SliceTables = std::array<std::array<uint32_t, 256>, 8>;

constexpr SliceTables make_slice_tables() {
    SliceTables t{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        t[0][i] = c;
    }
    for (int s = 1; s < 8; ++s)
        for (uint32_t i = 0; i < 256; ++i)
            t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
    return t;
}

alignas(64) inline constexpr SliceTables kSlice8 = make_slice_tables();

// Raw (no pre/post inversion) table CRC update.
static inline uint32_t crc32_table_update(uint32_t crc, const uint8_t *p, size_t len) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (len >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        const uint32_t lo = crc ^ static_cast<uint32_t>(w);
        const uint32_t hi = static_cast<uint32_t>(w >> 32);
        crc = kSlice8[7][lo & 0xFF] ^ kSlice8[6][(lo >> 8) & 0xFF] ^
              kSlice8[5][(lo >> 16) & 0xFF] ^ kSlice8[4][lo >> 24] ^
              kSlice8[3][hi & 0xFF] ^ kSlice8[2][(hi >> 8) & 0xFF] ^
              kSlice8[1][(hi >> 16) & 0xFF] ^ kSlice8[0][hi >> 24];
        p += 8;
        len -= 8;
    }
#endif
    while (len--) crc = kSlice8[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

static inline uint32_t crc32_table(const void *buf, size_t len) {
    return ~crc32_table_update(0xFFFFFFFFu, static_cast<const uint8_t *>(buf), len);
}

#if defined(RDGRAM_CRC32_HAVE_PCLMUL)
// ---------------------------------------------------------------------------
// Constants (all reflected; "x^n" means rev33(x^n mod G), see header comment).
// ---------------------------------------------------------------------------
// kFoldY[2j], kFoldY[2j+1]: (lo, hi) qword multipliers for a 16-byte block
// that lies d = 31 - j blocks before the end of the buffer: lo qword *
// x^(128d+96), hi qword * x^(128d+32) ([WP]-Fold with fold distance
// 128*d, times an extra x^64 so that the product is directly the 96-bit input
// of the final Barrett step).  Stored in DESCENDING d so that
// four consecutive blocks (distances 4m+3..4m, the lanes of one zmm) are one
// aligned 64-byte load.  Cross-check with the usual [WP] k's: d=0 lo == k4 (0xccaa009e),
// d=1 hi == k3 (0x1751997d0), d=4 hi == k1 (0x154442bd4), d=3 lo == k2.
alignas(64) inline constexpr uint64_t kFoldY[64] = {
    0x1d741f35c, 0x0398e2ff2,  // d=31: x^4064, x^4000
    0x1cf247394, 0x119adc226,  // d=30: x^3936, x^3872
    0x145972f08, 0x144c76d92,  // d=29: x^3808, x^3744
    0x1b631f204, 0x0ad0d2bb2,  // d=28: x^3680, x^3616
    0x0cd669a40, 0x13484efdc,  // d=27: x^3552, x^3488
    0x0f9d9c7ee, 0x04b700aa8,  // d=26: x^3424, x^3360
    0x0eea395c4, 0x150fc8004,  // d=25: x^3296, x^3232
    0x04470ac44, 0x1f79525b0,  // d=24: x^3168, x^3104
    0x0d31343ea, 0x07eaed122,  // d=23: x^3040, x^2976
    0x09b9bdbd0, 0x11e6a95a2,  // d=22: x^2912, x^2848
    0x12af2c15a, 0x1ad568056,  // d=21: x^2784, x^2720
    0x1c712203a, 0x00e9bd5cc,  // d=20: x^2656, x^2592
    0x115b87256, 0x032b0733c,  // d=19: x^2528, x^2464
    0x0ff6f2fc2, 0x1f7228078,  // d=18: x^2400, x^2336
    0x1aaa44c18, 0x0a749e894,  // d=17: x^2272, x^2208
    0x16269a506, 0x11542778a,  // d=16: x^2144, x^2080
    0x1322d1430, 0x1db06f64c,  // d=15: x^2016, x^1952
    0x1c47d2a9c, 0x19159bb02,  // d=14: x^1888, x^1824
    0x125f17dfc, 0x1b35adb0e,  // d=13: x^1760, x^1696
    0x1e7146aac, 0x1821d8bc0,  // d=12: x^1632, x^1568
    0x12e958ac4, 0x1816ab61c,  // d=11: x^1504, x^1440
    0x10aae2566, 0x0e3543be0,  // d=10: x^1376, x^1312
    0x14b57d3f0, 0x1fdc60a7c,  // d= 9: x^1248, x^1184
    0x03f41287a, 0x1e88ef372,  // d= 8: x^1120, x^1056
    0x14a7fe880, 0x1ea89367e,  // d= 7: x^992,  x^928
    0x1d7cfc6ac, 0x0df068dc2,  // d= 6: x^864,  x^800
    0x18cb44e58, 0x1c7569e54,  // d= 5: x^736,  x^672
    0x0ae0b5394, 0x154442bd4,  // d= 4: x^608,  x^544
    0x1c6e41596, 0x03db1ecdc,  // d= 3: x^480,  x^416
    0x174359406, 0x0f1da05aa,  // d= 2: x^352,  x^288
    0x15a546366, 0x1751997d0,  // d= 1: x^224,  x^160
    0x0ccaa009e, 0x1db710640,  // d= 0: x^96,   x^32
};
inline constexpr int kFoldYMaxD = 31;

// Lane-to-lane fold constants ([WP]-Fold as written there:
// lo * x^(D+32), hi * x^(D-32)).  D = 512: 4 xmm accumulators of 16 bytes;
// these equal the usual [WP] k1, k2.  D = 2048: 4 zmm accumulators of 64 bytes.
alignas(16) inline constexpr uint64_t kFold512[2] = {0x154442bd4, 0x1c6e41596};   // x^544, x^480
alignas(16) inline constexpr uint64_t kFold2048[2] = {0x11542778a, 0x1322d1430};  // x^2080, x^2016

// Barrett constants ([WP]-Barrett, adapted to a 96-bit input):
//   kMu  = rev64(floor(x^95 / G))   (deg 63: q = high qword of T*mu, exact)
//   kPoly = rev33(G) = 0x1DB710641  ([WP]-Barrett/-Reflect P' for CRC-32)
inline constexpr uint64_t kMu = 0xb4e5b025f7011641ull;
inline constexpr uint64_t kPoly = 0x1db710641ull;

// Pre-inversion pattern: 0xFF at bytes 16..19.  loadu(kInitMask + 16 + r)
// puts 0xFF at bytes [0, 3-r] (the part of the CRC init that spills from a
// first block of r < 4 bytes into the second block), zero for r >= 4.
alignas(16) inline constexpr uint8_t kInitMask[48] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};

// PSHUFB window: loadu(kShiftRight + r) moves bytes 0..r-1 to 16-r..15 and
// zeroes bytes 0..15-r (0x80 entries), i.e. builds the zero-padded first block.
alignas(16) inline constexpr uint8_t kShiftRight[32] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

// zlib crc32 of L zero bytes, L = 0..15: the contribution of the 0xFFFFFFFF
// init plus the final inversion for an L-byte message, so that for short
// messages the init is a plain xor after the reduction
// (crc(M) = rawcrc(M) ^ crc(0^L), CRC linearity).
inline constexpr uint32_t kZeroCrc[16] = {
    0x00000000, 0xd202ef8d, 0x41d912ff, 0xff41d912, 0x2144df1c, 0xc622f71d,
    0xb1c2a1a3, 0x9d6cdf7e, 0x6522df69, 0xe60914ae, 0xe38a6876, 0x6b87b1ec,
    0x7bd5c66f, 0x0f744682, 0xd1bb79c7, 0xd7d303e7};

RDGRAM_CRC32_TARGET_PCLMUL static inline __m128i kfoldy_x(int d) {  // (lo, hi) pair for block distance d
    return _mm_load_si128(reinterpret_cast<const __m128i *>(&kFoldY[2 * (kFoldYMaxD - d)]));
}

// One block -> its 96-bit Barrett-ready contribution (lane bits 0..95).
RDGRAM_CRC32_TARGET_PCLMUL static inline __m128i fold_x(__m128i v, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(v, k, 0x00), _mm_clmulepi64_si128(v, k, 0x11));
}

// Final step: Y (lane bits 0..95 == Z*x^32) -> raw 32-bit CRC (no inversion).
RDGRAM_CRC32_TARGET_PCLMUL static inline uint32_t barrett96(__m128i y) {
    const __m128i c = _mm_set_epi64x(static_cast<long long>(kPoly), static_cast<long long>(kMu));
    const __m128i q = _mm_clmulepi64_si128(y, c, 0x00);   // q = hi64(T * mu), T = low qword
    const __m128i qg = _mm_clmulepi64_si128(q, c, 0x10);  // q * G, low 32 coeffs in dword 2
    return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(y, qg), 2));
}

RDGRAM_CRC32_TARGET_PCLMUL static inline __m128i loadu_x(const void *p) {
    return _mm_loadu_si128(static_cast<const __m128i *>(p));
}

// ---------------------------------------------------------------------------
// 128-bit PCLMULQDQ path.
// ---------------------------------------------------------------------------
RDGRAM_CRC32_TARGET_PCLMUL static inline uint32_t crc32_pclmul(const void *buf, size_t len) {
    const uint8_t *p = static_cast<const uint8_t *>(buf);
    if (len < 16) return crc32_table(buf, len);

    const size_t r = ((len - 1) & 15) + 1;  // bytes in the (zero-padded) first block
    const size_t n = (len + 15) >> 4;       // number of blocks
    // First block: pre-inversion on message bytes 0..3, then shift right.
    __m128i b0 = _mm_xor_si128(loadu_x(p), _mm_cvtsi32_si128(-1));
    b0 = _mm_shuffle_epi8(b0, loadu_x(kShiftRight + r));
    const __m128i spill = loadu_x(kInitMask + 16 + r);  // init bytes beyond a short block 0
    const uint8_t *q = p + r;                            // block 1
    if (n == 1) return ~barrett96(fold_x(b0, kfoldy_x(0)));

    if (n <= static_cast<size_t>(kFoldYMaxD) + 1) {
        // Direct: every block multiplied by its own distance constant.
        __m128i acc0 = fold_x(b0, kfoldy_x(static_cast<int>(n - 1)));
        __m128i acc1 = fold_x(_mm_xor_si128(loadu_x(q), spill), kfoldy_x(static_cast<int>(n - 2)));
        int d = static_cast<int>(n) - 3;
        q += 16;
        for (; d >= 1; d -= 2, q += 32) {
            acc0 = _mm_xor_si128(acc0, fold_x(loadu_x(q), kfoldy_x(d)));
            acc1 = _mm_xor_si128(acc1, fold_x(loadu_x(q + 16), kfoldy_x(d - 1)));
        }
        if (d == 0) acc0 = _mm_xor_si128(acc0, fold_x(loadu_x(q), kfoldy_x(0)));
        return ~barrett96(_mm_xor_si128(acc0, acc1));
    }

    // Long: 4 accumulators folded by 512 bits ([WP]-Fold), then direct.
    __m128i a0 = b0;
    __m128i a1 = _mm_xor_si128(loadu_x(q), spill);
    __m128i a2 = loadu_x(q + 16);
    __m128i a3 = loadu_x(q + 32);
    q += 48;
    size_t rem = n - 4;  // blocks not yet loaded
    const __m128i kf = _mm_load_si128(reinterpret_cast<const __m128i *>(kFold512));
    for (; rem >= 4; rem -= 4, q += 64) {
        a0 = _mm_xor_si128(fold_x(a0, kf), loadu_x(q));
        a1 = _mm_xor_si128(fold_x(a1, kf), loadu_x(q + 16));
        a2 = _mm_xor_si128(fold_x(a2, kf), loadu_x(q + 32));
        a3 = _mm_xor_si128(fold_x(a3, kf), loadu_x(q + 48));
    }
    const int rr = static_cast<int>(rem);  // 0..3
    __m128i acc0 = _mm_xor_si128(fold_x(a0, kfoldy_x(rr + 3)), fold_x(a1, kfoldy_x(rr + 2)));
    __m128i acc1 = _mm_xor_si128(fold_x(a2, kfoldy_x(rr + 1)), fold_x(a3, kfoldy_x(rr)));
    for (int m = 0; m < rr; ++m, q += 16)
        acc0 = _mm_xor_si128(acc0, fold_x(loadu_x(q), kfoldy_x(rr - 1 - m)));
    return ~barrett96(_mm_xor_si128(acc0, acc1));
}

#if defined(RDGRAM_CRC32_HAVE_AVX2)
// ---------------------------------------------------------------------------
// 256-bit VPCLMULQDQ path: the same math, 2 blocks (one "pair") per ymm.
// Pairs are aligned to the END of the buffer as the blocks are; the first
// pair holds the zero-padded block 0 and block 1, or, when the block count
// is odd, a zero block and block 0 (a zero block contributes nothing).
// AVX2 has no byte-masked load, so block 0 is built as in the pclmul path
// (a 16-byte load at the start and a PSHUFB), which needs len >= 16.
// ---------------------------------------------------------------------------
// Lane-to-lane fold for 4 ymm accumulators (128 bytes): D = 1024,
// lo * x^1056, hi * x^992 (kFoldY d=8 hi, d=7 lo).
alignas(16) inline constexpr uint64_t kFold1024[2] = {0x1e88ef372, 0x14a7fe880};  // x^1056, x^992

// Lanes for block distances 2m+1 (low lane: the earlier block) and 2m.
RDGRAM_CRC32_TARGET_AVX2 static inline __m256i kfoldy_y(int m) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(&kFoldY[2 * (kFoldYMaxD - (2 * m + 1))]));
}

RDGRAM_CRC32_TARGET_AVX2 static inline __m256i fold_y(__m256i v, __m256i k) {
    return _mm256_xor_si256(_mm256_clmulepi64_epi128(v, k, 0x00), _mm256_clmulepi64_epi128(v, k, 0x11));
}

RDGRAM_CRC32_TARGET_AVX2 static inline __m256i loadu_y(const void *p) {
    return _mm256_loadu_si256(static_cast<const __m256i *>(p));
}

RDGRAM_CRC32_TARGET_AVX2 static inline uint32_t reduce_y(__m256i acc) {
    return barrett96(_mm_xor_si128(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1)));
}

RDGRAM_CRC32_TARGET_AVX2 static inline uint32_t crc32_avx2(const void *buf, size_t len) {
    const uint8_t *p = static_cast<const uint8_t *>(buf);
    if (len < 16) return crc32_table(buf, len);

    const size_t r = ((len - 1) & 15) + 1;  // bytes in the (zero-padded) block 0
    const size_t n = (len + 15) >> 4;       // blocks
    const size_t np = (n + 1) >> 1;         // pairs, including the head
    __m128i b0 = _mm_xor_si128(loadu_x(p), _mm_cvtsi32_si128(-1));
    b0 = _mm_shuffle_epi8(b0, loadu_x(kShiftRight + r));
    const __m128i spill = loadu_x(kInitMask + 16 + r);  // init bytes beyond a short block 0
    const uint8_t *q = p + r;
    __m256i head, spill_y;  // spill_y: what the next pair loaded takes of the init
    if (n & 1) {
        head = _mm256_inserti128_si256(_mm256_setzero_si256(), b0, 1);
        spill_y = _mm256_zextsi128_si256(spill);
    } else {
        head = _mm256_inserti128_si256(_mm256_castsi128_si256(b0), _mm_xor_si128(loadu_x(q), spill), 1);
        spill_y = _mm256_setzero_si256();
        q += 16;
    }

    if (np <= static_cast<size_t>(kFoldYMaxD + 1) / 2) {  // <= 512 bytes: direct
        int m = static_cast<int>(np) - 1;
        __m256i acc = fold_y(head, kfoldy_y(m));
        if (--m >= 0) {
            acc = _mm256_xor_si256(acc, fold_y(_mm256_xor_si256(loadu_y(q), spill_y), kfoldy_y(m)));
            for (q += 32; --m >= 0; q += 32) acc = _mm256_xor_si256(acc, fold_y(loadu_y(q), kfoldy_y(m)));
        }
        return ~reduce_y(acc);
    }

    // Long: 4 ymm accumulators (128 bytes) folded by 1024 bits, then direct.
    __m256i a0 = head;
    __m256i a1 = _mm256_xor_si256(loadu_y(q), spill_y);
    __m256i a2 = loadu_y(q + 32);
    __m256i a3 = loadu_y(q + 64);
    q += 96;
    size_t rem = np - 4;
    const __m256i kf = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i *>(kFold1024)));
    for (; rem >= 4; rem -= 4, q += 128) {
        a0 = _mm256_xor_si256(fold_y(a0, kf), loadu_y(q));
        a1 = _mm256_xor_si256(fold_y(a1, kf), loadu_y(q + 32));
        a2 = _mm256_xor_si256(fold_y(a2, kf), loadu_y(q + 64));
        a3 = _mm256_xor_si256(fold_y(a3, kf), loadu_y(q + 96));
    }
    const int rr = static_cast<int>(rem);  // 0..3
    __m256i acc = _mm256_xor_si256(fold_y(a0, kfoldy_y(rr + 3)), fold_y(a1, kfoldy_y(rr + 2)));
    __m256i acc1 = _mm256_xor_si256(fold_y(a2, kfoldy_y(rr + 1)), fold_y(a3, kfoldy_y(rr)));
    for (int m = rr - 1; m >= 0; --m, q += 32) acc = _mm256_xor_si256(acc, fold_y(loadu_y(q), kfoldy_y(m)));
    return ~reduce_y(_mm256_xor_si256(acc, acc1));
}
#endif  // RDGRAM_CRC32_HAVE_AVX2

#if defined(RDGRAM_CRC32_HAVE_AVX512)
// GCC 12's AVX-512 intrinsics (shuffle/extract/cast) start from
// _mm*_undefined_*() and trip a false -Wmaybe-uninitialized (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// ---------------------------------------------------------------------------
// 512-bit VPCLMULQDQ path: same math, 4 blocks (one "group") per zmm.
// ---------------------------------------------------------------------------
RDGRAM_CRC32_TARGET_AVX512 static inline __m512i kfoldy_z(int m) {  // lanes for block distances 4m+3, 4m+2, 4m+1, 4m
    return _mm512_load_si512(&kFoldY[2 * (kFoldYMaxD - (4 * m + 3))]);
}

RDGRAM_CRC32_TARGET_AVX512 static inline __m512i fold_z(__m512i v, __m512i k) {
    return _mm512_xor_si512(_mm512_clmulepi64_epi128(v, k, 0x00),
                            _mm512_clmulepi64_epi128(v, k, 0x11));
}

// acc ^ fold(v, k) in one ternary-logic op (0x96 = a ^ b ^ c).
RDGRAM_CRC32_TARGET_AVX512 static inline __m512i fold_z_acc(__m512i acc, __m512i v, __m512i k) {
    return _mm512_ternarylogic_epi64(acc, _mm512_clmulepi64_epi128(v, k, 0x00),
                                     _mm512_clmulepi64_epi128(v, k, 0x11), 0x96);
}

RDGRAM_CRC32_TARGET_AVX512 static inline __m512i loadu_z(const void *p) { return _mm512_loadu_si512(p); }

// xor of the 4 lanes.  (In-register shuffles rather than 256-bit extracts:
// GCC 12's extract/cast intrinsics trip -Wmaybe-uninitialized.)
RDGRAM_CRC32_TARGET_AVX512 static inline uint32_t reduce_z(__m512i acc) {
    const __m512i t = _mm512_xor_si512(acc, _mm512_shuffle_i64x2(acc, acc, 0x4E));  // lanes ^ (lane ^ 2)
    const __m512i u = _mm512_xor_si512(t, _mm512_shuffle_i64x2(t, t, 0xB1));        // ^ (lane ^ 1)
    return barrett96(_mm512_castsi512_si128(u));
}

RDGRAM_CRC32_TARGET_AVX512 static inline uint32_t crc32_avx512(const void *buf, size_t len) {
    const uint8_t *p = static_cast<const uint8_t *>(buf);
    const uintptr_t pa = reinterpret_cast<uintptr_t>(buf);
    if (len < 16) {
        if (len == 0) return 0;
        // Masked load never touches (or faults on) the bytes before buf.
        const __m128i v = _mm_maskz_loadu_epi8(static_cast<__mmask16>(0xFFFFu << (16 - len)),
                                               reinterpret_cast<const void *>(pa + len - 16));
        return barrett96(fold_x(v, kfoldy_x(0))) ^ kZeroCrc[len];
    }

    // Groups of 64 bytes aligned to the end; the head group holds h = 1..64
    // bytes, zero-padded in front by a masked (fault-suppressing) load.
    const size_t h = ((len - 1) & 63) + 1;
    const size_t ng = (len + 63) >> 6;  // groups, including the head
    __m512i head = _mm512_maskz_loadu_epi8(~0ull << (64 - h), reinterpret_cast<const void *>(pa + h - 64));
    // Pre-inversion at message bytes 0..3 = head bytes 64-h..67-h; for h < 4
    // the bytes past the head go to the start of the next group.
    head = _mm512_xor_si512(head, _mm512_movm_epi8(0xFull << (64 - h)));
    const __m512i spill = _mm512_movm_epi8(h < 4 ? (0xFull >> h) : 0);
    const uint8_t *q = p + h;

    if (ng <= static_cast<size_t>(kFoldYMaxD + 1) / 4) {  // <= 512 bytes: direct
        int m = static_cast<int>(ng) - 1;
        __m512i acc = fold_z(head, kfoldy_z(m));
        if (--m >= 0) {
            acc = fold_z_acc(acc, _mm512_xor_si512(loadu_z(q), spill), kfoldy_z(m));
            for (q += 64; --m >= 0; q += 64) acc = fold_z_acc(acc, loadu_z(q), kfoldy_z(m));
        }
        return ~reduce_z(acc);
    }

    // Long: 4 zmm accumulators (256 bytes) folded by 2048 bits, then direct.
    __m512i a0 = head;
    __m512i a1 = _mm512_xor_si512(loadu_z(q), spill);
    __m512i a2 = loadu_z(q + 64);
    __m512i a3 = loadu_z(q + 128);
    q += 192;
    size_t rem = ng - 4;
    const __m512i kf = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i *>(kFold2048)));
    for (; rem >= 4; rem -= 4, q += 256) {
        a0 = fold_z_acc(loadu_z(q), a0, kf);
        a1 = fold_z_acc(loadu_z(q + 64), a1, kf);
        a2 = fold_z_acc(loadu_z(q + 128), a2, kf);
        a3 = fold_z_acc(loadu_z(q + 192), a3, kf);
    }
    const int rr = static_cast<int>(rem);  // 0..3
    __m512i acc = fold_z(a0, kfoldy_z(rr + 3));
    __m512i acc1 = fold_z(a1, kfoldy_z(rr + 2));
    acc = fold_z_acc(acc, a2, kfoldy_z(rr + 1));
    acc1 = fold_z_acc(acc1, a3, kfoldy_z(rr));
    for (int m = rr - 1; m >= 0; --m, q += 64) acc = fold_z_acc(acc, loadu_z(q), kfoldy_z(m));
    return ~reduce_z(_mm512_xor_si512(acc, acc1));
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif  // RDGRAM_CRC32_HAVE_AVX512
#endif  // RDGRAM_CRC32_HAVE_PCLMUL

// Run-time CPU checks: true when the kernel may be called on this CPU
// (whatever RDGRAM_CPU_MAX says; crc32_select applies the cap).
#if defined(RDGRAM_CRC32_HAVE_PCLMUL)
static inline bool cpu_has_pclmul() {
#if defined(RDGRAM_CRC32_STATIC_PCLMUL)
    return true;
#else
    return cpu_isa_of_cpu() >= cpu_isa::sse;  // SSSE3, SSE4.1, PCLMUL
#endif
}
#endif
#if defined(RDGRAM_CRC32_HAVE_AVX2)
static inline bool cpu_has_avx2() {
#if defined(__AVX2__) && defined(__VPCLMULQDQ__) && defined(RDGRAM_CRC32_STATIC_PCLMUL)
    return true;
#else
    // AVX2 (reported only when the OS enabled the ymm state) plus the
    // 256-bit carry-less multiply.
    return cpu_isa_of_cpu() >= cpu_isa::avx2 && __builtin_cpu_supports("vpclmulqdq");
#endif
}
#endif
#if defined(RDGRAM_CRC32_HAVE_AVX512)
static inline bool cpu_has_avx512() {
#if defined(RDGRAM_CRC32_STATIC_AVX512)
    return true;
#else
    // AVX-512 F/BW/VL (reported only when the OS enabled the zmm state)
    // plus the 512-bit carry-less multiply.
    return cpu_isa_of_cpu() >= cpu_isa::avx512 && __builtin_cpu_supports("vpclmulqdq");
#endif
}
#endif

}  // namespace crc32_detail

// The back ends by name; every value may be passed to crc32_ieee(kernel,
// ...), but only crc32_select's answer (or a kernel whose cpu_has_*() is
// true) may run on this CPU.
enum class crc32_kernel : uint8_t { table, pclmul, avx2, avx512 };

static inline const char *crc32_kernel_name(crc32_kernel k) {
    switch (k) {
    case crc32_kernel::avx512: return "avx512";
    case crc32_kernel::avx2: return "avx2";
    case crc32_kernel::pclmul: return "pclmul";
    case crc32_kernel::table: break;
    }
    return "table";
}

// The fastest kernel compiled in that this CPU runs, at a level of at most
// cap and of cpu_isa_max() (RDGRAM_CPU_MAX): avx512 needs cpu_isa::avx512
// and VPCLMULQDQ, avx2 cpu_isa::avx2 and VPCLMULQDQ, pclmul cpu_isa::sse.
// A few __builtin_cpu_supports loads: call it at set-up, keep the answer.
// (Any thread.)
static inline crc32_kernel crc32_select(cpu_isa cap = cpu_isa::avx512) {
    cap = cpu_isa_min(cap, cpu_isa_max());
#if defined(RDGRAM_CRC32_HAVE_AVX512)
    if (cap >= cpu_isa::avx512 && crc32_detail::cpu_has_avx512()) return crc32_kernel::avx512;
#endif
#if defined(RDGRAM_CRC32_HAVE_AVX2)
    if (cap >= cpu_isa::avx2 && crc32_detail::cpu_has_avx2()) return crc32_kernel::avx2;
#endif
#if defined(RDGRAM_CRC32_HAVE_PCLMUL)
    if (cap >= cpu_isa::sse && crc32_detail::cpu_has_pclmul()) return crc32_kernel::pclmul;
#endif
    return crc32_kernel::table;
}

// crc32_ieee with kernel K, a compile-time constant (a kernel not compiled
// in falls back to the next one that is).
template <crc32_kernel K>
static inline uint32_t crc32_ieee_k(const void *buf, size_t len) {
#if defined(RDGRAM_CRC32_HAVE_AVX512)
    if constexpr (K == crc32_kernel::avx512) return crc32_detail::crc32_avx512(buf, len);
#endif
#if defined(RDGRAM_CRC32_HAVE_AVX2)
    if constexpr (K == crc32_kernel::avx512 || K == crc32_kernel::avx2) return crc32_detail::crc32_avx2(buf, len);
#endif
#if defined(RDGRAM_CRC32_HAVE_PCLMUL)
    if constexpr (K != crc32_kernel::table) return crc32_detail::crc32_pclmul(buf, len);
#endif
    return crc32_detail::crc32_table(buf, len);
}

// f(std::integral_constant<crc32_kernel, k>{}): one switch, then f's
// calls of crc32_ieee_k<decltype(c)::value> are direct (a burst's loop
// inside f chooses once per burst, not per packet).
template <class F>
static inline decltype(auto) crc32_with(crc32_kernel k, F &&f) {
    switch (k) {
    case crc32_kernel::avx512: return f(std::integral_constant<crc32_kernel, crc32_kernel::avx512>{});
    case crc32_kernel::avx2: return f(std::integral_constant<crc32_kernel, crc32_kernel::avx2>{});
    case crc32_kernel::pclmul: return f(std::integral_constant<crc32_kernel, crc32_kernel::pclmul>{});
    case crc32_kernel::table: break;
    }
    return f(std::integral_constant<crc32_kernel, crc32_kernel::table>{});
}

// CRC-32 of buf[0..len) with kernel k (crc32_select's answer, kept by the
// caller: a queue's field, a predictable branch).
static inline uint32_t crc32_ieee(crc32_kernel k, const void *buf, size_t len) {
    return crc32_with(k, [&](auto c) { return crc32_ieee_k<decltype(c)::value>(buf, len); });
}

// CRC-32 (IEEE 802.3, as zlib crc32(0, buf, len)) of buf[0..len): the
// TU's compiled-in AVX-512 kernel, or crc32_select()'s kernel (chosen at
// the first call in this TU).
static inline uint32_t crc32_ieee(const void *buf, size_t len) {
#if defined(RDGRAM_CRC32_STATIC_AVX512)
    return crc32_detail::crc32_avx512(buf, len);
#else
    static const crc32_kernel k = crc32_select();
    return crc32_ieee(k, buf, len);
#endif
}

// Name of the back end crc32_ieee(buf, len) uses in this TU on this CPU
// (diagnostics).
static inline const char *crc32_ieee_backend() {
#if defined(RDGRAM_CRC32_STATIC_AVX512)
    return RDGRAM_CRC32_STATIC_AVX512_NAME;
#else
    switch (crc32_select()) {
    case crc32_kernel::avx512: return RDGRAM_CRC32_STATIC_AVX512_NAME;
    case crc32_kernel::avx2: return "avx2 (runtime dispatch)";
    case crc32_kernel::pclmul: return RDGRAM_CRC32_STATIC_PCLMUL_NAME;
    case crc32_kernel::table: break;
    }
    return "table";
#endif
}

}  // namespace rdgram
