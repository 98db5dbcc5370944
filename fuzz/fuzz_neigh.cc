/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * libFuzzer target: the soft driver's neighbour resolution (soft_neigh.cc),
 * its ARP (RFC 826) and ND (RFC 4861) parsers and the state machine behind
 * them, fed the way soft_device does: frames come in on a net_ring port,
 * the poll thread's rx_burst hands ARP/ND to the slow-path ring, and the
 * control thread passes them to neigh_table::input.
 *
 * Input: a sequence of records, each [ctl:1][len:2, big-endian][frame:len]
 * (the last one may be short). ctl bits 0-6: milliseconds x 10 to advance
 * the clock first (timers run: retransmits, timeouts, refreshes); bit 7:
 * give the frame straight to neigh_table::input instead of the port (what
 * the parser does with frames the poll thread would never hand over).
 *
 * Each input starts from a fresh table: our addresses 10.0.0.1 and fd00::1,
 * static neighbours 10.0.0.9 and fd00::9, and resolutions of 10.0.0.2 and
 * fd00::2 in flight (requests sent). Whenever one of those becomes usable
 * the harness creates an AV for it (as create_ah does), so answers that
 * move the neighbour to another MAC rewrite live AVs.
 *
 * Invariants (abort): every mbuf freed exactly once (both rings empty and
 * the mempool back to zero in use after each input); every frame the
 * table sends is well formed (ARP: 60 bytes, our MAC; NS/NA: hop limit 255
 * and a correct ICMPv6 checksum, checked with an independent sum); a live
 * AV's MAC is always its neighbour entry's MAC and the entry counts it;
 * bad_frames is the sum of its reasons; static entries never change; no
 * byte outside a frame is read (ASan poison); no UB.
 *
 * The custom mutator fixes, on most mutations, the IPv6 payload length,
 * hop limit and ICMPv6 checksum of ND records, so frames get past them.
 */
#include <arpa/inet.h>

#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_common.h"
#include "soft_datapath.h"
#include "soft_neigh.h"

using namespace rdgram;
using namespace rdgram::fuzz;

namespace {

constexpr uint32_t room = 2048;
constexpr uint64_t t0 = 1000000000ull; /* an arbitrary TSC start */

struct harness {
	rte_mempool *mp = nullptr;   /* frames in (their bytes outside the frame poisoned) */
	rte_mempool *txmp = nullptr; /* frames the table sends */
	rte_ring *rx = nullptr, *tx = nullptr, *ctl_rx = nullptr, *ctl_tx = nullptr;
	uint16_t port = 0;
	soft::soft_queue q;
	soft::neigh_table nt;
	ah_table<soft::soft_av> ahs;
	rte_ether_addr own_mac{{0x02, 0, 0, 0, 0, 0x01}};
	std::vector<wire::gid> own;
	std::vector<soft::neighbour> statics;
	wire::gid dyn[2]; /* resolved during each input */
	uint64_t ms = 0;  /* TSC ticks per millisecond */
};
harness *H;

wire::gid gid_of(const char *s)
{
	wire::gid g{};
	in6_addr a6;
	in_addr a4;
	if (inet_pton(AF_INET, s, &a4) == 1)
		return wire::gid::from_v4(a4.s_addr);
	FUZZ_CHECK(inet_pton(AF_INET6, s, &a6) == 1);
	memcpy(g.raw, &a6, 16);
	return g;
}

/* A frame the table sent: well formed, from our MAC. */
void check_sent(rte_mbuf *m)
{
	FUZZ_CHECK(m->nb_segs == 1);
	const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
	const uint32_t n = m->data_len;
	FUZZ_CHECK(n >= 14 && memcmp(f + 6, H->own_mac.addr_bytes, 6) == 0);
	const uint16_t et = be16(f + 12);
	if (et == 0x0806) {
		FUZZ_CHECK(n == 60);
		FUZZ_CHECK(be16(f + 14) == 1 && be16(f + 16) == 0x0800 && f[18] == 6 && f[19] == 4);
		const uint16_t op = be16(f + 20);
		FUZZ_CHECK(op == 1 || op == 2);
		FUZZ_CHECK(memcmp(f + 22, H->own_mac.addr_bytes, 6) == 0);
		return;
	}
	FUZZ_CHECK(et == 0x86dd);
	FUZZ_CHECK(n >= 54 + 24);
	const uint8_t *ip = f + 14;
	const uint32_t pl = be16(ip + 4);
	FUZZ_CHECK((ip[0] >> 4) == 6 && ip[6] == 58 && ip[7] == 255 && 54 + pl == n);
	const uint8_t *icmp = f + 54;
	FUZZ_CHECK(icmp[0] == 135 || icmp[0] == 136);
	std::vector<uint8_t> msg(icmp, icmp + pl);
	const uint16_t got = be16(icmp + 2);
	msg[2] = msg[3] = 0;
	FUZZ_CHECK(ref_icmp6_checksum(ip + 8, ip + 24, msg.data(), pl) == got);
	/* An NS goes to the target's solicited-node group, an NA from one of
	 * our addresses. */
	if (icmp[0] == 135) {
		FUZZ_CHECK(ip[24] == 0xff && ip[25] == 0x02 && memcmp(ip + 24 + 13, icmp + 8 + 13, 3) == 0);
	} else {
		bool ours = false;
		for (const auto &g : H->own)
			ours |= memcmp(g.raw, ip + 8, 16) == 0;
		FUZZ_CHECK(ours);
	}
}

void drain_tx()
{
	void *o;
	while (rte_ring_dequeue(H->ctl_tx, &o) == 0) {
		auto *m = static_cast<rte_mbuf *>(o);
		check_sent(m);
		rte_pktmbuf_free(m);
	}
}

/* A live AV per resolved dynamic neighbour, as soft_device::create_ah
 * makes it: the MAC from the entry, registered with add_ah. */
struct held {
	wire::gid ip;
	ah_handle h;
};

void adopt(std::vector<held> &ahs)
{
	for (const auto &ip : H->dyn) {
		bool have = false;
		for (const auto &a : ahs)
			have |= a.ip == ip;
		rte_ether_addr mac;
		uint32_t id;
		if (have || H->nt.usable(ip, &mac, &id) != 0)
			continue;
		uint32_t slot;
		FUZZ_CHECK(H->ahs.reserve(&slot));
		soft::soft_av &av = H->ahs.av_at(slot);
		memset(&av, 0, sizeof(av));
		memcpy(av.hdr, mac.addr_bytes, 6);
		memcpy(av.hdr + 6, H->own_mac.addr_bytes, 6);
		av.l3 = ip.is_v4_mapped() ? 4 : 6;
		ahs.push_back({ip, H->ahs.publish(slot)});
		H->nt.add_ah(id, slot);
	}
}

void check_state(const std::vector<held> &ahs)
{
	for (const auto &a : ahs) {
		soft::neigh_info ni;
		FUZZ_CHECK(H->nt.info(a.ip, &ni)); /* an entry with AHs stays */
		FUZZ_CHECK(ni.state == soft::neigh_state::reachable || ni.state == soft::neigh_state::stale);
		FUZZ_CHECK(ni.nb_ahs == 1);
		const soft::soft_av *av = H->ahs.lookup(a.h);
		FUZZ_CHECK(av != nullptr);
		const uint64_t w = soft::av_mac_word(*av);
		FUZZ_CHECK(memcmp(&w, ni.mac.addr_bytes, 6) == 0);
		FUZZ_CHECK(!rte_is_multicast_ether_addr(&ni.mac) && !rte_is_zero_ether_addr(&ni.mac));
	}
	for (const auto &s : H->statics) {
		soft::neigh_info ni;
		FUZZ_CHECK(H->nt.info(s.ip, &ni));
		FUZZ_CHECK(ni.state == soft::neigh_state::static_ && rte_is_same_ether_addr(&ni.mac, &s.mac));
	}
	const soft::neigh_stats &st = H->nt.stats();
	uint64_t sum = 0;
#define X(name, desc) sum += st.name;
	RDGRAM_NEIGH_BAD(X)
#undef X
	FUZZ_CHECK(sum == st.bad_frames);
	/* Requests for us stop creating entries at max_learned (8) entries; on
	 * top only the two resolutions the harness starts can come back. */
	FUZZ_CHECK(H->nt.size() <= 8 + 2);
}

/* One frame through the port and rx_burst, or straight to the table. */
void feed(const uint8_t *f, size_t n, bool direct, uint64_t now)
{
	rte_mbuf *m = single_mbuf(H->mp, f, n);
	if (m == nullptr)
		return;
	if (direct) {
		H->nt.input(m, now); /* frees m */
		return;
	}
	FUZZ_CHECK(rte_ring_enqueue(H->rx, m) == 0);
	recv_wc wc[4];
	const uint16_t nb = H->q.rx_burst(wc, 4);
	for (uint16_t i = 0; i < nb; i++) { /* a RoCE datagram after all */
		unpoison_chain(wc[i].mbuf);
		rte_pktmbuf_free(wc[i].mbuf);
	}
	void *o;
	while (rte_ring_dequeue(H->ctl_rx, &o) == 0)
		H->nt.input(static_cast<rte_mbuf *>(o), now);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
	start_eal("fuzz_neigh");
	/* The table logs neighbour timeouts and MAC moves (WARNING/INFO); a
	 * fuzzer makes thousands: keep only errors. */
	rte_log_set_global_level(RTE_LOG_ERR);
	H = new harness;
	const int s = int(rte_socket_id());
	H->mp = rte_pktmbuf_pool_create("fz_nmp", 255, 0, 0, RTE_PKTMBUF_HEADROOM + room, s);
	H->txmp = rte_pktmbuf_pool_create("fz_ntxmp", 255, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, s);
	H->rx = rte_ring_create("fz_nrx", 64, s, RING_F_SP_ENQ | RING_F_SC_DEQ);
	H->tx = rte_ring_create("fz_ntx", 64, s, RING_F_SP_ENQ | RING_F_SC_DEQ);
	H->ctl_rx = rte_ring_create("fz_nctl_rx", 256, s, RING_F_SC_DEQ);
	H->ctl_tx = rte_ring_create("fz_nctl_tx", 256, s, RING_F_SP_ENQ | RING_F_SC_DEQ);
	FUZZ_CHECK(H->mp && H->txmp && H->rx && H->tx && H->ctl_rx && H->ctl_tx);
	H->port = ring_port("net_fz_neigh", H->rx, H->tx, H->mp);
	FUZZ_CHECK(H->ahs.init(16, s, nullptr) == 0);
	H->own = {gid_of("10.0.0.1"), gid_of("fd00::1")};
	H->statics = {{gid_of("10.0.0.9"), {{0x02, 0, 0, 0, 0, 0x09}}},
		      {gid_of("fd00::9"), {{0x02, 0, 0, 0, 0, 0x19}}}};
	H->dyn[0] = gid_of("10.0.0.2");
	H->dyn[1] = gid_of("fd00::2");
	H->ms = rte_get_tsc_hz() / 1000;

	soft::soft_port_view v;
	v.v4[v.n_v4++] = H->own[0].v4();
	memcpy(v.v6[v.n_v6++], H->own[1].raw, 16);
	/* The poll thread of queue 0 hands ARP/ND over (ctl_rx); what the
	 * table sends stays in ctl_tx, checked and freed by the harness. */
	H->q.attach(H->port, 0, H->mp, nullptr, v, H->ctl_rx, nullptr);
	FUZZ_CHECK(H->q.add_qp(0x100, 0x11111111) == 0);
	return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	soft::neigh_params p;
	p.ttl_ms = 1000;
	p.retry_ms = 100;
	p.retries = 2;
	p.fail_hold_ms = 500;
	p.max_learned = 8;
	H->nt.init(p, H->own_mac, H->own, H->statics, H->txmp, H->ctl_tx, &H->ahs);
	uint64_t now = t0;
	for (const auto &ip : H->dyn)
		FUZZ_CHECK(H->nt.prepare(ip, now) == EINPROGRESS);
	drain_tx();

	std::vector<held> ahs;
	size_t off = 0;
	while (off + 3 <= size) {
		const uint8_t ctl = data[off];
		size_t len = be16(data + off + 1);
		off += 3;
		if (len > size - off)
			len = size - off;
		now += (ctl & 0x7f) * 10 * H->ms;
		H->nt.expire(now);
		drain_tx();
		feed(data + off, len, (ctl & 0x80) != 0, now);
		off += len;
		drain_tx();
		adopt(ahs);
		check_state(ahs);
		/* The application asks again (create_ah retried after
		 * prepare_ah): prepare and usable agree. */
		for (const auto &ip : H->dyn) {
			const int r = H->nt.prepare(ip, now);
			rte_ether_addr mac;
			uint32_t id;
			const int u = H->nt.usable(ip, &mac, &id);
			FUZZ_CHECK(r == 0 || r == EINPROGRESS || r == ETIMEDOUT);
			FUZZ_CHECK((r == 0) == (u == 0));
			FUZZ_CHECK(r != ETIMEDOUT || u == ETIMEDOUT);
		}
		drain_tx();
	}
	/* Let every timer run out. */
	for (int i = 0; i < 8; i++) {
		now += 1000 * H->ms;
		H->nt.expire(now);
		drain_tx();
		check_state(ahs);
	}
	for (const auto &a : ahs) {
		H->nt.remove_ah(a.h.slot);
		FUZZ_CHECK(H->ahs.retire(a.h) == 0);
	}
	if (verbose()) {
		printf("neigh: %zu bytes, %zu AVs made:", size, ahs.size());
		H->nt.stats().for_each([](const char *n, uint64_t v) {
			if (v != 0)
				printf(" %s=%" PRIu64, n, v);
		});
		printf("\n");
	}
	FUZZ_CHECK(H->ahs.live() == 0);
	FUZZ_CHECK(rte_ring_count(H->ctl_rx) == 0 && rte_ring_count(H->rx) == 0);
	FUZZ_CHECK(rte_mempool_in_use_count(H->mp) == 0);
	FUZZ_CHECK(rte_mempool_in_use_count(H->txmp) == 0);
	return 0;
}

/* Valid-looking ND: after libFuzzer's mutation, often repair each IPv6
 * record's payload length, hop limit and ICMPv6 checksum. */
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *d, size_t size, size_t max_size, unsigned seed)
{
	rng r(seed);
	size = LLVMFuzzerMutate(d, size, max_size);
	if (r.chance(1, 5))
		return size;
	for (size_t off = 0; off + 3 <= size;) {
		size_t len = be16(d + off + 1);
		off += 3;
		if (len > size - off)
			len = size - off;
		uint8_t *f = d + off;
		off += len;
		if (len < 54 + 4 || be16(f + 12) != 0x86dd || f[14 + 6] != 58)
			continue;
		uint8_t *ip = f + 14;
		if (r.chance(3, 4))
			put_be16(ip + 4, uint32_t(len - 54));
		if (r.chance(7, 8))
			ip[7] = 255;
		const uint32_t pl = be16(ip + 4);
		if (54 + pl <= len && pl >= 4 && r.chance(7, 8)) {
			uint8_t *icmp = f + 54;
			icmp[2] = icmp[3] = 0;
			const uint16_t c = ref_icmp6_checksum(ip + 8, ip + 24, icmp, pl);
			put_be16(icmp + 2, c);
		}
	}
	return size;
}
