/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The UD queue pair as a poll thread sees it: burst send and burst receive
 * with verbs semantics, over any driver that models the ud_driver concept.
 *
 * Drivers are compile-time policies: the poll loop is a template over the
 * driver type, so the data path makes no virtual call per packet. The
 * control path (create a QP, create an AH, query the port) goes through the
 * virtual interface in device.h.
 */
#ifndef RDGRAM_UD_H
#define RDGRAM_UD_H

#include <concepts>
#include <cstdint>
#include <type_traits>

#include <rte_mbuf.h>

#include "rdgram/stats.h"
#include "rdgram/wire.h"

namespace rdgram {

/* An address handle as the data path holds it: a slot in the AH table and
 * the generation it was created with. A handle whose generation no longer
 * matches its slot is stale: dropped and counted, never dereferenced. */
struct ah_handle {
	uint32_t slot;
	uint32_t gen;
	bool operator==(const ah_handle &) const = default;
};
inline constexpr ah_handle ah_null{~0u, 0};

/* Send work request flags. */
enum send_flags : uint16_t {
	send_imm = 1u << 0,       /* carry wr.imm_data (SEND_ONLY_WITH_IMMEDIATE) */
	send_solicited = 1u << 1, /* set BTH SE */
	send_inline = 1u << 2,    /* payload from inline_data, not from mbuf */
};

/* One UD send (ibv_send_wr with wr.ud, flattened). With send_inline the
 * bytes at inline_data are copied and the caller keeps ownership; otherwise
 * mbuf holds the payload and, once the WR is accepted, belongs to the driver.
 * A Q_Key with the high bit set means "use the QP's own Q_Key" (IBA
 * 10.2.5, ibv_post_send(3) wr.ud.remote_qkey). */
struct send_wr {
	ah_handle ah;
	uint32_t remote_qpn;
	uint32_t remote_qkey;
	rte_mbuf *mbuf;
	const void *inline_data;
	uint32_t inline_len;
	uint32_t imm_data; /* network order, as ibv_send_wr.imm_data */
	uint16_t flags;
};

/* Receive completion flags. */
enum wc_flags : uint8_t {
	wc_grh = 1u << 0,      /* IBV_WC_GRH: the 40-byte GRH area is valid */
	wc_with_imm = 1u << 1, /* IBV_WC_WITH_IMM */
	wc_solicited = 1u << 2,
};

/* RoCE L3 type of a received packet, numbered as the kernel's enum
 * rdma_network_type (include/rdma/ib_verbs.h: RDMA_NETWORK_IB 0,
 * RDMA_NETWORK_IPV4 2, RDMA_NETWORK_IPV6 3; 1 was RoCEv1). The mlx5 CQE
 * carries the same information in its own numbering (flags_rqpn bits
 * 27:24, see drivers/mlx5); only the names are used in rdgram. */
enum class l3_type : uint8_t { ib_grh = 0, ipv4 = 2, ipv6 = 3 };

/* One receive completion (ibv_wc for a UD QP, plus the buffer). As in verbs,
 * the mbuf's data begins with the 40-byte GRH area and the payload follows:
 * for RoCEv2 over IPv6 the area holds the IPv6 header; over IPv4, its last
 * 20 bytes hold the IPv4 header and the first 20 are zero (verbs leaves them
 * undefined). byte_len counts the GRH area plus the payload, as ibv_wc does.
 * The receiver owns the mbuf and must free it. */
struct recv_wc {
	rte_mbuf *mbuf;
	uint32_t byte_len;
	uint32_t qp_num;   /* local QP that received it */
	uint32_t src_qp;
	uint32_t imm_data; /* network order */
	uint16_t slid;     /* 0 on RoCE */
	uint16_t pkey_index;
	uint8_t sl;
	uint8_t wc_flags;
	l3_type l3;
	uint8_t dlid_path_bits;
	wire::gid sgid;    /* source GID (IPv4-mapped for IPv4) */
	wire::gid dgid;
};

/* What the poll loop needs from a driver queue. */
template <class D>
concept ud_driver = requires(D &d, send_wr *s, recv_wc *r, uint16_t n) {
	{ d.tx_burst(s, n) } -> std::same_as<uint16_t>;
	{ d.rx_burst(r, n) } -> std::same_as<uint16_t>;
	{ d.tx_flush() } -> std::same_as<void>;
	{ d.tx_pending() } -> std::convertible_to<unsigned>;
	{ d.post_recvs() } -> std::same_as<void>;
	/* The driver's counter set (stats.h): the generic slice and its own,
	 * iterated as (name, description, value). */
	{ d.counters() } -> std::convertible_to<const qp_counters &>;
	requires counter_set<std::remove_cvref_t<decltype(d.counters())>>;
	{ D::max_burst } -> std::convertible_to<unsigned>;
};

} // namespace rdgram

#endif
