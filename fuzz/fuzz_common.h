/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Shared pieces of the libFuzzer targets in fuzz/: starting the EAL once
 * per process, mbufs whose bytes outside the frame are poisoned for ASan,
 * invariant checks that abort (so libFuzzer records a crash), and an
 * independent reference for the checksums the RoCEv2 and ND parsers verify
 * (a bitwise CRC-32 and RFC 1071 sums written from the specs, not rdgram's
 * code), used both to check delivered frames and by the custom mutators to
 * repair checksums so that mutated frames get past them.
 *
 * DPDK memory (mempools) comes from mmap, not malloc: ASan knows nothing of
 * mbuf boundaries, so a read past a frame into the rest of its buffer would
 * go unnoticed. The harnesses therefore poison every byte of an mbuf's
 * buffer outside the frame before the driver sees it.
 */
#ifndef RDGRAM_FUZZ_COMMON_H
#define RDGRAM_FUZZ_COMMON_H

#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/asan_interface.h>
#define RDGRAM_FUZZ_ASAN 1
#endif
#endif
#ifndef RDGRAM_FUZZ_ASAN
#define RDGRAM_FUZZ_ASAN 0
#endif

namespace rdgram::fuzz {

/* An invariant failed: say which, then abort so libFuzzer saves the input. */
[[noreturn]] inline void fail(const char *what, const char *file, int line)
{
	fprintf(stderr, "fuzz invariant violated at %s:%d: %s\n", file, line, what);
	abort();
}
#define FUZZ_CHECK(cond)                                                        \
	do {                                                                    \
		if (!(cond))                                                    \
			::rdgram::fuzz::fail(#cond, __FILE__, __LINE__);        \
	} while (0)

/* RDGRAM_FUZZ_VERBOSE set: each harness prints what became of every input
 * (to check seeds and study reproducers: fuzz_x -runs=0 <files>). */
inline bool verbose()
{
	static const bool v = getenv("RDGRAM_FUZZ_VERBOSE") != nullptr;
	return v;
}

/* One EAL per process, started from LLVMFuzzerInitialize: the container
 * set-up of dataplane/src/runtime.cc (default_eal_args) on one lcore, no
 * hugepages, no shared files, no PCI, no telemetry thread. */
inline void start_eal(const char *name)
{
	cpu_set_t cs;
	CPU_ZERO(&cs);
	int cpu = 0;
	if (sched_getaffinity(0, sizeof(cs), &cs) == 0)
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &cs)) {
				cpu = c;
				break;
			}
	std::vector<std::string> a = {name,
				      "-l",
				      std::to_string(cpu),
				      "--no-pci",
				      "--no-huge",
				      "--no-shconf",
				      "--no-telemetry",
				      "-m",
				      "128",
				      "--file-prefix=" + std::string(name) + "-" + std::to_string(getpid()),
				      "--log-level=*:error"};
	std::vector<char *> argv;
	for (auto &s : a)
		argv.push_back(s.data());
	argv.push_back(nullptr);
	if (rte_eal_init(int(a.size()), argv.data()) < 0) {
		fprintf(stderr, "%s: rte_eal_init failed: %s\n", name, rte_strerror(rte_errno));
		abort();
	}
}

/* A net_ring port whose RX queue 0 reads rx and whose TX queue 0 writes tx,
 * configured and started, as soft_device::open leaves a port. */
inline uint16_t ring_port(const char *name, rte_ring *rx, rte_ring *tx, rte_mempool *mp)
{
	int p = rte_eth_from_rings(name, &rx, 1, &tx, 1, int(rte_socket_id()));
	FUZZ_CHECK(p >= 0);
	const uint16_t port = uint16_t(p);
	rte_eth_conf conf{};
	FUZZ_CHECK(rte_eth_dev_configure(port, 1, 1, &conf) == 0);
	FUZZ_CHECK(rte_eth_rx_queue_setup(port, 0, 64, rte_socket_id(), nullptr, mp) == 0);
	FUZZ_CHECK(rte_eth_tx_queue_setup(port, 0, 64, rte_socket_id(), nullptr) == 0);
	FUZZ_CHECK(rte_eth_dev_start(port) == 0);
	return port;
}

inline void poison(const void *p, size_t n)
{
#if RDGRAM_FUZZ_ASAN
	ASAN_POISON_MEMORY_REGION(p, n);
#else
	(void)p;
	(void)n;
#endif
}
inline void unpoison(const void *p, size_t n)
{
#if RDGRAM_FUZZ_ASAN
	ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
	(void)p;
	(void)n;
#endif
}

/* Every segment's whole buffer addressable again (before the harness
 * writes into a fresh mbuf, or reads a delivered one in full). */
inline void unpoison_chain(rte_mbuf *m)
{
	for (; m != nullptr; m = m->next)
		unpoison(m->buf_addr, m->buf_len);
}

/* Poisons the buffer bytes of m outside [data_off, data_off + keep), keep
 * >= data_len (the first segment of a chain keeps room for the linearize
 * copy). */
inline void poison_outside(rte_mbuf *m, uint32_t keep)
{
	auto *b = static_cast<uint8_t *>(m->buf_addr);
	poison(b, m->data_off);
	const uint32_t end = m->data_off + keep;
	if (end < m->buf_len)
		poison(b + end, m->buf_len - end);
}

/* The frame as one mbuf from mp (nullptr if it does not fit). Bytes
 * outside the frame are poisoned. */
inline rte_mbuf *single_mbuf(rte_mempool *mp, const uint8_t *d, size_t n)
{
	rte_mbuf *m = rte_pktmbuf_alloc(mp);
	FUZZ_CHECK(m != nullptr);
	unpoison_chain(m);
	if (n > rte_pktmbuf_tailroom(m)) {
		rte_pktmbuf_free(m);
		return nullptr;
	}
	if (n != 0)
		memcpy(rte_pktmbuf_append(m, uint16_t(n)), d, n);
	poison_outside(m, uint32_t(n));
	return m;
}

/* The frame as a chain from mp, as a scatter-RX PMD delivers it: the first
 * segment holds the first half (at least one byte), the rest follows in
 * segments filled to their room. Whatever linearize may write (the first
 * segment's room up to the packet length) stays addressable. */
inline rte_mbuf *chained_mbuf(rte_mempool *mp, const uint8_t *d, size_t n)
{
	rte_mbuf *head = rte_pktmbuf_alloc(mp);
	FUZZ_CHECK(head != nullptr);
	unpoison_chain(head);
	size_t first = n < 2 ? n : n / 2;
	if (first > rte_pktmbuf_tailroom(head))
		first = rte_pktmbuf_tailroom(head);
	if (first != 0)
		memcpy(rte_pktmbuf_append(head, uint16_t(first)), d, first);
	rte_mbuf *last = head;
	for (size_t off = first; off < n;) {
		rte_mbuf *s = rte_pktmbuf_alloc(mp);
		FUZZ_CHECK(s != nullptr);
		unpoison_chain(s);
		size_t k = n - off;
		if (k > rte_pktmbuf_tailroom(s))
			k = rte_pktmbuf_tailroom(s);
		memcpy(rte_pktmbuf_append(s, uint16_t(k)), d + off, k);
		poison_outside(s, uint32_t(k));
		last->next = s;
		last = s;
		head->nb_segs++;
		head->pkt_len += uint32_t(k);
		off += k;
	}
	const uint32_t room = rte_pktmbuf_tailroom(head) + head->data_len;
	poison_outside(head, head->pkt_len < room ? head->pkt_len : room);
	return head;
}

/* ---- Reference checksums, from the specs ---- */

/* CRC-32 (IEEE 802.3; reflected, init and final xor all ones): zlib's. */
inline uint32_t ref_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
	static const struct table {
		uint32_t t[256];
		table()
		{
			for (uint32_t i = 0; i < 256; i++) {
				uint32_t c = i;
				for (int k = 0; k < 8; k++)
					c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
				t[i] = c;
			}
		}
	} tab;
	crc = ~crc;
	for (size_t i = 0; i < n; i++)
		crc = tab.t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* RFC 1071 one's complement sum of n bytes (big-endian words), folded. */
inline uint32_t ref_sum16(uint32_t s, const uint8_t *p, size_t n)
{
	uint64_t acc = s;
	for (size_t i = 0; i + 1 < n; i += 2)
		acc += uint32_t(p[i]) << 8 | p[i + 1];
	if (n & 1)
		acc += uint32_t(p[n - 1]) << 8;
	while (acc >> 16)
		acc = (acc & 0xffff) + (acc >> 16);
	return uint32_t(acc);
}

/* The RoCEv2 ICRC (IBA Annex A17.3.3) of frame f, whose IP header starts at
 * 14, computed over [14, icrc_off): 8 bytes of ones for the LRH, then the
 * headers with IPv4 TOS/TTL/checksum or IPv6 traffic class/flow label/hop
 * limit, the UDP checksum and BTH byte 4 as ones. Needs icrc_off >= the end
 * of the BTH. Returns the 4 bytes as they go on the wire (LSB first). */
inline void ref_icrc(const uint8_t *f, bool v4, uint32_t icrc_off, uint8_t out[4])
{
	const uint32_t l4 = 14 + (v4 ? 20 : 40);
	std::vector<uint8_t> b(8, 0xff);
	b.insert(b.end(), f + 14, f + icrc_off);
	uint8_t *ip = b.data() + 8;
	if (v4) {
		ip[1] = 0xff;
		ip[8] = 0xff;
		ip[10] = ip[11] = 0xff;
	} else {
		ip[0] |= 0x0f;
		ip[1] = ip[2] = ip[3] = 0xff;
		ip[7] = 0xff;
	}
	uint8_t *udp = b.data() + 8 + (l4 - 14);
	udp[6] = udp[7] = 0xff;
	udp[8 + 4] = 0xff;
	const uint32_t c = ref_crc32(0, b.data(), b.size());
	out[0] = uint8_t(c);
	out[1] = uint8_t(c >> 8);
	out[2] = uint8_t(c >> 16);
	out[3] = uint8_t(c >> 24);
}

/* Sets the IPv4 header checksum of the 20-byte header at ip. */
inline void ref_fix_ipv4_checksum(uint8_t *ip)
{
	ip[10] = ip[11] = 0;
	const uint16_t c = uint16_t(~ref_sum16(0, ip, 20));
	ip[10] = uint8_t(c >> 8);
	ip[11] = uint8_t(c);
}

/* The ICMPv6 checksum field value for a message of len bytes at icmp whose
 * own checksum field is zero (RFC 4443 2.3, RFC 8200 8.1 pseudo-header). */
inline uint16_t ref_icmp6_checksum(const uint8_t *src, const uint8_t *dst, const uint8_t *icmp, uint32_t len)
{
	uint32_t s = ref_sum16(0, src, 16);
	s = ref_sum16(s, dst, 16);
	const uint8_t ph[8] = {uint8_t(len >> 24), uint8_t(len >> 16), uint8_t(len >> 8), uint8_t(len), 0, 0, 0, 58};
	s = ref_sum16(s, ph, 8);
	s = ref_sum16(s, icmp, len);
	return uint16_t(~s);
}

inline uint16_t be16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }
inline uint32_t be24(const uint8_t *p) { return uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2]; }
inline uint32_t be32(const uint8_t *p) { return uint32_t(be16(p)) << 16 | be16(p + 2); }
inline void put_be16(uint8_t *p, uint32_t v)
{
	p[0] = uint8_t(v >> 8);
	p[1] = uint8_t(v);
}

/* A small deterministic PRNG for mutators (seeded by libFuzzer). */
struct rng {
	uint64_t s;
	explicit rng(unsigned seed) : s(seed * 0x9e3779b97f4a7c15ull + 1) {}
	uint32_t next()
	{
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		return uint32_t(s >> 11);
	}
	bool chance(unsigned num, unsigned den) { return next() % den < num; }
};

} // namespace rdgram::fuzz

/* libFuzzer's mutation engine, for custom mutators. */
extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

#endif
