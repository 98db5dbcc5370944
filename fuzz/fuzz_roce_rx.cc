/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * libFuzzer target: the soft driver's RoCEv2 receive path (soft_queue::
 * rx_burst and its per-frame validation, soft_rx.h), Ethernet
 * through ICRC, IPv4 and IPv6, plus the ARP/ND hand-off to the control
 * ring.
 *
 * The input is one Ethernet frame (no FCS). It goes through a net_ring port
 * into rx_burst twice: once as a single mbuf (room for 9216 bytes), once as
 * a chain of 2048-byte-room segments, the first holding half the frame
 * (what a scatter-RX PMD delivers; rx_burst linearizes it). Invariants,
 * each an abort:
 *   - every frame is accounted for exactly once: delivered, handed to the
 *     control ring, or dropped under one counter;
 *   - the outcome equals that of an independent reference validator written
 *     from the specs below (IBA 9.2/9.3, Annex A17; RFC 791/8200/768), with
 *     its own CRC-32 and header checksum; on this untagged port a
 *     priority-tagged frame (802.1Q VLAN ID 0) is judged without its tag
 *     and delivered with its PCP as wc.sl, any other tag is a drop;
 *   - a delivered completion describes its mbuf: one segment, byte_len ==
 *     data_len == pkt_len == 40 + payload, inside the buffer; the GRH area
 *     holds the IP header as verbs lays it out and the payload bytes are
 *     the frame's; every wc field matches the frame;
 *   - init_ah_from_wc on a delivered completion gives a reply AH to the
 *     sender from the GID the packet was sent to (or EINVAL for a multicast
 *     or unspecified source);
 *   - the chained run ends as the single one (frames up to 2048 bytes) or
 *     dropped as rx_chained_mbuf (longer frames: no room to linearize);
 *   - both mempools are back to zero mbufs in use after every input;
 *   - no byte outside the frame is read or written (ASan poison), no UB.
 *
 * A custom mutator repairs, on most mutations, the IP/UDP lengths, the
 * IPv4 header checksum and the ICRC with the reference code, so mutated
 * frames get past the checksums to the checks behind them.
 */
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz_common.h"
#include "rdgram/ah_from_wc.h"
#include "soft_datapath.h"

using namespace rdgram;
using namespace rdgram::fuzz;

namespace {

/* The port this queue belongs to: its addresses, QPs, P_Key and MTU. The
 * seed corpus (gen_corpus.py) is built for exactly these values. */
constexpr uint8_t own_v4[2][4] = {{10, 0, 0, 1}, {192, 168, 1, 1}};
constexpr uint8_t own_v6[2][16] = {
	{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
	{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
};
constexpr struct {
	uint32_t qpn, qkey;
} own_qps[2] = {{0x000100, 0x11111111}, {0xabcdef, 0x80010000}};
constexpr uint16_t own_pkey = 0xffff;
constexpr uint32_t own_mtu = 4096;

constexpr uint32_t big_room = 9216;   /* single-mbuf run */
constexpr uint32_t small_room = 2048; /* chained run */

struct harness {
	rte_mempool *big = nullptr, *small = nullptr;
	rte_ring *rx = nullptr, *tx = nullptr, *ctl = nullptr;
	uint16_t port = 0;
	soft::soft_queue q;
	port_attr pa;
	gid_index gids;
};
harness *H;

enum class verdict { drop, control, deliver };

struct expect {
	verdict v = verdict::drop;
	bool v4 = false, imm = false, se = false;
	uint8_t sl = 0; /* the priority of a priority-tagged frame */
	uint32_t l4 = 0, pay_off = 0, paylen = 0, dqpn = 0, sqpn = 0;
};

bool ref_is_nd(const uint8_t *f, size_t n)
{
	return n >= 14 + 40 + 1 && f[14 + 6] == 58 && (f[54] == 135 || f[54] == 136);
}

/* What a RoCE HCA (and the driver's documented order) does with frame f:
 * the reference validator, from the specs, not from soft_rx.h. */
expect reference(const uint8_t *f, size_t n)
{
	expect e;
	if (n < 14)
		return e;
	const uint16_t et = be16(f + 12);
	if (et == 0x0806) {
		e.v = verdict::control;
		return e;
	}
	if (et != 0x0800 && et != 0x86dd)
		return e;
	e.v4 = et == 0x0800;
	const uint32_t l3len = e.v4 ? 20 : 40;
	if (n < 14 + l3len + 8 + 12 + 8 + 4) {
		if (!e.v4 && ref_is_nd(f, n))
			e.v = verdict::control;
		return e;
	}
	const uint8_t *ip = f + 14;
	uint32_t l4_len;
	const uint8_t *dst;
	if (e.v4) {
		const uint32_t tot = be16(ip + 2);
		if (ip[0] != 0x45 || tot < 28 || 14 + tot > n)
			return e;
		if (ref_sum16(0, ip, 20) != 0xffff)
			return e;
		if (be16(ip + 6) & 0x3fff) /* MF or a fragment offset */
			return e;
		if (ip[9] != 17)
			return e;
		l4_len = tot - 20;
		dst = ip + 16;
	} else {
		const uint32_t pl = be16(ip + 4);
		if ((ip[0] >> 4) != 6 || pl < 8 || 54 + pl > n)
			return e;
		if (ip[6] != 17) {
			if (ref_is_nd(f, n))
				e.v = verdict::control;
			return e;
		}
		l4_len = pl;
		dst = ip + 24;
	}
	const uint32_t l4 = 14 + l3len;
	const uint8_t *udp = f + l4;
	if (be16(udp + 2) != 4791 || be16(udp + 4) != l4_len)
		return e;
	bool mine = false;
	for (int i = 0; i < 2; i++)
		mine |= e.v4 ? memcmp(dst, own_v4[i], 4) == 0 : memcmp(dst, own_v6[i], 16) == 0;
	if (!mine)
		return e;
	const uint8_t *bth = udp + 8;
	if ((bth[1] & 0x0f) != 0 || (bth[0] != 0x64 && bth[0] != 0x65))
		return e;
	const uint16_t pkey = be16(bth + 2);
	if (((pkey ^ own_pkey) & 0x7fff) != 0 || ((pkey | own_pkey) & 0x8000) == 0)
		return e;
	e.dqpn = be24(bth + 5);
	int qi = -1;
	for (int i = 0; i < 2; i++)
		if (own_qps[i].qpn == e.dqpn)
			qi = i;
	if (qi < 0)
		return e;
	e.imm = bth[0] == 0x65;
	e.se = (bth[1] & 0x80) != 0;
	const uint32_t after_udp = 12 + 8 + (e.imm ? 4 : 0);
	const uint32_t pad = (bth[1] >> 4) & 3;
	if (l4_len < 8 + after_udp + pad + 4)
		return e;
	e.paylen = l4_len - 8 - after_udp - pad - 4;
	if (e.paylen > own_mtu)
		return e;
	const uint8_t *deth = bth + 12;
	if (be32(deth) != own_qps[qi].qkey)
		return e;
	const uint32_t icrc_off = l4 + l4_len - 4;
	uint8_t icrc[4];
	ref_icrc(f, e.v4, icrc_off, icrc);
	if (memcmp(icrc, f + icrc_off, 4) != 0)
		return e;
	e.sqpn = be24(deth + 5);
	e.l4 = l4;
	e.pay_off = l4 + 8 + after_udp;
	e.v = verdict::deliver;
	return e;
}

/* What rx_burst did with one frame. */
struct outcome {
	verdict v = verdict::drop;
	int counter = -1; /* index in RDGRAM_SOFT_RX_DROPS of the drop */
	uint32_t byte_len = 0;
	std::vector<uint8_t> bytes; /* delivered mbuf data */
};

/* The counters as an array, in RDGRAM_SOFT_RX_DROPS order. */
std::vector<uint64_t> drops_of(const soft::soft_counters &c)
{
	return {
#define X(name, kind, desc) c.name,
		RDGRAM_SOFT_RX_DROPS(X)
#undef X
	};
}
int counter_index(const char *n)
{
	int i = 0;
#define X(name, kind, desc)                                                     \
	if (strcmp(n, #name) == 0)                                              \
		return i;                                                       \
	i++;
	RDGRAM_SOFT_RX_DROPS(X)
#undef X
	return -1;
}

void check_delivered(const uint8_t *f, const expect &e, const recv_wc &wc)
{
	rte_mbuf *m = wc.mbuf;
	FUZZ_CHECK(m != nullptr);
	FUZZ_CHECK(m->nb_segs == 1 && m->next == nullptr);
	FUZZ_CHECK(wc.byte_len == 40 + e.paylen);
	FUZZ_CHECK(m->data_len == wc.byte_len && m->pkt_len == wc.byte_len);
	FUZZ_CHECK(uint32_t(m->data_off) + m->data_len <= m->buf_len);
	const uint8_t *d = rte_pktmbuf_mtod(m, const uint8_t *);
	/* Inside the memory the frame occupied, as it must be (in place). */
	if (e.v4) {
		static const uint8_t zero[20] = {};
		FUZZ_CHECK(memcmp(d, zero, 20) == 0);
		FUZZ_CHECK(memcmp(d + 20, f + 14, 20) == 0);
	} else {
		FUZZ_CHECK(memcmp(d, f + 14, 40) == 0);
	}
	FUZZ_CHECK(e.paylen == 0 || memcmp(d + 40, f + e.pay_off, e.paylen) == 0);
	FUZZ_CHECK(wc.qp_num == e.dqpn && wc.src_qp == e.sqpn);
	const uint8_t flags = uint8_t(wc_grh | (e.imm ? wc_with_imm : 0) | (e.se ? wc_solicited : 0));
	FUZZ_CHECK(wc.wc_flags == flags);
	if (e.imm)
		FUZZ_CHECK(memcmp(&wc.imm_data, f + e.pay_off - 4, 4) == 0);
	FUZZ_CHECK(wc.slid == 0 && wc.sl == e.sl && wc.pkey_index == 0 && wc.dlid_path_bits == 0);
	FUZZ_CHECK(wc.l3 == (e.v4 ? l3_type::ipv4 : l3_type::ipv6));
	wire::gid s{}, t{};
	if (e.v4) {
		rte_be32_t a;
		memcpy(&a, f + 14 + 12, 4);
		s = wire::gid::from_v4(a);
		memcpy(&a, f + 14 + 16, 4);
		t = wire::gid::from_v4(a);
	} else {
		memcpy(s.raw, f + 14 + 8, 16);
		memcpy(t.raw, f + 14 + 24, 16);
	}
	FUZZ_CHECK(wc.sgid == s && wc.dgid == t);

	/* The reply path: an AH back to the sender, from the GID it wrote to. */
	ibv_ah_attr a;
	errno = 0;
	const int rc = init_ah_from_wc(H->pa, H->gids, 1, wc, d, &a);
	const bool bad_src = s.is_multicast() || s.is_zero() || (e.v4 && s.v4() == 0);
	if (bad_src) {
		FUZZ_CHECK(rc == -1 && errno == EINVAL);
		return;
	}
	FUZZ_CHECK(rc == 0);
	FUZZ_CHECK(a.is_global == 1 && a.port_num == 1 && a.sl == e.sl && a.grh.hop_limit == 0xff);
	FUZZ_CHECK(a.grh.sgid_index < H->pa.gids.size() && H->pa.gids[a.grh.sgid_index] == t);
	FUZZ_CHECK(memcmp(a.grh.dgid.raw, s.raw, 16) == 0);
	FUZZ_CHECK(a.grh.flow_label <= 0xfffff);
	FUZZ_CHECK(!e.v4 || a.grh.flow_label == 0);
	FUZZ_CHECK((a.grh.traffic_class & 3) != 3);
}

outcome run(const uint8_t *f, rte_mbuf *m, const expect &e)
{
	outcome o;
	const soft::soft_counters c0 = H->q.counters();
	const std::vector<uint64_t> before = drops_of(c0);
	FUZZ_CHECK(rte_ring_enqueue(H->rx, m) == 0);
	recv_wc wc[4];
	const uint16_t nb = H->q.rx_burst(wc, 4);
	const soft::soft_counters c1 = H->q.counters();
	const std::vector<uint64_t> after = drops_of(c1);
	FUZZ_CHECK(rte_ring_count(H->rx) == 0);

	unsigned ndrop = 0;
	for (size_t i = 0; i < before.size(); i++) {
		FUZZ_CHECK(after[i] >= before[i]);
		if (after[i] != before[i]) {
			ndrop += unsigned(after[i] - before[i]);
			o.counter = int(i);
		}
	}
	const uint64_t nctl = c1.rx_to_control - c0.rx_to_control;
	const uint64_t npk = c1.rx_pkts - c0.rx_pkts;
	FUZZ_CHECK(nb <= 1 && npk == nb);
	FUZZ_CHECK(nb + nctl + ndrop == 1); /* exactly one fate */
	void *obj = nullptr;
	const unsigned in_ctl = rte_ring_count(H->ctl);
	FUZZ_CHECK(in_ctl == nctl);
	if (nctl != 0) {
		FUZZ_CHECK(rte_ring_dequeue(H->ctl, &obj) == 0 && obj == m);
		FUZZ_CHECK(m->nb_segs == 1); /* linearized before the hand-off */
		unpoison_chain(m);
		rte_pktmbuf_free(m);
		o.v = verdict::control;
	} else if (nb == 1) {
		FUZZ_CHECK(wc[0].mbuf == m);
		FUZZ_CHECK(e.v == verdict::deliver);
		check_delivered(f, e, wc[0]);
		o.v = verdict::deliver;
		o.byte_len = wc[0].byte_len;
		const uint8_t *d = rte_pktmbuf_mtod(m, const uint8_t *);
		o.bytes.assign(d, d + m->data_len);
		FUZZ_CHECK(c1.rx_bytes - c0.rx_bytes == e.paylen);
		unpoison_chain(m);
		rte_pktmbuf_free(m);
	}
	return o;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***)
{
	start_eal("fuzz_roce_rx");
	H = new harness;
	H->big = rte_pktmbuf_pool_create("fz_big", 31, 0, 0, RTE_PKTMBUF_HEADROOM + big_room, int(rte_socket_id()));
	H->small = rte_pktmbuf_pool_create("fz_small", 63, 0, 0, RTE_PKTMBUF_HEADROOM + small_room,
					   int(rte_socket_id()));
	H->rx = rte_ring_create("fz_rx", 64, int(rte_socket_id()), RING_F_SP_ENQ | RING_F_SC_DEQ);
	H->tx = rte_ring_create("fz_tx", 64, int(rte_socket_id()), RING_F_SP_ENQ | RING_F_SC_DEQ);
	/* The device's slow-path ring, as soft_device::open makes it. */
	H->ctl = rte_ring_create("fz_ctl", 64, int(rte_socket_id()), RING_F_SC_DEQ);
	FUZZ_CHECK(H->big && H->small && H->rx && H->tx && H->ctl);
	H->port = ring_port("net_fz_roce", H->rx, H->tx, H->big);

	soft::soft_port_view v;
	v.pkey = own_pkey;
	v.mtu = own_mtu;
	for (auto &a : own_v4) {
		memcpy(&v.v4[v.n_v4++], a, 4);
		rte_be32_t x;
		memcpy(&x, a, 4);
		H->pa.gids.push_back(wire::gid::from_v4(x));
	}
	for (auto &a : own_v6) {
		memcpy(v.v6[v.n_v6++], a, 16);
		wire::gid g;
		memcpy(g.raw, a, 16);
		H->pa.gids.push_back(g);
	}
	H->pa.link = link_layer::ethernet;
	H->gids.build(H->pa.gids);
	/* RX never looks at the AH table. */
	H->q.attach(H->port, 0, H->big, nullptr, v, H->ctl, nullptr);
	for (auto &qp : own_qps)
		FUZZ_CHECK(H->q.add_qp(qp.qpn, qp.qkey) == 0);
	return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > big_room)
		return -1; /* does not fit an mbuf: not worth keeping */
	/* The driver parses in place and may rearrange: keep the original. */
	const std::vector<uint8_t> f(data, data + size);
	/* 802.1Q on this port (no vlan): a priority tag (VLAN ID 0, 802.1Q
	 * 9.6) is the port's own traffic, judged as the frame without it and
	 * delivered with its PCP; any other tag, or two, is a drop. The
	 * delivered bytes are checked against the frame without the tag. */
	std::vector<uint8_t> r = f;
	uint8_t pcp = 0;
	bool tag_drop = false;
	if (size >= 14 && (be16(f.data() + 12) == 0x8100 || be16(f.data() + 12) == 0x88a8)) {
		if (be16(f.data() + 12) == 0x8100 && size >= 18 && (be16(f.data() + 14) & 0xfff) == 0 &&
		    be16(f.data() + 16) != 0x8100 && be16(f.data() + 16) != 0x88a8) {
			pcp = uint8_t(f[14] >> 5);
			r.erase(r.begin() + 12, r.begin() + 16);
		} else {
			tag_drop = true;
		}
	}
	expect e = tag_drop ? expect{} : reference(r.data(), r.size());
	e.sl = pcp;

	rte_mbuf *m = single_mbuf(H->big, f.data(), size);
	FUZZ_CHECK(m != nullptr);
	const outcome a = run(r.data(), m, e);
	FUZZ_CHECK(a.v == e.v);
	FUZZ_CHECK((a.v == verdict::drop) == (a.counter >= 0));

	if (verbose()) {
		static const char *const names[] = {
#define X(name, kind, desc) #name,
			RDGRAM_SOFT_RX_DROPS(X)
#undef X
		};
		printf("roce_rx: %zu bytes: %s\n", size,
		       a.v == verdict::deliver ? "delivered"
		       : a.v == verdict::control ? "to control"
						: names[a.counter]);
	}

	rte_mbuf *c = chained_mbuf(H->small, f.data(), size);
	const bool fits = size <= small_room;
	const outcome b = run(r.data(), c, e);
	if (fits) {
		FUZZ_CHECK(b.v == a.v && b.counter == a.counter);
		FUZZ_CHECK(b.byte_len == a.byte_len && b.bytes == a.bytes);
	} else {
		static const int chained = counter_index("rx_chained_mbuf");
		FUZZ_CHECK(b.v == verdict::drop && b.counter == chained);
	}

	FUZZ_CHECK(rte_mempool_in_use_count(H->big) == 0);
	FUZZ_CHECK(rte_mempool_in_use_count(H->small) == 0);
	return 0;
}

/* Mostly-valid frames: after libFuzzer's own mutation, often make the IP
 * and UDP lengths agree with the frame, fix the IPv4 header checksum and
 * recompute the ICRC, so the checks after them are reached. */
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *d, size_t size, size_t max_size, unsigned seed)
{
	rng r(seed);
	size = LLVMFuzzerMutate(d, size, max_size);
	if (size < 14 + 20 + 8 + 12 + 8 + 4 || r.chance(1, 5))
		return size;
	const uint16_t et = be16(d + 12);
	if (et != 0x0800 && et != 0x86dd)
		return size;
	const bool v4 = et == 0x0800;
	const uint32_t l4 = 14 + (v4 ? 20 : 40);
	if (size < l4 + 8 + 12 + 8 + 4)
		return size;
	uint8_t *ip = d + 14;
	if (r.chance(1, 2)) {
		/* Lengths from the frame (sometimes leaving Ethernet padding). */
		size_t end = size;
		if (r.chance(1, 4))
			end -= r.next() % 8;
		if (end >= l4 + 8 + 12 + 8 + 4 && end - 14 <= 0xffff) {
			const uint32_t l4_len = uint32_t(end - l4);
			if (v4)
				put_be16(ip + 2, uint32_t(end - 14));
			else
				put_be16(ip + 4, l4_len);
			put_be16(d + l4 + 4, l4_len);
		}
	}
	if (v4 && r.chance(7, 8))
		ref_fix_ipv4_checksum(ip);
	if (r.chance(7, 8)) {
		const uint32_t l4_len = v4 ? uint32_t(be16(ip + 2)) - 20 : be16(ip + 4);
		const uint32_t icrc_off = l4 + l4_len - 4;
		if (l4_len >= 8 + 12 + 4 && l4_len <= 0xffff && icrc_off + 4 <= size) {
			uint8_t c[4];
			ref_icrc(d, v4, icrc_off, c);
			memcpy(d + icrc_off, c, 4);
		}
	}
	return size;
}
