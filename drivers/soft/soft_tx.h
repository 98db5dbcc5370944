/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft send path: tx_burst and its steps, inline (the poll
 * thread's; soft_queue.h holds the state).
 *
 * TX copies the AH's prebuilt Eth/IP/UDP template (soft_av.h), writes
 * BTH/DETH/[ImmDt], and computes the ICRC in place: the fields the RoCEv2
 * annex masks (the 8 pseudo-LRH bytes before the IP header, IPv4
 * TOS/TTL/checksum or IPv6 traffic class/flow label/hop limit, the UDP
 * checksum and BTH byte 4) are first written as all ones, the CRC runs over
 * the contiguous bytes (crc32.h), then the real values go in. Built
 * packets the port does not take yet wait in the queue's stash.
 */
#ifndef RDGRAM_SOFT_TX_H
#define RDGRAM_SOFT_TX_H

#include <cstring>

#include <rte_branch_prediction.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_memcpy.h>
#include <rte_udp.h>

#include "rdgram/burst_guard.h"
#include "rdgram/crc32.h"
#include "rdgram/tsan.h"
#include "rdgram/ud.h"
#include "rdgram/wire.h"
#include "soft_av.h"
#include "soft_queue.h"

namespace rdgram::soft {

inline uint16_t soft_queue::tx_burst(send_wr *wrs, uint16_t n)
{
	n = tx_stage(wrs, n);
	push_stash();
	return n;
}

__rte_always_inline uint16_t soft_queue::tx_stage(send_wr *wrs, uint16_t n)
{
	/* Leftovers go out with this burst at the end; push them first only
	 * when they leave no room for a whole burst. */
	if (nstash_ > tx_stash_size - max_burst)
		push_stash();
	unsigned room = tx_stash_size - nstash_;
	if (n > room)
		n = uint16_t(room);
	if (n > max_burst)
		n = max_burst;
	if (n == 0)
		return 0;
	/* Every AV of the burst on its way before the first is read: the
	 * misses of many destinations overlap (docs/PERFORMANCE.md, "Send
	 * rate as destinations grow"). */
	for (unsigned i = 0; i < n; i++)
		ahs_.prefetch(wrs[i].ah);

	/* Buffers for inline sends, in one bulk get of raw mbufs:
	 * build_masked sets the fields a TX path reads (raw_tx_init). */
	rte_mbuf *fresh[max_burst];
	unsigned ninl = 0;
	for (unsigned i = 0; i < n; i++)
		ninl += (wrs[i].flags & send_inline) != 0;
	if (ninl != 0 && rte_mempool_get_bulk(mp_, reinterpret_cast<void **>(fresh), ninl) != 0) {
		ctr_.tx_no_mbuf++;
		/* Take the WRs before the first inline one, if any. */
		unsigned k = 0;
		while (k < n && !(wrs[k].flags & send_inline))
			k++;
		n = uint16_t(k);
		ninl = 0;
	}

	/* Three passes over the burst: write every packet with its masked
	 * fields, then every ICRC, then the real field values. The CRC
	 * loads then read headers whose stores have left the store buffer
	 * (no store-forwarding stalls) and independent CRCs overlap. */
	soft_qp &sq = qps_[sq_];
	tx_state st = tx_state_of(sq);
	unsigned used = 0;
	tx_pending_pkt pend[max_burst];
	unsigned np = 0;
	for (unsigned i = 0; i < n; i++) {
		send_wr &wr = wrs[i];
		rte_mbuf *m = (wr.flags & send_inline) ? fresh[used++] : wr.mbuf;
		if (likely(build_masked(wr, st, m, pend[np])))
			np++;
		else
			rte_pktmbuf_free(m);
	}
	end_tx(st, sq);
	/* One kernel for every length (the usual plan): chosen once per
	 * burst, a constant in the loop; else per frame by its length. */
	if (likely(crc_uniform_))
		crc32_with(crc_, [&](auto k) {
			for (unsigned i = 0; i < np; i++)
				store_icrc<decltype(k)::value>(pend[i]);
		});
	else
		for (unsigned i = 0; i < np; i++)
			crc32_with(crc_plan_.for_len(pend[i].icrc_off - 6),
				   [&](auto k) { store_icrc<decltype(k)::value>(pend[i]); });
	for (unsigned i = 0; i < np; i++) {
		unmask(pend[i]);
		if (unlikely(view_.vlan != 0))
			vlan_tag(pend[i]);
		stash_[nstash_++] = pend[i].m;
	}
	return n;
}

inline void soft_queue::raw_tx_init(rte_mbuf *m, uint16_t len)
{
	m->data_off = uint16_t(RTE_MIN(uint16_t(RTE_PKTMBUF_HEADROOM), m->buf_len));
	m->port = RTE_MBUF_PORT_INVALID;
	m->ol_flags &= RTE_MBUF_F_EXTERNAL;
	m->packet_type = 0;
	m->vlan_tci = 0;
	m->vlan_tci_outer = 0;
	m->data_len = len;
	m->pkt_len = len;
	__rte_mbuf_raw_sanity_check(m);
}

inline soft_queue::tx_state soft_queue::tx_state_of(const soft_qp &sq) const
{
	return {ahs_, view_.mtu, sq.psn, sq.qpn, sq.qkey, rte_cpu_to_be_16(view_.pkey), sq.privileged,
		uint8_t(view_.vlan != 0 && !view_.vlan_tx_offload ? 4 : 0), 0, 0};
}

inline void soft_queue::end_tx(const tx_state &st, soft_qp &sq)
{
	sq.psn = st.psn;
	ctr_.tx_pkts += st.pkts;
	ctr_.tx_bytes += st.bytes;
}

inline bool soft_queue::build(const send_wr &wr, soft_qp &sq, rte_mbuf *m)
{
	tx_pending_pkt t;
	tx_state st = tx_state_of(sq);
	const bool ok = build_masked(wr, st, m, t);
	end_tx(st, sq);
	if (!ok)
		return false;
	crc32_with(crc_for(t.icrc_off - 6), [&](auto k) { store_icrc<decltype(k)::value>(t); });
	unmask(t);
	if (view_.vlan != 0)
		vlan_tag(t);
	return true;
}

inline void soft_queue::vlan_tag(const tx_pending_pkt &t) const
{
	/* Outside the ICRC (it starts at the IP header): written last. */
	const uint16_t tci = uint16_t(uint16_t(t.av->sl) << 13 | view_.vlan);
	rte_mbuf *m = t.m;
	m->vlan_tci = tci;
	if (view_.vlan_tx_offload) {
		m->ol_flags |= RTE_MBUF_F_TX_VLAN;
		return;
	}
	/* build_masked kept 4 bytes of headroom for it (rte_pktmbuf_prepend
	 * without its check). The MACs are written again 4 bytes earlier
	 * from the AV, not moved: moving them read back the bytes unmask had
	 * just stored in other widths, and the failed store forwarding cost
	 * 12% of a 64-byte sender's rate (docs/PERFORMANCE.md, VLAN). The
	 * ethertype unmask wrote stays where it is. */
	m->data_off = uint16_t(m->data_off - 4);
	m->data_len = uint16_t(m->data_len + 4);
	m->pkt_len += 4;
	uint8_t *p = t.p - 4;
	const uint64_t w0 = av_mac_word(*t.av); /* destination MAC, source MAC bytes 0..1 */
	memcpy(p, &w0, 8);
	memcpy(p + 8, t.av->hdr + 8, 4); /* source MAC bytes 2..5 */
	const rte_be16_t tag[2] = {RTE_BE16(RTE_ETHER_TYPE_VLAN), rte_cpu_to_be_16(tci)};
	memcpy(p + 2 * RTE_ETHER_ADDR_LEN, tag, 4);
}

template <crc32_kernel K> inline void soft_queue::store_icrc(const tx_pending_pkt &t)
{
	/* CRC-32 over [l3 - 8, end of pad), as icrc_of. */
	uint32_t crc = rte_cpu_to_le_32(crc32_ieee_k<K>(t.p + 6, t.icrc_off - 6));
	memcpy(t.p + t.icrc_off, &crc, 4);
}

/* Always inlined into the burst loop: as a call per packet it kept its
 * state in memory across the call and cost 5% of the sender's rate. */
__rte_always_inline bool soft_queue::build_masked(const send_wr &wr, tx_state &st, rte_mbuf *m, tx_pending_pkt &t)
{
	const soft_av *av = st.ahs.lookup(wr.ah);
	if (unlikely(av == nullptr)) {
		ctr_.tx_stale_ah++;
		return false;
	}
	/* A controlled Q_Key reaches the wire only from the QP context (the
	 * WR's high bit selects it): refuse it when that context is not
	 * privileged. add_qp already refuses such a context; this catches one
	 * edited afterwards (qp() hands out the struct), before any byte is
	 * written. One predictable branch per packet. */
	if (unlikely((st.qkey & qkey_controlled) && !st.privileged && (wr.remote_qkey & qkey_controlled))) {
		ctr_.tx_bad_qkey++;
		return false;
	}
	const bool inl = (wr.flags & send_inline) != 0;
	const bool imm = (wr.flags & send_imm) != 0;
	const uint32_t paylen = inl ? wr.inline_len : rte_pktmbuf_pkt_len(m);
	if (unlikely(paylen > st.mtu)) {
		ctr_.tx_too_long++;
		return false;
	}
	const bool v4 = av->l3 == 4;
	const uint32_t addr_len = v4 ? wire::addr_len_v4 : wire::addr_len_v6;
	const uint32_t hdr_len = addr_len + wire::bth_len + wire::deth_len + (imm ? wire::immdt_len : 0);
	const unsigned pad = wire::pad_for(paylen);
	const uint32_t tail = pad + wire::icrc_len;

	uint8_t *p;
	if (inl) {
		raw_tx_init(m, uint16_t(hdr_len + paylen + tail));
		p = rte_pktmbuf_mtod(m, uint8_t *);
		rte_memcpy(p + hdr_len, wr.inline_data, paylen);
	} else {
		if (unlikely(m->nb_segs != 1 || rte_pktmbuf_headroom(m) < hdr_len + st.tag_len ||
			     rte_pktmbuf_tailroom(m) < tail)) {
			ctr_.tx_bad_mbuf++;
			return false;
		}
		p = reinterpret_cast<uint8_t *>(rte_pktmbuf_prepend(m, uint16_t(hdr_len)));
		rte_pktmbuf_append(m, uint16_t(tail));
	}

	/* Address part from the AV, with the ICRC-masked fields all ones. The
	 * first 8 bytes (destination MAC + 2 bytes of the source MAC) are one
	 * atomic word: neighbour re-resolution swaps the MAC of a live AV in
	 * place (av_mac_word). */
	if (v4)
		memcpy(p + 8, av->hdr + 8, wire::addr_len_v4 - 8);
	else
		memcpy(p + 8, av->hdr + 8, av_hdr_len - 8);
	const uint64_t w0 = av_mac_word(*av);
	memcpy(p, &w0, 8);
	memcpy(p + 6, &icrc_ones64, 8);
	const uint32_t l4_len = wire::udp_len + hdr_len - addr_len + paylen + tail;
	uint8_t *udp = p + addr_len - wire::udp_len;
	if (v4) {
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(p + wire::eth_len);
		ip->total_length = rte_cpu_to_be_16(uint16_t(wire::ipv4_len + l4_len));
		ip->type_of_service = 0xff;
		ip->time_to_live = 0xff;
		ip->hdr_checksum = 0xffff;
	} else {
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(p + wire::eth_len);
		ip->payload_len = rte_cpu_to_be_16(uint16_t(l4_len));
		ip->vtc_flow = rte_cpu_to_be_32(0x6fffffffu);
		ip->hop_limits = 0xff;
	}
	reinterpret_cast<rte_udp_hdr *>(udp)->dgram_len = rte_cpu_to_be_16(uint16_t(l4_len));
	reinterpret_cast<rte_udp_hdr *>(udp)->dgram_cksum = 0xffff;

	auto *bth = reinterpret_cast<wire::bth *>(udp + wire::udp_len);
	bth->opcode = imm ? wire::op_ud_send_only_imm : wire::op_ud_send_only;
	bth->flags = uint8_t(((wr.flags & send_solicited) ? wire::bth_se : 0) |
			     pad << wire::bth_padcnt_shift);
	bth->pkey = st.pkey_be;
	bth->resv8a = 0xff;
	wire::put24(bth->dqpn, wr.remote_qpn);
	bth->ack_resv = 0;
	wire::put24(bth->psn, st.psn);
	st.psn = (st.psn + 1) & 0xffffff;
	auto *deth = reinterpret_cast<wire::deth *>(bth + 1);
	/* IBA 10.2.5: a WR Q_Key with the high bit set means the QP's own. */
	uint32_t qkey = (wr.remote_qkey & qkey_controlled) ? st.qkey : wr.remote_qkey;
	deth->qkey = rte_cpu_to_be_32(qkey);
	deth->resv8 = 0;
	wire::put24(deth->sqpn, st.qpn);
	if (imm)
		memcpy(deth + 1, &wr.imm_data, 4);
	uint8_t *end = p + hdr_len + paylen;
	/* Pad bytes are zero; a fixed 4-byte store beats a variable memset
	 * (the ICRC overwrites what lies past the pad). */
	const uint32_t zero = 0;
	memcpy(end, &zero, 4);

	t.m = m;
	t.p = p;
	t.av = av;
	t.icrc_off = uint32_t(end + pad - p);
	/* No l2_len/l3_len: no offload is requested, and writing them would
	 * pull the mbuf's second cache line in (it was 19% of the TX cost). */
	st.pkts++;
	st.bytes += paylen;
	return true;
}

inline void soft_queue::unmask(const tx_pending_pkt &t)
{
	uint8_t *p = t.p;
	const soft_av *av = t.av;
	/* Source MAC and ethertype: bytes 6..7 live in the atomic MAC word
	 * (never changed by a swap), bytes 8..13 are plain. */
	const uint64_t w0 = av_mac_word(*av);
	memcpy(p + 6, reinterpret_cast<const uint8_t *>(&w0) + 6, 2);
	memcpy(p + 8, av->hdr + 8, 6);
	const bool v4 = av->l3 == 4;
	const uint32_t addr_len = v4 ? wire::addr_len_v4 : wire::addr_len_v6;
	uint8_t *udp = p + addr_len - wire::udp_len;
	reinterpret_cast<rte_udp_hdr *>(udp)->dgram_cksum = 0; /* Annex A17.4.5.1 */
	reinterpret_cast<wire::bth *>(udp + wire::udp_len)->resv8a = 0;
	if (v4) {
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(p + wire::eth_len);
		const auto *tip = reinterpret_cast<const rte_ipv4_hdr *>(av->hdr + wire::eth_len);
		ip->type_of_service = tip->type_of_service;
		ip->time_to_live = tip->time_to_live;
		uint32_t partial;
		memcpy(&partial, av->hdr + av_v4_csum_off, 4);
		ip->hdr_checksum = fold_csum(partial + ip->total_length);
	} else {
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(p + wire::eth_len);
		const auto *tip = reinterpret_cast<const rte_ipv6_hdr *>(av->hdr + wire::eth_len);
		ip->vtc_flow = tip->vtc_flow;
		ip->hop_limits = tip->hop_limits;
	}
}

inline void soft_queue::push_stash()
{
	if (RDGRAM_TSAN)
		for (unsigned i = 0; i < nstash_; i++)
			RDGRAM_TSAN_RELEASE(stash_[i]);
	burst_guard::enter(guard_);
	uint16_t sent = rte_eth_tx_burst(port_, queue_, stash_, uint16_t(nstash_));
	burst_guard::leave(guard_);
	if (sent < nstash_) {
		memmove(stash_, stash_ + sent, (nstash_ - sent) * sizeof(stash_[0]));
		ctr_.tx_port_full++;
	}
	nstash_ -= sent;
}

} // namespace rdgram::soft

#endif
