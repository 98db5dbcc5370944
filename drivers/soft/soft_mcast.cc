/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft multicast membership on the wire: IGMPv2 (RFC 2236) for
 * IPv4-mapped groups, MLDv2 (RFC 3810) for IPv6 groups. A switch with IGMP
 * or MLD snooping forwards a group's RoCEv2 datagrams to a port only after
 * such a report, so a join is not complete without it; the data-path half
 * (which QP gets the datagrams) is soft_queue::attach_mcast. The frames
 * travel the neighbour code's way: the control thread queues them on the
 * control-TX ring, the poll thread of queue 0 puts them on the port.
 */
#include <cerrno>
#include <cstring>

#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "rdgram/tsan.h"
#include "soft_device.h"

namespace rdgram::soft {

namespace {

constexpr uint8_t igmp_v2_report = 0x16, igmp_leave = 0x17; /* RFC 2236 sec. 2.1 */
constexpr uint8_t mld_v2_report = 143;                       /* RFC 3810 sec. 5.2 */
constexpr uint8_t mld_change_to_include = 3, mld_change_to_exclude = 4;
/* IPv4 with the 4-byte Router Alert option (RFC 2113), which IGMP
 * carries (RFC 2236 sec. 2). */
constexpr uint32_t igmp_ip_len = 24, igmp_len = 8;
/* IPv6 + Hop-by-Hop header with Router Alert (RFC 2711; MLD value 0) +
 * MLDv2 report with one record of no sources. */
constexpr uint32_t mld_hbh_len = 8, mld_len = 8 + 20;

uint16_t csum16(const void *p, size_t n, uint32_t sum = 0)
{
	/* Words summed in memory order: the result goes in as it is. */
	return fold_csum(__rte_raw_cksum(p, n, sum));
}

} // namespace

int soft_device::send_membership(const wire::gid &g, bool join)
{
	const bool v4 = g.is_v4_mapped();
	const wire::gid *src = nullptr;
	for (const auto &a : cfg_.addresses)
		if (a.is_v4_mapped() == v4) {
			src = &a;
			break;
		}
	if (src == nullptr)
		return EINVAL;
	rte_mbuf *m = rte_pktmbuf_alloc(mp_);
	const uint32_t len = v4 ? wire::eth_len + igmp_ip_len + igmp_len
				: wire::eth_len + wire::ipv6_len + mld_hbh_len + mld_len;
	uint8_t *f = m != nullptr ? reinterpret_cast<uint8_t *>(rte_pktmbuf_append(m, uint16_t(len))) : nullptr;
	if (f == nullptr) {
		rte_pktmbuf_free(m);
		mst_.tx_failed++;
		return ENOBUFS;
	}
	memset(f, 0, len);
	auto *eth = reinterpret_cast<rte_ether_hdr *>(f);
	eth->src_addr = mac_;
	if (v4) {
		/* Reports go to the group, leaves to all routers (RFC 2236 sec. 3). */
		rte_be32_t dst = join ? g.v4() : RTE_BE32(RTE_IPV4(224, 0, 0, 2));
		wire::gid dg = wire::gid::from_v4(dst);
		eth->dst_addr = multicast_mac(dg);
		eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(f + wire::eth_len);
		ip->version_ihl = 0x46;
		ip->type_of_service = 0xc0; /* internetwork control, as Linux sends */
		ip->total_length = rte_cpu_to_be_16(uint16_t(igmp_ip_len + igmp_len));
		ip->fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG);
		ip->time_to_live = 1;
		ip->next_proto_id = IPPROTO_IGMP;
		ip->src_addr = src->v4();
		ip->dst_addr = dst;
		uint8_t *ra = f + wire::eth_len + 20;
		ra[0] = 0x94; /* Router Alert, copied flag, length 4, value 0 */
		ra[1] = 4;
		ip->hdr_checksum = csum16(ip, igmp_ip_len);
		uint8_t *igmp = f + wire::eth_len + igmp_ip_len;
		igmp[0] = join ? igmp_v2_report : igmp_leave;
		memcpy(igmp + 4, g.raw + 12, 4);
		const uint16_t c = csum16(igmp, igmp_len);
		memcpy(igmp + 2, &c, 2);
	} else {
		static constexpr uint8_t all_mldv2[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x16};
		wire::gid dg;
		memcpy(dg.raw, all_mldv2, 16);
		eth->dst_addr = multicast_mac(dg);
		eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV6);
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(f + wire::eth_len);
		ip->vtc_flow = RTE_BE32(0x60000000);
		ip->payload_len = rte_cpu_to_be_16(uint16_t(mld_hbh_len + mld_len));
		ip->proto = 0; /* Hop-by-Hop Options */
		ip->hop_limits = 1;
		memcpy(ip->src_addr, src->raw, 16);
		memcpy(ip->dst_addr, all_mldv2, 16);
		uint8_t *hbh = f + wire::eth_len + wire::ipv6_len;
		hbh[0] = IPPROTO_ICMPV6;
		hbh[1] = 0;    /* 8 bytes */
		hbh[2] = 5;    /* Router Alert */
		hbh[3] = 2;
		hbh[4] = hbh[5] = 0; /* MLD */
		hbh[6] = 1;    /* PadN, 0 bytes */
		hbh[7] = 0;
		uint8_t *mld = hbh + mld_hbh_len;
		mld[0] = mld_v2_report;
		mld[7] = 1; /* one record */
		mld[8] = join ? mld_change_to_exclude : mld_change_to_include;
		memcpy(mld + 12, g.raw, 16);
		/* ICMPv6 checksum over the pseudo-header (RFC 8200 sec. 8.1). */
		uint32_t ph = __rte_raw_cksum(ip->src_addr, 32, 0);
		ph += rte_cpu_to_be_16(uint16_t(mld_len)) + rte_cpu_to_be_16(IPPROTO_ICMPV6);
		const uint16_t c = csum16(mld, mld_len, ph);
		memcpy(mld + 2, &c, 2);
	}
	RDGRAM_TSAN_RELEASE(m);
	if (ctl_tx_ == nullptr || rte_ring_sp_enqueue(ctl_tx_, m) != 0) {
		rte_pktmbuf_free(m);
		mst_.tx_failed++;
		return ENOBUFS;
	}
	if (v4)
		(join ? mst_.igmp_reports : mst_.igmp_leaves)++;
	else
		(join ? mst_.mld_reports : mst_.mld_leaves)++;
	return 0;
}

int soft_device::join_mcast(const wire::gid &g)
{
	if (!g.is_multicast())
		return EINVAL;
	auto it = joined_.find(g);
	if (it != joined_.end()) {
		it->second++;
		return 0;
	}
	/* Check the family before counting the join. */
	bool have = false;
	for (const auto &a : cfg_.addresses)
		have |= a.is_v4_mapped() == g.is_v4_mapped();
	if (!have)
		return EINVAL;
	joined_.emplace(g, 1);
	return send_membership(g, true);
}

int soft_device::leave_mcast(const wire::gid &g)
{
	if (!g.is_multicast())
		return EINVAL;
	auto it = joined_.find(g);
	if (it == joined_.end())
		return EINVAL;
	if (--it->second != 0)
		return 0;
	joined_.erase(it);
	return send_membership(g, false);
}

} // namespace rdgram::soft
