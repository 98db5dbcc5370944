/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * RoCEv2 UD wire formats: InfiniBand Architecture Specification vol. 1,
 * release 1.4, section 9.2 (BTH), 9.3.2 (DETH), 9.3.3 (ImmDt), and Annex A17
 * (RoCEv2: the IB transport over UDP/IP, destination port 4791).
 *
 * A UD packet on the wire:
 *   Eth(14) / IPv4(20) or IPv6(40) / UDP(8) / BTH(12) / DETH(8) / [ImmDt(4)]
 *   / payload / pad(0..3, to a 4-byte multiple) / ICRC(4)
 */
#ifndef RDGRAM_WIRE_H
#define RDGRAM_WIRE_H

#include <cstddef>
#include <cstdint>

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_udp.h>

namespace rdgram::wire {

inline constexpr uint16_t roce_v2_udp_port = 4791; /* IANA, Annex A17.2.3 */

/* BTH opcodes (IBA 9.2.1, table 38): transport UD = 011b in the top bits. */
inline constexpr uint8_t op_ud_send_only = 0x64;
inline constexpr uint8_t op_ud_send_only_imm = 0x65;

/* Base Transport Header, 12 bytes, all fields big-endian. */
struct __attribute__((packed)) bth {
	uint8_t opcode;     /* 0: operation code */
	uint8_t flags;      /* 1: SE(7) M(6) PadCnt(5:4) TVer(3:0) */
	rte_be16_t pkey;    /* 2: partition key */
	uint8_t resv8a;     /* 4: RoCEv2: FECN(7) BECN(6) resv; masked in ICRC */
	uint8_t dqpn[3];    /* 5: destination QP */
	uint8_t ack_resv;   /* 8: AckReq(7) resv7 */
	uint8_t psn[3];     /* 9: packet sequence number */
};
static_assert(sizeof(bth) == 12);

inline constexpr uint8_t bth_se = 0x80;
inline constexpr uint8_t bth_padcnt_shift = 4;
inline constexpr uint8_t bth_padcnt_mask = 0x30;
inline constexpr uint8_t bth_tver_mask = 0x0f;

/* Datagram Extended Transport Header, 8 bytes (IBA 9.3.2). */
struct __attribute__((packed)) deth {
	rte_be32_t qkey;    /* 0: queue key */
	uint8_t resv8;      /* 4 */
	uint8_t sqpn[3];    /* 5: source QP */
};
static_assert(sizeof(deth) == 8);

inline constexpr size_t eth_len = sizeof(rte_ether_hdr);
inline constexpr size_t ipv4_len = sizeof(rte_ipv4_hdr);
inline constexpr size_t ipv6_len = sizeof(rte_ipv6_hdr);
inline constexpr size_t udp_len = sizeof(rte_udp_hdr);
inline constexpr size_t bth_len = sizeof(bth);
inline constexpr size_t deth_len = sizeof(deth);
inline constexpr size_t immdt_len = 4;
inline constexpr size_t icrc_len = 4;
inline constexpr size_t grh_len = 40;   /* verbs: GRH area before UD payload */

/* Bytes before the payload, per L3 type. */
inline constexpr size_t hdr_len_v4 = eth_len + ipv4_len + udp_len + bth_len + deth_len; /* 62 */
inline constexpr size_t hdr_len_v6 = eth_len + ipv6_len + udp_len + bth_len + deth_len; /* 82 */
static_assert(hdr_len_v4 == 62 && hdr_len_v6 == 82);

/* The address part of a packet (what an AH determines): Eth/IP/UDP. */
inline constexpr size_t addr_len_v4 = eth_len + ipv4_len + udp_len; /* 42 */
inline constexpr size_t addr_len_v6 = eth_len + ipv6_len + udp_len; /* 62 */

inline void put24(uint8_t *p, uint32_t v)
{
	p[0] = uint8_t(v >> 16);
	p[1] = uint8_t(v >> 8);
	p[2] = uint8_t(v);
}
inline uint32_t get24(const uint8_t *p)
{
	return uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2];
}

/* Pad bytes that bring n up to a multiple of 4 (IBA 9.2.4: PadCnt). */
constexpr unsigned pad_for(size_t n) { return unsigned(-n & 3u); }

/* RoCEv2 UDP source port from the GRH flow label, as the Linux kernel does
 * (rdma_flow_label_to_udp_sport, include/rdma/ib_verbs.h): fold the 20 bit
 * label into 14 bits and put it in the ephemeral range 0xC000..0xFFFF. */
constexpr uint16_t udp_sport_from_flow_label(uint32_t fl)
{
	uint32_t lo = fl & 0x03fff, hi = fl & 0xFC000;
	lo ^= hi >> 14;
	return uint16_t(lo | 0xC000);
}

/* GIDs: 16 bytes, network order. IPv4 addresses are IPv4-mapped IPv6
 * (::ffff:a.b.c.d), as RoCEv2 GID tables hold them. */
struct gid {
	uint8_t raw[16];
	bool is_v4_mapped() const
	{
		static constexpr uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		return __builtin_memcmp(raw, pfx, 12) == 0;
	}
	bool is_multicast() const
	{
		if (is_v4_mapped())
			return (raw[12] & 0xf0) == 0xe0;
		return raw[0] == 0xff;
	}
	bool is_zero() const
	{
		uint64_t a, b;
		__builtin_memcpy(&a, raw, 8);
		__builtin_memcpy(&b, raw + 8, 8);
		return (a | b) == 0;
	}
	/* IPv4 address in network order; valid when is_v4_mapped(). */
	rte_be32_t v4() const
	{
		rte_be32_t a;
		__builtin_memcpy(&a, raw + 12, 4);
		return a;
	}
	static gid from_v4(rte_be32_t a)
	{
		gid g{};
		g.raw[10] = g.raw[11] = 0xff;
		__builtin_memcpy(g.raw + 12, &a, 4);
		return g;
	}
	bool operator==(const gid &o) const { return __builtin_memcmp(raw, o.raw, 16) == 0; }
};
static_assert(sizeof(gid) == 16);

} // namespace rdgram::wire

#endif
