/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft receive path: rx_burst and its per-frame validation,
 * inline (the poll thread's; soft_queue.h holds the state).
 *
 * RX checks, in order, every field a RoCE HCA checks for a UD QP and counts
 * each drop under its reason (soft_counters.h). A delivered packet is
 * rearranged in its own mbuf into verbs' layout: 40-byte GRH area, then the
 * payload.
 *
 * Neighbour frames (ARP, and the ICMPv6 Neighbor Solicitation/Advertisement
 * of ND) are not the poll thread's business: the branches that would drop
 * them (not IP, not UDP) hand the mbuf to the control thread over the
 * device's slow-path ring instead (soft_neigh.h). The control thread's own
 * frames come back the other way, on queue 0's control-TX ring, which
 * rx_burst empties onto the port: the control thread never calls
 * rte_eth_tx_burst on a queue a poll thread owns.
 */
#ifndef RDGRAM_SOFT_RX_H
#define RDGRAM_SOFT_RX_H

#include <cstring>

#include <rte_branch_prediction.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_ring.h>
#include <rte_udp.h>

#include "rdgram/burst_guard.h"
#include "rdgram/crc32.h"
#include "rdgram/dest_cache.h"
#include "rdgram/tsan.h"
#include "rdgram/ud.h"
#include "rdgram/wire.h"
#include "soft_queue.h"

namespace rdgram::soft {

/* P_Key match, IBA 10.9.3: same 15-bit partition, at least one full member. */
inline bool pkey_match(uint16_t a, uint16_t b)
{
	return ((a ^ b) & 0x7fff) == 0 && ((a | b) & 0x8000) != 0;
}

inline uint16_t soft_queue::rx_burst(recv_wc *wcs, uint16_t n)
{
	if (ctl_tx_ != nullptr && unlikely(!rte_ring_empty(ctl_tx_)))
		tx_control();
	if (n > max_burst)
		n = max_burst;
	rte_mbuf *pkts[max_burst];
	/* First what waits for this queue: its own group copies, then what
	 * other queues handed here (both tagged in hash.usr); then the port. */
	uint16_t nh = 0;
	if (unlikely(nagain_ != 0)) {
		nh = uint16_t(nagain_ < n ? nagain_ : n);
		memcpy(pkts, again_, nh * sizeof(pkts[0]));
		nagain_ -= nh;
		memmove(again_, again_ + nh, nagain_ * sizeof(again_[0]));
	}
	if (steer_ != nullptr && nh < n) {
		const uint16_t k = uint16_t(rte_ring_sc_dequeue_burst(steer_->ring(queue_),
								       reinterpret_cast<void **>(pkts + nh), n - nh, nullptr));
		if (RDGRAM_TSAN)
			for (uint16_t i = nh; i < nh + k; i++)
				RDGRAM_TSAN_ACQUIRE(pkts[i]);
		ctr_.rx_handoff_in += k;
		nh = uint16_t(nh + k);
	}
	burst_guard::enter(guard_);
	const uint16_t nb = uint16_t(nh + rte_eth_rx_burst(port_, queue_, pkts + nh, uint16_t(n - nh)));
	burst_guard::leave(guard_);
	if (RDGRAM_TSAN)
		for (uint16_t i = nh; i < nb; i++)
			RDGRAM_TSAN_ACQUIRE(pkts[i]);
	uint16_t out = 0;
	for (uint16_t i = 0; i < nb; i++) {
		if (i + 1 < nb)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		if (likely(parse(pkts[i], wcs[out], unlikely(i < nh) ? pkts[i]->hash.usr : 0)))
			out++;
		else if (likely(!taken_))
			rte_pktmbuf_free(pkts[i]);
		else
			taken_ = false; /* the control thread or another queue owns it now */
	}
	if (unlikely(nho_ != 0))
		flush_handoff();
	if (ahn_ != nullptr && out != 0)
		set_ahns(wcs, out);
	return out;
}

inline bool soft_queue::parse(rte_mbuf *m, recv_wc &wc, uint32_t tag)
{
	if (unlikely(m->nb_segs != 1) && rte_pktmbuf_linearize(m) != 0) {
		ctr_.rx_chained_mbuf++;
		return false;
	}
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	uint32_t flen = rte_pktmbuf_data_len(m);
	if (unlikely(flen < wire::eth_len)) {
		ctr_.rx_truncated++;
		return false;
	}
	uint16_t et = reinterpret_cast<rte_ether_hdr *>(f)->ether_type;
	/* 802.1Q: one branch for an untagged port's untagged frames. */
	uint8_t pcp = 0;
	if (unlikely(view_.vlan != 0 || et == RTE_BE16(RTE_ETHER_TYPE_VLAN) || et == RTE_BE16(RTE_ETHER_TYPE_QINQ) ||
		     (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED)) &&
	    !vlan_rx(m, f, flen, et, &pcp))
		return false;
	bool v4;
	if (et == RTE_BE16(RTE_ETHER_TYPE_IPV4))
		v4 = true;
	else if (et == RTE_BE16(RTE_ETHER_TYPE_IPV6))
		v4 = false;
	else {
		if (et == RTE_BE16(RTE_ETHER_TYPE_ARP) && ctl_rx_ != nullptr)
			return to_control(m);
		ctr_.rx_not_ip++;
		return false;
	}
	const uint32_t l3 = wire::eth_len;
	const uint32_t l3_len = v4 ? wire::ipv4_len : wire::ipv6_len;
	if (unlikely(flen < l3 + l3_len + wire::udp_len + wire::bth_len + wire::deth_len + wire::icrc_len)) {
		/* ND messages without options (78 bytes) are shorter than any
		 * RoCEv2 packet. */
		if (!v4 && ctl_rx_ != nullptr && is_nd(f, flen))
			return to_control(m);
		/* A whole IP packet of another protocol that is merely short
		 * (a TCP ACK, an ICMPv6 router solicitation: what a real link
		 * carries besides RoCE) is not truncated: it is not UDP. */
		if (flen >= l3 + l3_len) {
			const uint32_t ip_len = v4 ? rte_be_to_cpu_16(reinterpret_cast<rte_ipv4_hdr *>(f + l3)->total_length)
						   : l3_len + rte_be_to_cpu_16(reinterpret_cast<rte_ipv6_hdr *>(f + l3)->payload_len);
			if (ip_len >= l3_len && l3 + ip_len <= flen && f[l3 + (v4 ? 9 : 6)] != IPPROTO_UDP) {
				ctr_.rx_not_udp++;
				return false;
			}
		}
		ctr_.rx_truncated++;
		return false;
	}
	uint32_t l4_len; /* UDP header + its payload, from the IP header */
	const uint8_t *dst;
	if (v4) {
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(f + l3);
		uint32_t tot = rte_be_to_cpu_16(ip->total_length);
		if (unlikely(ip->version_ihl != 0x45 || tot < l3_len + wire::udp_len)) {
			ctr_.rx_bad_ip_header++;
			return false;
		}
		if (unlikely(l3 + tot > flen)) {
			ctr_.rx_truncated++;
			return false;
		}
		if (unlikely(rte_ipv4_cksum(ip) != 0)) {
			ctr_.rx_bad_ip_checksum++;
			return false;
		}
		if (unlikely(ip->fragment_offset & RTE_BE16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK))) {
			ctr_.rx_ip_fragment++;
			return false;
		}
		if (unlikely(ip->next_proto_id != IPPROTO_UDP)) {
			ctr_.rx_not_udp++;
			return false;
		}
		l4_len = tot - l3_len;
		dst = reinterpret_cast<const uint8_t *>(&ip->dst_addr);
	} else {
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(f + l3);
		uint32_t pl = rte_be_to_cpu_16(ip->payload_len);
		if (unlikely((f[l3] >> 4) != 6 || pl < wire::udp_len)) {
			ctr_.rx_bad_ip_header++;
			return false;
		}
		if (unlikely(l3 + l3_len + pl > flen)) {
			ctr_.rx_truncated++;
			return false;
		}
		if (unlikely(ip->proto != IPPROTO_UDP)) {
			if (ctl_rx_ != nullptr && is_nd(f, flen))
				return to_control(m);
			ctr_.rx_not_udp++;
			return false;
		}
		l4_len = pl;
		dst = ip->dst_addr;
	}
	const uint32_t l4 = l3 + l3_len;
	auto *udp = reinterpret_cast<rte_udp_hdr *>(f + l4);
	if (unlikely(udp->dst_port != RTE_BE16(wire::roce_v2_udp_port))) {
		ctr_.rx_not_roce++;
		return false;
	}
	if (unlikely(rte_be_to_cpu_16(udp->dgram_len) != l4_len)) {
		ctr_.rx_bad_udp_length++;
		return false;
	}
	bool mine = false;
	if (v4) {
		rte_be32_t d;
		memcpy(&d, dst, 4);
		for (unsigned i = 0; i < view_.n_v4; i++)
			mine |= view_.v4[i] == d;
	} else {
		for (unsigned i = 0; i < view_.n_v6; i++)
			mine |= memcmp(view_.v6[i], dst, 16) == 0;
	}
	/* Not one of our addresses: a multicast group a QP of the port
	 * attached to (the unicast path pays nothing for it), else a
	 * mismatch. */
	int mq = -1;
	if (unlikely(!mine)) {
		if (nmc_ == 0 && steer_ == nullptr && tag == 0) {
			ctr_.rx_dgid_mismatch++;
			return false;
		}
		if ((mq = group_route(m, v4, dst, tag)) < 0)
			return false;
	}
	auto *bth = reinterpret_cast<wire::bth *>(udp + 1);
	if (unlikely((bth->flags & wire::bth_tver_mask) != 0)) {
		ctr_.rx_bad_bth_version++;
		return false;
	}
	const bool imm = bth->opcode == wire::op_ud_send_only_imm;
	if (unlikely(bth->opcode != wire::op_ud_send_only && !imm)) {
		ctr_.rx_bad_opcode++;
		return false;
	}
	if (unlikely(!pkey_match(rte_be_to_cpu_16(bth->pkey), view_.pkey))) {
		ctr_.rx_bad_pkey++;
		return false;
	}
	const uint32_t dqpn = wire::get24(bth->dqpn);
	unsigned qi = 0;
	if (unlikely(mq >= 0)) {
		/* To a group: IBA 10.5.2.1 wants the multicast DQPN. */
		if (dqpn != mcast_qpn) {
			ctr_.rx_unknown_qpn++;
			return false;
		}
		qi = unsigned(mq);
	} else {
		while (qi < nqp_ && qps_[qi].qpn != dqpn)
			qi++;
		if (unlikely(qi == nqp_)) {
			/* Another queue's QP: its poll thread delivers it. A
			 * frame handed here already is not handed on (the QP
			 * left this queue meanwhile). */
			if (steer_ != nullptr && tag == 0) {
				const int o = steer_->owner(dqpn);
				if (o >= 0 && o != queue_) {
					hand_off(m, uint16_t(o));
					return false;
				}
			}
			ctr_.rx_unknown_qpn++;
			return false;
		}
	}
	/* Lengths: headers, pad and ICRC must fit inside the UDP length. */
	const uint32_t after_udp = wire::bth_len + wire::deth_len + (imm ? wire::immdt_len : 0);
	const unsigned pad = (bth->flags & wire::bth_padcnt_mask) >> wire::bth_padcnt_shift;
	if (unlikely(l4_len < wire::udp_len + after_udp + pad + wire::icrc_len)) {
		ctr_.rx_bad_length++;
		return false;
	}
	const uint32_t paylen = l4_len - wire::udp_len - after_udp - pad - wire::icrc_len;
	if (unlikely(paylen > view_.mtu)) {
		ctr_.rx_bad_length++;
		return false;
	}
	auto *deth = reinterpret_cast<wire::deth *>(bth + 1);
	if (unlikely(rte_be_to_cpu_32(deth->qkey) != qps_[qi].qkey)) {
		ctr_.rx_bad_qkey++;
		return false;
	}
	const uint32_t icrc_off = l4 + l4_len - wire::icrc_len;
	if (unlikely(!icrc_ok(f, v4, l3, icrc_off, crc_for(icrc_off - (l3 - 8))))) {
		ctr_.rx_bad_icrc++;
		return false;
	}

	/* Deliver: fill the completion, then rearrange into verbs' layout. */
	wc.qp_num = qps_[qi].qpn; /* dqpn, or the attached QP for a group */
	wc.src_qp = wire::get24(deth->sqpn);
	wc.wc_flags = uint8_t(wc_grh | (imm ? wc_with_imm : 0) |
			      ((bth->flags & wire::bth_se) ? wc_solicited : 0));
	wc.imm_data = 0;
	if (imm)
		memcpy(&wc.imm_data, deth + 1, 4);
	wc.slid = 0;
	wc.sl = pcp; /* RoCE: the VLAN priority (0 untagged) */
	wc.pkey_index = 0;
	wc.dlid_path_bits = 0;
	const uint32_t pay_off = l4 + wire::udp_len + after_udp;
	uint8_t *grh = f + pay_off - wire::grh_len;
	if (v4) {
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(f + l3);
		wc.l3 = l3_type::ipv4;
		wc.sgid = wire::gid::from_v4(ip->src_addr);
		wc.dgid = wire::gid::from_v4(ip->dst_addr);
		if (unlikely((ip->type_of_service & 3) == 3))
			ctr_.rx_ecn_ce++; /* the mark travels in the GRH area */
		/* IPv4 header into the last 20 bytes of the GRH area (the copy
		 * cannot overlap: the area starts past the IP header's end). */
		memcpy(grh + 20, f + l3, wire::ipv4_len);
		memset(grh, 0, 20);
	} else {
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(f + l3);
		wc.l3 = l3_type::ipv6;
		memcpy(wc.sgid.raw, ip->src_addr, 16);
		memcpy(wc.dgid.raw, ip->dst_addr, 16);
		if (unlikely((ip->vtc_flow & RTE_BE32(3u << 20)) == RTE_BE32(3u << 20)))
			ctr_.rx_ecn_ce++;
		memmove(grh, f + l3, wire::ipv6_len);
	}
	rte_pktmbuf_adj(m, uint16_t(pay_off - wire::grh_len));
	rte_pktmbuf_trim(m, uint16_t(rte_pktmbuf_pkt_len(m) - wire::grh_len - paylen));
	wc.mbuf = m;
	wc.byte_len = wire::grh_len + paylen;
	ctr_.rx_pkts++;
	ctr_.rx_bytes += paylen;
	return true;
}

inline bool soft_queue::vlan_rx(rte_mbuf *m, uint8_t *&f, uint32_t &flen, uint16_t &et, uint8_t *pcp)
{
	uint16_t tci;
	if (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) {
		/* The PMD took the tag out (or parse did, before a hand-off or
		 * a group copy): a second tag left in the frame is QinQ. */
		if ((m->ol_flags & RTE_MBUF_F_RX_QINQ_STRIPPED) || et == RTE_BE16(RTE_ETHER_TYPE_VLAN) ||
		    et == RTE_BE16(RTE_ETHER_TYPE_QINQ)) {
			ctr_.rx_vlan_double_tagged++;
			return false;
		}
		tci = m->vlan_tci;
	} else if (et == RTE_BE16(RTE_ETHER_TYPE_VLAN)) {
		if (unlikely(flen < wire::eth_len + 4)) {
			ctr_.rx_truncated++;
			return false;
		}
		uint16_t inner, tci_be;
		memcpy(&tci_be, f + 14, 2);
		memcpy(&inner, f + 16, 2);
		if (inner == RTE_BE16(RTE_ETHER_TYPE_VLAN) || inner == RTE_BE16(RTE_ETHER_TYPE_QINQ)) {
			ctr_.rx_vlan_double_tagged++;
			return false;
		}
		tci = rte_be_to_cpu_16(tci_be);
		/* Out of the frame, as the PMD's strip would: the MACs move
		 * up over the tag. Everything after (the control thread's
		 * ARP/ND, the ICRC at l3 - 8) sees an untagged frame. */
		memmove(f + 4, f, 2 * RTE_ETHER_ADDR_LEN);
		rte_pktmbuf_adj(m, 4);
		f += 4;
		flen -= 4;
		et = inner;
		m->vlan_tci = tci;
		m->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
	} else if (et == RTE_BE16(RTE_ETHER_TYPE_QINQ)) {
		ctr_.rx_vlan_double_tagged++; /* 802.1ad S-tag */
		return false;
	} else {
		if (view_.vlan != 0) {
			ctr_.rx_vlan_untagged++;
			return false;
		}
		return true;
	}
	/* VLAN ID 0 is a priority tag (802.1Q 9.6): an untagged port's own
	 * frames with a PCP; a VLAN port wants its VLAN ID. */
	if ((tci & RTE_VLAN_ID_MASK) != view_.vlan) {
		if (view_.vlan == 0)
			ctr_.rx_vlan_tagged++;
		else
			ctr_.rx_vlan_other++;
		return false;
	}
	*pcp = uint8_t(tci >> 13);
	return true;
}

inline uint32_t soft_queue::icrc_of(crc32_kernel k, const uint8_t *l3_minus8, uint32_t len)
{
	/* rdgram's PCLMUL/VPCLMULQDQ kernel (k: the queue's, chosen at
	 * attach; inline where the build's -march has it): the same
	 * CRC-32 as rte_net_crc_calc(RTE_NET_CRC32_ETH), about half its
	 * cost at 64..200 bytes and no indirect call
	 * (benchmarks/bench_crc32.cc, docs/PERFORMANCE.md). */
	return crc32_ieee(k, l3_minus8, len);
}

inline bool soft_queue::icrc_ok(uint8_t *f, bool v4, uint32_t l3_off, uint32_t icrc_off, crc32_kernel k)
{
	uint8_t save_lrh[8];
	uint8_t *lrh = f + l3_off - 8;
	memcpy(save_lrh, lrh, 8);
	memcpy(lrh, &icrc_ones64, 8);
	uint32_t l4_off = l3_off + (v4 ? wire::ipv4_len : wire::ipv6_len);
	auto *udp = reinterpret_cast<rte_udp_hdr *>(f + l4_off);
	auto *bth = reinterpret_cast<wire::bth *>(udp + 1);
	uint16_t save_ucs = udp->dgram_cksum;
	uint8_t save_b4 = bth->resv8a;
	udp->dgram_cksum = 0xffff;
	bth->resv8a = 0xff;
	uint32_t save_ip0 = 0, save_ip1 = 0;
	if (v4) {
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(f + l3_off);
		save_ip0 = ip->type_of_service;
		save_ip1 = uint32_t(ip->time_to_live) << 16 | ip->hdr_checksum;
		ip->type_of_service = 0xff;
		ip->time_to_live = 0xff;
		ip->hdr_checksum = 0xffff;
	} else {
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(f + l3_off);
		save_ip0 = ip->vtc_flow;
		save_ip1 = ip->hop_limits;
		/* Keep the version nibble; mask traffic class and flow label. */
		ip->vtc_flow = ip->vtc_flow | rte_cpu_to_be_32(0x0fffffffu);
		ip->hop_limits = 0xff;
	}
	uint32_t crc = rte_cpu_to_le_32(icrc_of(k, lrh, icrc_off - (l3_off - 8)));
	uint32_t got;
	memcpy(&got, f + icrc_off, 4);

	memcpy(lrh, save_lrh, 8);
	udp->dgram_cksum = save_ucs;
	bth->resv8a = save_b4;
	if (v4) {
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(f + l3_off);
		ip->type_of_service = uint8_t(save_ip0);
		ip->time_to_live = uint8_t(save_ip1 >> 16);
		ip->hdr_checksum = uint16_t(save_ip1);
	} else {
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(f + l3_off);
		ip->vtc_flow = save_ip0;
		ip->hop_limits = uint8_t(save_ip1);
	}
	return crc == got;
}

int soft_queue::group_route(rte_mbuf *m, bool v4, const uint8_t *dst, uint32_t tag)
{
	auto is_dst = [v4, dst](const wire::gid &g) {
		return v4 ? g.is_v4_mapped() && memcmp(g.raw + 12, dst, 4) == 0 : memcmp(g.raw, dst, 16) == 0;
	};
	/* A copy made for one member: that member, if still attached. */
	if (tag & handoff_tag::member) {
		for (unsigned i = 0; i < nmc_; i++)
			if (is_dst(mc_[i].gid) && qps_[mc_[i].qi].qpn == (tag & handoff_tag::qpn_mask))
				return int(mc_[i].qi);
		ctr_.rx_unknown_qpn++;
		return -1;
	}
	/* The frame is intact still (parse rearranges it only once it is
	 * delivered): every copy is made from it here, and every copy goes
	 * through the receiver's checks and counters on its own. */
	uint64_t others = 0;
	if (steer_ != nullptr && !(tag & handoff_tag::group_copy))
		others = steer_->group_queues(v4, dst) & ~(1ull << queue_);
	int first = -1;
	for (unsigned i = 0; i < nmc_; i++) {
		if (!is_dst(mc_[i].gid))
			continue;
		if (first < 0) {
			first = int(mc_[i].qi);
			continue;
		}
		rte_mbuf *c = rte_pktmbuf_copy(m, mp_, 0, UINT32_MAX);
		if (c == nullptr) {
			ctr_.rx_group_copy_failed++;
			continue;
		}
		c->hash.usr = handoff_tag::handed | handoff_tag::member | qps_[mc_[i].qi].qpn;
		again(c);
	}
	while (others != 0) {
		const uint16_t q = uint16_t(__builtin_ctzll(others));
		others &= others - 1;
		rte_mbuf *c;
		if (first < 0 && others == 0) {
			c = m; /* no member here: the last queue gets the frame itself */
			taken_ = true;
		} else if ((c = rte_pktmbuf_copy(m, mp_, 0, UINT32_MAX)) == nullptr) {
			ctr_.rx_group_copy_failed++;
			continue;
		} else {
			ctr_.rx_group_copies++;
		}
		c->hash.usr = handoff_tag::handed | handoff_tag::group_copy;
		hand_off(c, q);
	}
	if (first < 0 && !taken_)
		ctr_.rx_dgid_mismatch++;
	return first;
}

void soft_queue::hand_off(rte_mbuf *m, uint16_t owner)
{
	if (!(m->hash.usr & handoff_tag::group_copy))
		m->hash.usr = handoff_tag::handed;
	if (unlikely(nho_ == max_burst))
		flush_handoff(); /* a group's copies on top of a burst's frames */
	ho_[nho_] = m;
	hoq_[nho_] = owner;
	nho_++;
	taken_ = true;
}

void soft_queue::flush_handoff()
{
	/* One burst per owner: the staged frames grouped by queue, in order. */
	rte_mbuf *b[max_burst];
	unsigned left = nho_;
	while (left != 0) {
		const uint16_t q = hoq_[0];
		unsigned nb = 0, k = 0;
		for (unsigned i = 0; i < left; i++) {
			if (hoq_[i] == q) {
				b[nb++] = ho_[i];
			} else {
				ho_[k] = ho_[i];
				hoq_[k] = hoq_[i];
				k++;
			}
		}
		left = k;
		if (RDGRAM_TSAN)
			for (unsigned i = 0; i < nb; i++)
				RDGRAM_TSAN_RELEASE(b[i]);
		const unsigned sent = rte_ring_mp_enqueue_burst(steer_->ring(q), reinterpret_cast<void **>(b), nb, nullptr);
		ctr_.rx_handoff_out += sent;
		if (unlikely(sent != nb)) {
			ctr_.rx_handoff_full += nb - sent;
			rte_pktmbuf_free_bulk(b + sent, nb - sent);
		}
	}
	nho_ = 0;
}

void soft_queue::again(rte_mbuf *m)
{
	if (unlikely(nagain_ == max_burst)) {
		ctr_.rx_group_copy_failed++; /* more members than a burst holds */
		rte_pktmbuf_free(m);
		return;
	}
	again_[nagain_++] = m;
	ctr_.rx_group_copies++;
}

bool soft_queue::to_control(rte_mbuf *m)
{
	if (ctl_rx_ == nullptr)
		return false;
	RDGRAM_TSAN_RELEASE(m);
	if (unlikely(rte_ring_mp_enqueue(ctl_rx_, m) != 0)) {
		ctr_.rx_control_full++; /* control thread behind: drop, peers retry */
		return false;
	}
	ctr_.rx_to_control++;
	taken_ = true;
	return false;
}

void soft_queue::tx_control()
{
	rte_mbuf *c[max_burst];
	unsigned n = rte_ring_sc_dequeue_burst(ctl_tx_, reinterpret_cast<void **>(c), max_burst, nullptr);
	if (RDGRAM_TSAN)
		for (unsigned i = 0; i < n; i++) {
			RDGRAM_TSAN_ACQUIRE(c[i]);
			RDGRAM_TSAN_RELEASE(c[i]);
		}
	if (view_.vlan != 0) {
		/* A VLAN port's ARP, ND, IGMP and MLD: the port's VLAN, PCP 0. */
		unsigned k = 0;
		for (unsigned i = 0; i < n; i++) {
			c[i]->vlan_tci = view_.vlan;
			if (view_.vlan_tx_offload) {
				c[i]->ol_flags |= RTE_MBUF_F_TX_VLAN;
			} else if (rte_vlan_insert(&c[i]) != 0) {
				rte_pktmbuf_free(c[i]);
				ctr_.tx_control_dropped++;
				continue;
			}
			c[k++] = c[i];
		}
		n = k;
	}
	burst_guard::enter(guard_);
	uint16_t sent = rte_eth_tx_burst(port_, queue_, c, uint16_t(n));
	burst_guard::leave(guard_);
	ctr_.tx_control += sent;
	/* Port full: the control thread retransmits on its own timers, so
	 * these are freed rather than held (never stall the data path). */
	for (unsigned i = sent; i < n; i++)
		rte_pktmbuf_free(c[i]);
	ctr_.tx_control_dropped += n - sent;
}

inline bool soft_queue::is_nd(const uint8_t *f, uint32_t flen)
{
	return flen >= wire::eth_len + wire::ipv6_len + 1 &&
	       f[wire::eth_len + 6] == IPPROTO_ICMPV6 &&
	       (f[wire::eth_len + wire::ipv6_len] == 135 || f[wire::eth_len + wire::ipv6_len] == 136);
}

void soft_queue::set_ahns(recv_wc *wcs, uint16_t n)
{
	ah_key keys[max_burst] = {};
	ah_handle hs[max_burst];
	for (uint16_t i = 0; i < n; i++)
		memcpy(keys[i].dgid, wcs[i].sgid.raw, 16);
	uint64_t hit;
	ahn_->lookup_bulk(keys, n, hs, &hit);
	for (uint16_t i = 0; i < n; i++)
		wcs[i].slid = (hit >> i & 1) ? uint16_t(hs[i].slot) : uint16_t(0xffff);
}

} // namespace rdgram::soft

#endif
