/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/common/ibv: the port facts every rdma-core driver (verbs, mlx5,
 * EFA) reports as rdgram's port_attr, decided here once, apart from the
 * verbs calls that gather them (ibv_device.cc, query_port), so they can
 * be tested without an RDMA device (tests/unit/test_verbs_logic.cc):
 *   - the MTU: ibv_mtu to bytes; any other value is refused (EINVAL);
 *   - the GID table (ibv_query_gid_table) with each entry's type, and which
 *     entries an AH may use as its source;
 *   - GRH required, max_ah, P_Key, LID.
 * Nothing here calls libibverbs; it only uses its structures.
 */
#ifndef RDGRAM_IBV_PORT_H
#define RDGRAM_IBV_PORT_H

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <infiniband/verbs.h>

#include "rdgram/device.h"
#include "rdgram/wire.h"

namespace rdgram::ibv {

/* ibv_mtu to bytes (IBA 7.7.9: 256 << (enum - 1)); 0 for a value outside
 * IBV_MTU_256..IBV_MTU_4096, which translate_port refuses (EINVAL): a port
 * whose MTU is not one of the five IB MTUs is not guessed at. */
constexpr uint32_t mtu_bytes(int m)
{
	return (m >= IBV_MTU_256 && m <= IBV_MTU_4096) ? 128u << m : 0;
}

/* Type of a GID table entry (ibv_gid_entry.gid_type), plus "no entry". */
enum class gid_kind : uint8_t { none, ib, roce_v1, roce_v2 };

inline gid_kind gid_kind_of(uint32_t t)
{
	switch (t) {
	case IBV_GID_TYPE_IB:
		return gid_kind::ib;
	case IBV_GID_TYPE_ROCE_V1:
		return gid_kind::roce_v1;
	case IBV_GID_TYPE_ROCE_V2:
		return gid_kind::roce_v2;
	default:
		return gid_kind::none;
	}
}

/* What ibv_query_port, ibv_query_device, ibv_query_pkey and the GID table
 * said about one port. */
struct port_query {
	ibv_port_attr pa{};
	uint8_t port_num = 1;       /* the physical port these facts are for */
	int dev_max_ah = 0;         /* ibv_device_attr.max_ah (<= 0: no limit given) */
	uint32_t table_cap = 65536; /* rdgram's AH table size */
	uint16_t pkey0 = 0xffff;    /* P_Key table entry 0, host order */
	int numa_node = 0;
	const ibv_gid_entry *gids = nullptr; /* ibv_query_gid_table's entries */
	size_t ngids = 0;
};

/*
 * Translates a port query into port_attr, and every GID's type into kinds
 * (kinds[i] for sgid_index i; none for an empty index). (Any thread.)
 *
 * port_attr.gids holds the GIDs a rdgram AH may use as its source: RoCEv2
 * entries on an Ethernet port, IB entries on an InfiniBand port, every
 * other index zero. The AH layer (ah_from_wc.h's gid_index) keys GIDs by
 * value and assumes one type per port; mlx5 lists each address twice on
 * RoCE (RoCEv1 and RoCEv2, adjacent indices), and a lookup by value would
 * otherwise return the RoCEv1 index, whose replies the peer does not speak
 * (rdgram has no RoCEv1). The full typed table stays in kinds.
 *
 * GRH: required on an Ethernet port (RoCE has no LRH: the AH must carry
 * the GRH), or when the port reports IBV_QPF_GRH_REQUIRED (ibv_query_port(3):
 * "the port requires GRH for all AHs"). max_ah: the device's, capped by
 * rdgram's table. Returns 0, or EINVAL when the MTU is not an IB MTU.
 */
inline int translate_port(const port_query &q, port_attr *out, std::vector<gid_kind> *kinds)
{
	const bool eth = q.pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	out->link = eth ? link_layer::ethernet : link_layer::infiniband;
	out->grh_required = eth || (q.pa.flags & IBV_QPF_GRH_REQUIRED) != 0;
	out->active_mtu = mtu_bytes(q.pa.active_mtu);
	if (out->active_mtu == 0)
		return EINVAL;
	out->max_ah = (q.dev_max_ah > 0 && uint32_t(q.dev_max_ah) < q.table_cap) ? uint32_t(q.dev_max_ah)
										: q.table_cap;
	out->pkey = q.pkey0;
	out->lid = eth ? 0 : q.pa.lid;
	out->numa_node = q.numa_node;

	size_t len = q.pa.gid_tbl_len > 0 ? size_t(q.pa.gid_tbl_len) : 0;
	for (size_t i = 0; i < q.ngids; i++)
		if (q.gids[i].port_num == q.port_num && q.gids[i].gid_index >= len)
			len = q.gids[i].gid_index + 1;
	out->gids.assign(len, wire::gid{});
	kinds->assign(len, gid_kind::none);
	const gid_kind usable = eth ? gid_kind::roce_v2 : gid_kind::ib;
	for (size_t i = 0; i < q.ngids; i++) {
		const ibv_gid_entry &e = q.gids[i];
		if (e.port_num != q.port_num)
			continue;
		const gid_kind k = gid_kind_of(e.gid_type);
		(*kinds)[e.gid_index] = k;
		if (k == usable)
			memcpy(out->gids[e.gid_index].raw, e.gid.raw, 16);
	}
	return 0;
}

} // namespace rdgram::ibv

#endif
