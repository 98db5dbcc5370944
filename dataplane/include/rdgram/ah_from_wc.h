/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * An address handle back to the sender of a received datagram:
 * ibv_init_ah_from_wc(3) / ibv_create_ah_from_wc(3) for rdgram.
 *
 * What libibverbs does (rdma-core, libibverbs/verbs.c):
 *   ibv_init_ah_from_wc: zero ah_attr; set_ah_attr_generic_fields copies
 *   wc->slid to dlid, wc->sl to sl, wc->dlid_path_bits to src_path_bits,
 *   port_num, and the low 20 bits of the GRH's first word to
 *   grh.flow_label, whatever the header is. Without IBV_WC_GRH it stops
 *   there and returns 0 (is_global = 0). With it: is_global = 1 and
 *   get_grh_header_version decides the L3 header: IPv6 if the version
 *   nibble of byte 0 is 6, unless the 20 bytes at offset 20 carry IHL 5 and
 *   a valid IPv4 header checksum (then IPv4: the first 20 bytes of the area
 *   are undefined and may hold a 6 by chance); IPv4 if byte 0's nibble is
 *   not 6 but byte 20's version is 4; otherwise errno EPROTONOSUPPORT.
 *   set_ah_attr_by_ipv4: a class D destination fails with EINVAL; else
 *   sgid_index = ibv_find_gid_index(IPv4-mapped daddr, RoCEv2 type),
 *   dgid = IPv4-mapped saddr, hop_limit = TTL, traffic_class = TOS.
 *   set_ah_attr_by_ipv6: a destination GID starting 0xff fails with EINVAL;
 *   dgid = GRH SGID; next header UDP selects RoCEv2 GIDs, 0x1B IB/RoCEv1
 *   GIDs, anything else EPROTONOSUPPORT; sgid_index = the GRH DGID's index,
 *   hop_limit = GRH hop limit, traffic_class = bits 27:20 of word 0.
 *   ibv_find_gid_index scans the table with ibv_query_gid from index 0 up
 *   and returns the first entry of that GID and type; a GID not in the
 *   table runs off its end, where ibv_query_gid fails (-1, errno EINVAL
 *   from the kernel's rdma_get_gid_attr). Every failure returns -1 with
 *   errno set; the man page (libibverbs/man/ibv_create_ah_from_wc.3,
 *   RETURN VALUE): "returns 0 on success, and -1 on error".
 *   ibv_create_ah_from_wc = ibv_init_ah_from_wc + ibv_create_ah, NULL with
 *   errno on failure.
 *
 * Where rdgram differs, and why:
 *   - flow_label: RoCEv2 over IPv4 has none; rdma-core takes it from the
 *     undefined first bytes of the area (mlx5 leaves them as they were in
 *     the receive buffer). Here: 0 for IPv4, bits 19:0 of word 0 for an
 *     IPv6 header or IB GRH.
 *   - sl: on an Ethernet port the received 802.1Q priority (PCP, 0..7;
 *     0 for an untagged frame), which every rdgram driver reports in
 *     wc.sl on RoCE, so that a reply travels in its request's priority
 *     class (the SL's meaning on RoCE, ibv_create_ah(3)). rdma-core copies
 *     wc.sl whatever it holds: mlx5 puts the RoCE L3 header type in CQE
 *     flags_rqpn bits 27:24 and rdma-core's mlx5 provider reports those
 *     bits as wc.sl (providers/mlx5/cq.c, handle_responder), so there the
 *     reply would get priority 2 or 3 by IP version. rdgram's mlx5 and
 *     verbs drivers report 0 on RoCE instead (neither reads the CQE's
 *     VLAN field yet), the soft driver the frame's PCP; the kernel's mlx5
 *     likewise takes the SL from the VLAN PCP or uses 0. On InfiniBand
 *     wc.sl is the real SL (4 bits).
 *   - hop_limit: 0xFF, as the kernel's ib_init_ah_attr_from_wc does on IB.
 *     rdma-core echoes the received TTL / hop limit, which is what was left
 *     after the forward path, not a property of the path: a reply sent with
 *     it can expire before it arrives.
 *   - traffic_class on Ethernet: an ECN field of CE (11) becomes ECT(0)
 *     (10); rdma-core copies the whole byte. CE is what a congested switch
 *     wrote on that one packet (RFC 3168 5): the sender's own ECN field
 *     was ECT, so the reply claims ECT as the request's sender did. A
 *     reply that echoed CE would leave pre-marked, and every switch on its
 *     way and the receiver's congestion control (DCQCN's CNP) would take
 *     it for congestion that never happened. DSCP is kept. (IB TClass:
 *     kept as is.)
 *   - GID index: a hash index built once per port (gid_index below), not a
 *     scan; like the scan it yields the lowest index holding the GID.
 *     rdgram's GID tables hold one type per port (RoCEv2 on Ethernet, IB on
 *     InfiniBand), so the type match is implied by the link layer.
 *   - sgid_index above 255 (not representable in ibv_ah_attr): EINVAL;
 *     rdma-core truncates it to 8 bits.
 *   - multicast SOURCE GID (or the unspecified address ::, 0.0.0.0): EINVAL.
 *     No datagram comes from a group (RFC 1122 3.2.1.3, RFC 4291 2.7); the
 *     reply AH would send to the whole group. rdma-core does not check.
 *   - multicast DESTINATION (the packet was sent to a group we joined):
 *     rdma-core fails with EINVAL (a group is never in the GID table). Here
 *     the reply goes from the port's lowest-index unicast GID of the same
 *     family (IPv4-mapped for IPv4, IPv6 for IPv6; any on InfiniBand);
 *     EINVAL only when the port has none.
 *   - L3 type: when the completion reports it (wc.l3 ipv4 or ipv6 on an
 *     Ethernet port) it decides, as in the kernel with
 *     IB_WC_WITH_NETWORK_HDR_TYPE; wc.l3 == ib_grh there means "not
 *     reported" (a completion converted from a verbs ibv_wc) and the bytes
 *     decide as in get_grh_header_version, but with a correct IPv4 checksum
 *     (rdma-core's ipv4_calc_hdr_csum folds the carry once, so a sum that
 *     carries twice gives a wrong value and a valid IPv4 header whose
 *     undefined first nibble is 6 is taken for IPv6). On an InfiniBand port
 *     the GRH is an IB GRH: IPVer 6 and NxtHdr 0x1B (IBA 8.3.1) or
 *     EPROTONOSUPPORT, never IPv4 (rdma-core would try the IPv4 guess on
 *     the GID bytes too).
 *   - RoCEv1 (IPv6-shaped GRH, next header 0x1B, on Ethernet):
 *     EPROTONOSUPPORT; rdgram has no RoCEv1 GIDs.
 *   - no GRH on a port that requires one (RoCE): EPROTOTYPE, as the kernel
 *     (ib_init_ah_attr_from_wc) does; rdma-core returns 0 with is_global 0
 *     and lets ibv_create_ah fail later.
 *   - port_num other than 1 (rdgram devices have one port), or a NULL grh
 *     with the GRH flag set: EINVAL, checked first.
 */
#ifndef RDGRAM_AH_FROM_WC_H
#define RDGRAM_AH_FROM_WC_H

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <infiniband/verbs.h>

#include "rdgram/device.h"
#include "rdgram/ud.h"
#include "rdgram/wire.h"

namespace rdgram {

/*
 * A port's GID table indexed by value: open addressing with linear probing
 * at load <= 1/2, keyed by the 16-byte GID. Build it once per port (and again
 * whenever the table changes); find is O(1) expected.
 * (NOT multi-thread safe while building; find may run concurrently.)
 */
class gid_index {
public:
	/* Indexes gids (position = sgid_index). Zero GIDs are empty entries and
	 * are left out; of duplicates the lowest index is kept. */
	void build(const std::vector<wire::gid> &gids)
	{
		size_t cap = 8;
		while (cap < 2 * gids.size())
			cap <<= 1;
		slots_.assign(cap, slot{wire::gid{}, -1});
		mask_ = cap - 1;
		n_ = 0;
		uc_v4_ = uc_v6_ = -1;
		for (size_t i = 0; i < gids.size(); i++) {
			const wire::gid &g = gids[i];
			if (g.is_zero())
				continue;
			if (!g.is_multicast()) {
				int &uc = g.is_v4_mapped() ? uc_v4_ : uc_v6_;
				if (uc < 0)
					uc = int(i);
			}
			size_t j = hash(g) & mask_;
			while (slots_[j].idx >= 0 && !(slots_[j].key == g))
				j = (j + 1) & mask_;
			if (slots_[j].idx < 0) {
				slots_[j] = slot{g, int32_t(i)};
				n_++;
			}
		}
	}

	/* The lowest index holding g, or -1. */
	int find(const wire::gid &g) const
	{
		if (slots_.empty())
			return -1;
		for (size_t j = hash(g) & mask_;; j = (j + 1) & mask_) {
			const slot &s = slots_[j];
			if (s.idx < 0)
				return -1;
			if (s.key == g)
				return s.idx;
		}
	}

	/* The lowest index of a unicast GID of that family, or -1. */
	int first_unicast(bool v4) const { return v4 ? uc_v4_ : uc_v6_; }
	/* Distinct GIDs indexed. */
	size_t size() const { return n_; }

private:
	struct slot {
		wire::gid key;
		int32_t idx; /* -1: empty */
	};

	static uint64_t mix(uint64_t x)
	{
		x ^= x >> 30;
		x *= 0xbf58476d1ce4e5b9ull;
		x ^= x >> 27;
		x *= 0x94d049bb133111ebull;
		x ^= x >> 31;
		return x;
	}
	static size_t hash(const wire::gid &g)
	{
		uint64_t a, b;
		memcpy(&a, g.raw, 8);
		memcpy(&b, g.raw + 8, 8);
		return size_t(mix(a ^ mix(b)));
	}

	std::vector<slot> slots_;
	size_t mask_ = 0;
	size_t n_ = 0;
	int uc_v4_ = -1, uc_v6_ = -1;
};

namespace detail {

inline constexpr uint8_t ib_next_hdr = 0x1b; /* IBA 8.3.1: NxtHdr for IBA transport */
inline constexpr uint8_t next_hdr_udp = 17;

inline int ah_wc_fail(int e)
{
	errno = e;
	return -1;
}

/* RFC 1071: the one's complement sum of a 20-byte IPv4 header, its own
 * checksum field included, is 0xffff when the checksum is right. */
inline bool ipv4_header_checksum_ok(const uint8_t *h)
{
	uint32_t s = 0;
	for (int i = 0; i < 20; i += 2)
		s += uint32_t(h[i]) << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return s == 0xffff;
}

enum class grh_l3 { ipv4, ipv6 };

/* Which header the 40-byte area holds on an Ethernet port: 0 and *out, or
 * an errno value. */
inline int classify_roce_grh(const recv_wc &wc, const uint8_t *area, grh_l3 *out)
{
	const uint8_t v6_nibble = area[0] >> 4;
	const uint8_t *ip4 = area + 20;
	if (wc.l3 == l3_type::ipv4) {
		if ((ip4[0] >> 4) != 4)
			return EPROTONOSUPPORT;
		*out = grh_l3::ipv4;
	} else if (wc.l3 == l3_type::ipv6) {
		if (v6_nibble != 6)
			return EPROTONOSUPPORT;
		*out = grh_l3::ipv6;
	} else if (v6_nibble != 6) {
		/* Not reported: get_grh_header_version's rules. */
		if ((ip4[0] >> 4) != 4)
			return EPROTONOSUPPORT;
		*out = grh_l3::ipv4;
	} else if ((ip4[0] & 0x0f) == 5 && ipv4_header_checksum_ok(ip4)) {
		*out = grh_l3::ipv4;
	} else {
		*out = grh_l3::ipv6;
	}
	if (*out == grh_l3::ipv6 && area[6] != next_hdr_udp)
		return EPROTONOSUPPORT; /* RoCEv1 (0x1B) or not RoCE at all */
	return 0;
}

} // namespace detail

/*
 * ibv_init_ah_from_wc(3) for rdgram: fills *attr to reply to the sender of
 * the datagram wc, whose 40-byte GRH area is at grh (the start of wc.mbuf's
 * data). port is the receiving port, gids its index (built from port.gids),
 * port_num its verbs number (1). Returns 0, or -1 with errno set, as
 * ibv_init_ah_from_wc does (see the file comment for each errno and for
 * where the fields differ from rdma-core's). *attr is zeroed first and may
 * be partly filled on failure.
 * (Any thread: reads only its arguments.)
 */
inline int init_ah_from_wc(const port_attr &port, const gid_index &gids, uint8_t port_num,
			   const recv_wc &wc, const void *grh, ibv_ah_attr *attr)
{
	using detail::ah_wc_fail;
	const bool eth = port.link == link_layer::ethernet;

	memset(attr, 0, sizeof(*attr));
	attr->dlid = wc.slid;
	attr->sl = uint8_t(wc.sl & (eth ? 0x7 : 0xf));
	attr->src_path_bits = wc.dlid_path_bits;
	attr->port_num = port_num;

	if (port_num != 1)
		return ah_wc_fail(EINVAL);
	if (!(wc.wc_flags & wc_grh))
		return (eth || port.grh_required) ? ah_wc_fail(EPROTOTYPE) : 0;
	if (grh == nullptr)
		return ah_wc_fail(EINVAL);
	attr->is_global = 1;

	const auto *area = static_cast<const uint8_t *>(grh);
	wire::gid src, dst;
	uint8_t tclass;
	uint32_t flow = 0;
	bool v4 = false;
	if (eth) {
		detail::grh_l3 l3;
		if (int e = detail::classify_roce_grh(wc, area, &l3); e != 0)
			return ah_wc_fail(e);
		v4 = l3 == detail::grh_l3::ipv4;
	} else if ((area[0] >> 4) != 6 || area[6] != detail::ib_next_hdr) {
		return ah_wc_fail(EPROTONOSUPPORT);
	}
	if (v4) {
		const uint8_t *ip4 = area + 20; /* rte_ipv4_hdr layout */
		rte_be32_t a;
		memcpy(&a, ip4 + 12, 4);
		src = wire::gid::from_v4(a);
		memcpy(&a, ip4 + 16, 4);
		dst = wire::gid::from_v4(a);
		tclass = ip4[1];
	} else {
		const uint32_t w0 = uint32_t(area[0]) << 24 | uint32_t(area[1]) << 16 |
				    uint32_t(area[2]) << 8 | area[3];
		tclass = uint8_t(w0 >> 20);
		flow = w0 & 0xfffff;
		memcpy(src.raw, area + 8, 16);
		memcpy(dst.raw, area + 24, 16);
	}
	if (eth && (tclass & 3) == 3)
		tclass = uint8_t((tclass & ~3u) | 2); /* CE -> ECT(0) */

	auto mcast = [eth](const wire::gid &g) { return eth ? g.is_multicast() : g.raw[0] == 0xff; };
	if (mcast(src) || src.is_zero() || (v4 && src.v4() == 0))
		return ah_wc_fail(EINVAL);

	int idx;
	if (mcast(dst)) {
		if (eth) {
			idx = gids.first_unicast(v4);
		} else {
			int a = gids.first_unicast(false), b = gids.first_unicast(true);
			idx = (a < 0 || (b >= 0 && b < a)) ? b : a;
		}
	} else {
		idx = gids.find(dst);
	}
	if (idx < 0 || idx > UINT8_MAX)
		return ah_wc_fail(EINVAL);

	memcpy(attr->grh.dgid.raw, src.raw, 16);
	attr->grh.sgid_index = uint8_t(idx);
	attr->grh.flow_label = flow;
	attr->grh.hop_limit = 0xff;
	attr->grh.traffic_class = tclass;
	return 0;
}

/*
 * ibv_create_ah_from_wc(3) for rdgram: init_ah_from_wc, then
 * dev.create_ah. Returns the handle, or ah_null with *err (and errno) set to
 * the errno value of whichever step failed; *err is 0 on success. err may be
 * nullptr. gids must be the index of dev.port().gids.
 * (Control thread only.)
 */
inline ah_handle create_ah_from_wc(device &dev, const gid_index &gids, uint8_t port_num,
				   const recv_wc &wc, const void *grh, int *err)
{
	int local;
	if (err == nullptr)
		err = &local;
	ibv_ah_attr attr;
	if (init_ah_from_wc(dev.port(), gids, port_num, wc, grh, &attr) != 0) {
		*err = errno;
		return ah_null;
	}
	*err = 0;
	ah_handle h = dev.create_ah(attr, err);
	if (*err != 0) {
		errno = *err;
		return ah_null;
	}
	return h;
}

} // namespace rdgram

#endif
