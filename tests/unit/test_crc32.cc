// Exhaustive check of rdgram::crc32_ieee (and every compiled-in back end)
// against zlib's crc32().  Needs gtest_main and -lz only (no DPDK).
#include "rdgram/crc32.h"
#include "rdgram/crc32_choose.h"

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern char **environ;

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
#if defined(RDGRAM_CRC32_HAVE_AVX2)
    if (rdgram::crc32_detail::cpu_has_avx2())
        v.push_back({"avx2", [](const void *b, size_t l) { return rdgram::crc32_detail::crc32_avx2(b, l); }});
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

// ---------------------------------------------------------------------------
// Run-time dispatch (cpu_isa.h, crc32_select / crc32_ieee(kernel, ...)): what
// a generic build runs, and what a test forces on an AVX-512 host.
// ---------------------------------------------------------------------------
using rdgram::cpu_isa;
using rdgram::crc32_kernel;

cpu_isa level_of(crc32_kernel k) {
    switch (k) {
    case crc32_kernel::avx512: return cpu_isa::avx512;
    case crc32_kernel::avx2: return cpu_isa::avx2;
    case crc32_kernel::pclmul: return cpu_isa::sse;
    case crc32_kernel::table: break;
    }
    return cpu_isa::portable;
}

constexpr cpu_isa kLevels[] = {cpu_isa::portable, cpu_isa::sse, cpu_isa::avx2, cpu_isa::avx512};

// The kernels crc32_select hands out on this CPU, one per distinct answer.
std::vector<crc32_kernel> selectable_kernels() {
    std::vector<crc32_kernel> v;
    for (cpu_isa cap : kLevels) {
        const crc32_kernel k = rdgram::crc32_select(cap);
        if (v.empty() || v.back() != k) v.push_back(k);
    }
    return v;
}

TEST(CpuIsa, NamesRoundTrip) {
    for (cpu_isa l : kLevels) {
        cpu_isa got = cpu_isa::avx2;
        EXPECT_TRUE(rdgram::cpu_isa_parse(rdgram::cpu_isa_name(l), &got)) << rdgram::cpu_isa_name(l);
        EXPECT_EQ(got, l);
    }
    cpu_isa got = cpu_isa::sse;
    for (const char *bad : {"", "AVX2", "avx", "avx512f", "native", "sse4"})
        EXPECT_FALSE(rdgram::cpu_isa_parse(bad, &got)) << bad;
    EXPECT_FALSE(rdgram::cpu_isa_parse(nullptr, &got));
    EXPECT_EQ(got, cpu_isa::sse);
    EXPECT_LE(rdgram::cpu_isa_max(), rdgram::cpu_isa_of_cpu());
}

// crc32_select never answers above its cap, and below it takes the best the
// CPU has: on this project's AVX-512 + VPCLMULQDQ hosts all four kernels
// are reachable (avx2 under a cap of avx2, as on a Zen 3).
TEST(Crc32Dispatch, SelectFollowsCapAndCpu) {
    const cpu_isa max = rdgram::cpu_isa_max();
    for (cpu_isa cap : kLevels) {
        const crc32_kernel k = rdgram::crc32_select(cap);
        SCOPED_TRACE(std::string("cap ") + rdgram::cpu_isa_name(cap) + " -> " + rdgram::crc32_kernel_name(k));
        EXPECT_LE(level_of(k), cap);
        EXPECT_LE(level_of(k), max);
#if defined(RDGRAM_CRC32_HAVE_AVX512)
        const bool avx512 = rdgram::crc32_detail::cpu_has_avx512() && max >= cpu_isa::avx512;
        EXPECT_EQ(k == crc32_kernel::avx512, avx512 && cap >= cpu_isa::avx512);
#endif
#if defined(RDGRAM_CRC32_HAVE_AVX2)
        if (k != crc32_kernel::avx512) {
            const bool avx2 = rdgram::crc32_detail::cpu_has_avx2() && max >= cpu_isa::avx2;
            EXPECT_EQ(k == crc32_kernel::avx2, avx2 && cap >= cpu_isa::avx2);
        }
#endif
#if defined(RDGRAM_CRC32_HAVE_PCLMUL)
        if (k != crc32_kernel::avx512 && k != crc32_kernel::avx2) {
            EXPECT_EQ(k == crc32_kernel::pclmul,
                      rdgram::crc32_detail::cpu_has_pclmul() && cap >= cpu_isa::sse && max >= cpu_isa::sse);
        }
#endif
    }
    EXPECT_EQ(rdgram::crc32_select(cpu_isa::portable), crc32_kernel::table);
    if (std::getenv("RDGRAM_CPU_MAX") == nullptr && rdgram::cpu_isa_of_cpu() >= cpu_isa::avx512 &&
        __builtin_cpu_supports("vpclmulqdq")) {
        EXPECT_EQ(selectable_kernels().size(), 4u) << "an AVX-512 + VPCLMULQDQ CPU reaches every kernel";
    }
}

// Every selectable kernel, through the dispatching entry points a data path
// uses (crc32_ieee(kernel, ...) and crc32_with), gives zlib's CRC, so all of
// them the same bytes: random buffers of every length up to 1600 (the ICRC's
// range: the RoCEv2 header plus an MTU of payload) and sampled jumbo
// lengths, each at a random alignment mod 64.
TEST(Crc32Dispatch, EveryKernelByteIdentical) {
    const auto kernels = selectable_kernels();
    std::string names;
    for (crc32_kernel k : kernels) names += std::string(rdgram::crc32_kernel_name(k)) + " ";
    std::printf("kernels crc32_select reaches here: %s(cpu_isa_max %s)\n", names.c_str(),
                rdgram::cpu_isa_name(rdgram::cpu_isa_max()));
    constexpr size_t kMax = 9000;
    const auto data = random_bytes(kMax + 128, 0x1CEC0DEu);
    std::mt19937 rng(4791);
    std::vector<size_t> lens;
    for (size_t len = 0; len <= 1600; ++len) lens.push_back(len);
    for (size_t len = 1601; len <= kMax; len += 1 + rng() % 97) lens.push_back(len);
    size_t failures = 0;
    for (size_t len : lens) {
        const uint8_t *p = data.data() + rng() % 64;
        const uint32_t want = zlib_crc(p, len);
        for (crc32_kernel k : kernels) {
            const uint32_t a = rdgram::crc32_ieee(k, p, len);
            const uint32_t b = rdgram::crc32_with(
                k, [&](auto c) { return rdgram::crc32_ieee_k<decltype(c)::value>(p, len); });
            if ((a != want || b != want) && ++failures <= 10)
                ADD_FAILURE() << rdgram::crc32_kernel_name(k) << " len=" << len << std::hex << " got=0x" << a
                              << "/0x" << b << " want=0x" << want;
        }
    }
    EXPECT_EQ(failures, 0u);
}

// RDGRAM_CPU_MAX caps the process: this test runs itself once per value
// (cpu_isa_max is computed once per process), and the child checks what it
// got. A value that is not a level's name is ignored.
TEST(CpuIsa, EnvCapHonoured) {
    for (const char *cap : {"portable", "sse", "avx2", "avx512", "bogus"}) {
        SCOPED_TRACE(cap);
        std::vector<std::string> env;
        for (char **e = environ; *e != nullptr; ++e)
            if (std::strncmp(*e, "RDGRAM_CPU_MAX=", 15) != 0 && std::strncmp(*e, "GTEST_", 6) != 0)
                env.emplace_back(*e);
        env.push_back(std::string("RDGRAM_CPU_MAX=") + cap);
        env.push_back("RDGRAM_TEST_CPU_CHILD=1");
        std::vector<char *> envp;
        for (auto &e : env) envp.push_back(e.data());
        envp.push_back(nullptr);
        std::string self = "/proc/self/exe", filter = "--gtest_filter=CpuIsaChild.*";
        char *argv[] = {self.data(), filter.data(), nullptr};
        pid_t pid;
        ASSERT_EQ(posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()), 0);
        int st = 0;
        ASSERT_EQ(waitpid(pid, &st, 0), pid);
        EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
    }
}

TEST(CpuIsaChild, UnderEnvCap) {
    if (std::getenv("RDGRAM_TEST_CPU_CHILD") == nullptr) GTEST_SKIP() << "run by CpuIsa.EnvCapHonoured";
    const char *env = std::getenv("RDGRAM_CPU_MAX");
    ASSERT_NE(env, nullptr);
    cpu_isa cap = cpu_isa::avx512;
    const bool valid = rdgram::cpu_isa_parse(env, &cap);
    cpu_isa got;
    EXPECT_EQ(rdgram::cpu_isa_env_cap(&got), valid);
    EXPECT_EQ(got, valid ? cap : cpu_isa::avx512);
    EXPECT_EQ(rdgram::cpu_isa_max(), rdgram::cpu_isa_min(rdgram::cpu_isa_of_cpu(), cap));
    const crc32_kernel k = rdgram::crc32_select();
    EXPECT_LE(level_of(k), cap) << rdgram::crc32_kernel_name(k);
    const auto data = random_bytes(300, 5u);
    EXPECT_EQ(rdgram::crc32_ieee(k, data.data(), 300), zlib_crc(data.data(), 300));
#if !defined(RDGRAM_CRC32_STATIC_AVX512)
    // Without AVX-512 in the build's -march, crc32_ieee(buf, len) is
    // crc32_select's kernel too.
    EXPECT_EQ(std::string(rdgram::crc32_ieee_backend()).rfind(rdgram::crc32_kernel_name(k), 0), 0u)
        << rdgram::crc32_ieee_backend();
#endif
    EXPECT_EQ(rdgram::crc32_ieee(data.data(), 300), zlib_crc(data.data(), 300));
    // A valid cap forces the process's ICRC plan, not measured: that
    // kernel at every length. (An invalid one is ignored: measured.)
    const rdgram::crc32_plan &p = rdgram::crc32_chosen();
    if (!valid) return;
    EXPECT_FALSE(p.measured);
    for (crc32_kernel x : p.kernel) EXPECT_EQ(x, k);
    EXPECT_NE(rdgram::crc32_plan_describe(p).find("forced by RDGRAM_CPU_MAX"), std::string::npos)
        << rdgram::crc32_plan_describe(p);
}

// crc32_measure: a size class's kernel is the one it timed fastest there,
// among kernels this CPU runs under the cap; each answer is zlib's.
TEST(Crc32Choose, FastestPerClassOfWhatRuns) {
    using rdgram::crc32_plan;
    EXPECT_EQ(crc32_plan::class_of(1), 0u);
    EXPECT_EQ(crc32_plan::class_of(128), 0u);
    EXPECT_EQ(crc32_plan::class_of(129), 1u);
    EXPECT_EQ(crc32_plan::class_of(256), 1u);
    EXPECT_EQ(crc32_plan::class_of(257), 2u);
    EXPECT_EQ(crc32_plan::class_of(2048), 4u);
    EXPECT_EQ(crc32_plan::class_of(2049), 5u);
    EXPECT_EQ(crc32_plan::class_of(1 << 20), 5u);
    for (cpu_isa cap : {cpu_isa::avx512, cpu_isa::avx2, cpu_isa::sse, cpu_isa::portable}) {
        const crc32_plan p = rdgram::crc32_measure(cap);
        SCOPED_TRACE(std::string("cap ") + rdgram::cpu_isa_name(cap) + ": " + rdgram::crc32_plan_describe(p));
        std::printf("cap %s: %s\n", rdgram::cpu_isa_name(cap), rdgram::crc32_plan_describe(p).c_str());
        const cpu_isa lim = rdgram::cpu_isa_min(cap, rdgram::cpu_isa_max());
        for (unsigned c = 0; c < crc32_plan::classes; c++) {
            const crc32_kernel k = p.kernel[c];
            EXPECT_LE(level_of(k), lim) << rdgram::crc32_kernel_name(k);
            const auto data = random_bytes(crc32_plan::class_len[c] + 3, 7u + c);
            EXPECT_EQ(rdgram::crc32_ieee(k, data.data(), data.size()), zlib_crc(data.data(), data.size()));
            if (!p.measured) continue;
            EXPECT_GT(p.ns[c][unsigned(k)], 0.0f);
            for (unsigned o = 0; o < 4; o++) {
                if (p.ns[c][o] > 0) {
                    EXPECT_LE(p.ns[c][unsigned(k)], p.ns[c][o]) << "class " << c << " kernel " << o;
                }
            }
        }
        if (lim == cpu_isa::portable) {
            EXPECT_FALSE(p.measured);
            for (crc32_kernel k : p.kernel) EXPECT_EQ(k, crc32_kernel::table);
        }
    }
}

}  // namespace
