/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft address vector: what the AH table holds per destination
 * (the software twin of the 48-byte mlx5 AV), written by the control
 * thread (soft_device.cc builds it, soft_neigh.cc swaps its MAC) and read
 * by the poll threads' TX (soft_tx.h).
 */
#ifndef RDGRAM_SOFT_AV_H
#define RDGRAM_SOFT_AV_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <rte_ether.h>

#include "rdgram/wire.h"

namespace rdgram::soft {

/* The soft AV: the Eth/IP/UDP headers of every packet to one destination,
 * with lengths and checksums left zero, plus what TX needs to finish them.
 * 60 bytes, so that with its generation it fills one 64-byte line of the
 * AH table (the 48-byte mlx5 AV's counterpart). For IPv6 the header stops
 * after the UDP destination port: the UDP length and checksum are written
 * per packet anyway. In the table the AV starts its 64-byte slot, so the
 * first 8 bytes (av_mac_word) are an aligned word. */
inline constexpr size_t av_hdr_len = wire::addr_len_v6 - 4;
struct alignas(4) soft_av {
	uint8_t hdr[av_hdr_len]; /* 58: Eth/IPv6/UDP ports, or Eth/IPv4/UDP + spare */
	uint8_t l3;              /* 4 or 6 */
	uint8_t sl;              /* the AH's SL: the PCP on a VLAN port (0..7) */
};
static_assert(sizeof(soft_av) == 60);
/* For IPv4 the spare bytes after the 42 header bytes hold the one's
 * complement partial sum of the IPv4 header without its total length, so
 * TX finishes the checksum with one add. */
inline constexpr size_t av_v4_csum_off = 44;

/* The AV's first 8 bytes as one word: the destination MAC and the first two
 * bytes of the source MAC. The control thread swaps the destination MAC of
 * a live AV with set_av_mac (one atomic store), so a poll thread copying
 * the AV sees the old MAC or the new one, never a mix. */
/* The AV starts a 64-byte table slot, so the word is 8-byte aligned, which
 * std::atomic_ref requires (and asserts in a debug libstdc++). Through it
 * the compiler takes the word's alignment from uint64_t, not from soft_av's
 * alignas(4): clang inlines the access as g++ does, instead of warning
 * -Watomic-alignment and calling libatomic's __atomic_load_8. (Not
 * __builtin_assume_aligned: it crashes clang 14's -fsanitize=alignment
 * code generation.) */
inline std::atomic_ref<uint64_t> av_mac_ref(const soft_av &av)
{
	/* atomic_ref<const T> is C++26: loads through it do not write. */
	return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(const_cast<uint8_t *>(av.hdr)));
}
inline uint64_t av_mac_word(const soft_av &av) { return av_mac_ref(av).load(std::memory_order_relaxed); }
inline void set_av_mac(soft_av &av, const rte_ether_addr &mac)
{
	uint64_t v = av_mac_word(av);
	memcpy(&v, mac.addr_bytes, 6);
	av_mac_ref(av).store(v, std::memory_order_relaxed);
}

/* The one's complement fold that finishes a partial sum: the IPv4
 * header checksum from av_v4_csum_off (TX), IGMP's (soft_mcast.cc). */
inline uint16_t fold_csum(uint32_t s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return uint16_t(~s);
}

} // namespace rdgram::soft

#endif
