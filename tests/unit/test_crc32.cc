// Exhaustive check of rdgram::crc32_ieee (and every compiled-in back end)
// against zlib's crc32().  Needs gtest_main and -lz only (no DPDK).
#include "rdgram/crc32.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using CrcFn = uint32_t (*)(const void *, size_t);

struct Impl {
    const char *name;
    CrcFn fn;
};

std::vector<Impl> impls() {
    std::vector<Impl> v{{"crc32_ieee", [](const void *b, size_t l) { return rdgram::crc32_ieee(b, l); }},
                        {"table", [](const void *b, size_t l) { return rdgram::crc32_detail::crc32_table(b, l); }}};
#if defined(RDGRAM_CRC32_HAVE_PCLMUL)
    if (rdgram::crc32_detail::cpu_has_pclmul())
        v.push_back({"pclmul", [](const void *b, size_t l) { return rdgram::crc32_detail::crc32_pclmul(b, l); }});
#endif
#if defined(RDGRAM_CRC32_HAVE_AVX512)
    if (rdgram::crc32_detail::cpu_has_avx512())
        v.push_back({"avx512", [](const void *b, size_t l) { return rdgram::crc32_detail::crc32_avx512(b, l); }});
#endif
    return v;
}

uint32_t zlib_crc(const uint8_t *p, size_t len) {
    return static_cast<uint32_t>(::crc32(0L, p, static_cast<uInt>(len)));
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto &b : v) b = static_cast<uint8_t>(rng());
    return v;
}

TEST(Crc32, ReportsImplementations) {
    std::string names;
    for (const auto &i : impls()) names += std::string(i.name) + " ";
    std::printf("crc32 back ends under test: %s; crc32_ieee uses: %s\n", names.c_str(),
                rdgram::crc32_ieee_backend());
    EXPECT_GE(impls().size(), 2u);
}

TEST(Crc32, KnownVectors) {
    const char *s = "123456789";
    for (const auto &i : impls()) {
        EXPECT_EQ(i.fn(s, 9), 0xCBF43926u) << i.name;
        EXPECT_EQ(i.fn(s, 0), 0u) << i.name;
        EXPECT_EQ(i.fn(nullptr, 0), 0u) << i.name;
        const uint8_t zero = 0;
        EXPECT_EQ(i.fn(&zero, 1), 0xD202EF8Du) << i.name;
    }
    const char *fox = "The quick brown fox jumps over the lazy dog";
    EXPECT_EQ(rdgram::crc32_ieee(fox, std::strlen(fox)), 0x414FA339u);
}

// Every length 0..2048 at every alignment offset 0..15, random data.
TEST(Crc32, AllLengthsAllAlignments) {
    constexpr size_t kMax = 2048;
    const auto data = random_bytes(kMax + 64, 0xC0FFEEu);
    for (const auto &i : impls()) {
        size_t failures = 0;
        for (size_t off = 0; off < 16; ++off) {
            for (size_t len = 0; len <= kMax; ++len) {
                const uint8_t *p = data.data() + off;
                const uint32_t want = zlib_crc(p, len);
                const uint32_t got = i.fn(p, len);
                if (got != want && ++failures <= 10)
                    ADD_FAILURE() << i.name << " len=" << len << " off=" << off << std::hex
                                  << " got=0x" << got << " want=0x" << want;
            }
        }
        EXPECT_EQ(failures, 0u) << i.name;
    }
}

// Structured data (all-zero, all-0xFF, single set bit) exercises the init /
// padding handling, where random data could mask a cancelling error.
TEST(Crc32, StructuredData) {
    for (const auto &i : impls()) {
        for (size_t len = 0; len <= 300; ++len) {
            std::vector<uint8_t> z(len + 16, 0x00), f(len + 16, 0xFF);
            EXPECT_EQ(i.fn(z.data() + 3, len), zlib_crc(z.data() + 3, len)) << i.name << " zeros " << len;
            EXPECT_EQ(i.fn(f.data() + 5, len), zlib_crc(f.data() + 5, len)) << i.name << " ones " << len;
            for (size_t bit = 0; bit < len * 8; bit += 13) {
                z[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
                EXPECT_EQ(i.fn(z.data(), len), zlib_crc(z.data(), len)) << i.name << " bit " << bit;
                z[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
            }
        }
    }
}

// Sampled lengths up to 9000 (jumbo frames) plus the 0..65535 range ends.
TEST(Crc32, SampledLongLengths) {
    constexpr size_t kMax = 65535;
    const auto data = random_bytes(kMax + 64, 12345u);
    std::mt19937 rng(777);
    std::vector<size_t> lens;
    for (size_t len = 2049; len <= 9000; len += 1 + rng() % 23) lens.push_back(len);
    for (size_t len : {4095, 4096, 4097, 4200, 8191, 8192, 9000, 16384, 32767, 65534, 65535}) lens.push_back(len);
    for (const auto &i : impls()) {
        for (size_t len : lens) {
            const size_t off = rng() % 16;
            EXPECT_EQ(i.fn(data.data() + off, len), zlib_crc(data.data() + off, len))
                << i.name << " len=" << len << " off=" << off;
        }
    }
}

// Buffers that start exactly at the beginning / end exactly at the end of a
// readable page surrounded by PROT_NONE guard pages: any over-read (e.g. a
// non-masked 16/64-byte load) crashes the test.
TEST(Crc32, GuardPages) {
    const size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void *m = mmap(nullptr, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    uint8_t *page = static_cast<uint8_t *>(m) + pg;
    ASSERT_EQ(mprotect(m, pg, PROT_NONE), 0);
    ASSERT_EQ(mprotect(page + pg, pg, PROT_NONE), 0);
    const auto data = random_bytes(pg, 99u);
    std::memcpy(page, data.data(), pg);
    for (const auto &i : impls()) {
        for (size_t len = 0; len <= pg; len += (len < 600 ? 1 : 37)) {
            EXPECT_EQ(i.fn(page, len), zlib_crc(page, len)) << i.name << " head len=" << len;
            const uint8_t *tail = page + pg - len;
            EXPECT_EQ(i.fn(tail, len), zlib_crc(tail, len)) << i.name << " tail len=" << len;
        }
    }
    munmap(m, 3 * pg);
}

}  // namespace
