/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * libFuzzer target: init_ah_from_wc (ibv_init_ah_from_wc(3) for rdgram,
 * ah_from_wc.h) and the gid_index behind it.
 *
 * Input: the 40-byte GRH area first (short inputs are zero-padded), then
 * the completion and port: wc_flags, the L3 type byte (any value, valid or
 * not), slid, sl, dlid_path_bits, port number, Ethernet or InfiniBand link,
 * GRH required, a NULL GRH pointer, and the GID table (a realistic one,
 * fuzzed extra entries, optionally the GRH's own destination placed at a
 * chosen index, optionally 300 entries so indexes above 255 occur).
 *
 * Invariants (abort): the result (0, or -1 with errno) and every attr field
 * equal those of a reference written from the rules in ah_from_wc.h's
 * comment (its own IPv4 checksum, linear GID-table scans); success implies
 * is_global == the GRH flag, sgid_index inside the table holding a unicast
 * GID, flow_label <= 0xfffff; gid_index::find and first_unicast equal
 * linear scans; no UB.
 */
#include <fuzzer/FuzzedDataProvider.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "fuzz_common.h"
#include "rdgram/ah_from_wc.h"

using namespace rdgram;
using namespace rdgram::fuzz;

namespace {

wire::gid v4g(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	const uint8_t x[4] = {a, b, c, d};
	rte_be32_t v;
	memcpy(&v, x, 4);
	return wire::gid::from_v4(v);
}
wire::gid v6g(std::initializer_list<uint8_t> head, uint8_t last)
{
	wire::gid g{};
	size_t i = 0;
	for (uint8_t b : head)
		g.raw[i++] = b;
	g.raw[15] = last;
	return g;
}

bool ref_multicast(const wire::gid &g, bool eth)
{
	static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	if (!eth)
		return g.raw[0] == 0xff;
	if (memcmp(g.raw, pfx, 12) == 0)
		return (g.raw[12] >> 4) == 0xe;
	return g.raw[0] == 0xff;
}
bool ref_zero(const wire::gid &g)
{
	for (uint8_t b : g.raw)
		if (b != 0)
			return false;
	return true;
}
bool ref_v4_mapped(const wire::gid &g)
{
	static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(g.raw, pfx, 12) == 0;
}

/* Lowest index holding g (zero entries are empty), or -1. */
int ref_find(const std::vector<wire::gid> &t, const wire::gid &g)
{
	if (ref_zero(g))
		return -1;
	for (size_t i = 0; i < t.size(); i++)
		if (memcmp(t[i].raw, g.raw, 16) == 0)
			return int(i);
	return -1;
}
/* Lowest index of a unicast (non-zero, non-multicast) GID of a family. */
int ref_first_unicast(const std::vector<wire::gid> &t, bool v4)
{
	for (size_t i = 0; i < t.size(); i++)
		if (!ref_zero(t[i]) && !ref_multicast(t[i], true) && ref_v4_mapped(t[i]) == v4)
			return int(i);
	return -1;
}

struct ref_out {
	int err = 0; /* 0: success */
	ibv_ah_attr a{};
};

/* The rules of ah_from_wc.h's comment, restated. */
ref_out reference(const port_attr &port, const std::vector<wire::gid> &t, uint8_t port_num, const recv_wc &wc,
		  const uint8_t *area)
{
	ref_out r;
	const bool eth = port.link == link_layer::ethernet;
	r.a.dlid = wc.slid;
	r.a.sl = uint8_t(wc.sl & (eth ? 0x7 : 0xf)); /* RoCE: the received 802.1Q priority */
	r.a.src_path_bits = wc.dlid_path_bits;
	r.a.port_num = port_num;
	if (port_num != 1) {
		r.err = EINVAL;
		return r;
	}
	if (!(wc.wc_flags & wc_grh)) {
		if (eth || port.grh_required)
			r.err = EPROTOTYPE;
		return r;
	}
	if (area == nullptr) {
		r.err = EINVAL;
		return r;
	}
	r.a.is_global = 1;
	bool v4;
	if (eth) {
		/* Reported L3 type first; otherwise rdma-core's
		 * get_grh_header_version, whose checksum branch does not look
		 * at the IPv4 version nibble either. */
		const uint8_t *ip4 = area + 20;
		const bool v6_nibble = (area[0] >> 4) == 6, v4_version = (ip4[0] >> 4) == 4;
		if (wc.l3 == l3_type::ipv4 || wc.l3 == l3_type::ipv6)
			v4 = wc.l3 == l3_type::ipv4;
		else if (!v6_nibble)
			v4 = true;
		else
			v4 = (ip4[0] & 0x0f) == 5 && ref_sum16(0, ip4, 20) == 0xffff;
		const bool checked_v4 = wc.l3 == l3_type::ipv4 || (wc.l3 != l3_type::ipv6 && !v6_nibble);
		const bool ok = v4 ? (!checked_v4 || v4_version) : v6_nibble;
		if (!ok || (!v4 && area[6] != 17)) {
			r.err = EPROTONOSUPPORT;
			return r;
		}
	} else {
		v4 = false;
		if ((area[0] >> 4) != 6 || area[6] != 0x1b) {
			r.err = EPROTONOSUPPORT;
			return r;
		}
	}
	wire::gid src{}, dst{};
	uint8_t tc;
	uint32_t flow = 0;
	if (v4) {
		src.raw[10] = src.raw[11] = dst.raw[10] = dst.raw[11] = 0xff;
		memcpy(src.raw + 12, area + 20 + 12, 4);
		memcpy(dst.raw + 12, area + 20 + 16, 4);
		tc = area[20 + 1];
	} else {
		memcpy(src.raw, area + 8, 16);
		memcpy(dst.raw, area + 24, 16);
		tc = uint8_t((area[0] << 4) | (area[1] >> 4));
		flow = uint32_t(area[1] & 0x0f) << 16 | uint32_t(area[2]) << 8 | area[3];
	}
	if (eth && (tc & 3) == 3)
		tc = uint8_t((tc & 0xfc) | 2);
	if (ref_multicast(src, eth) || ref_zero(src) || (v4 && memcmp(src.raw + 12, "\0\0\0\0", 4) == 0)) {
		r.err = EINVAL;
		return r;
	}
	int idx;
	if (ref_multicast(dst, eth)) {
		if (eth) {
			idx = ref_first_unicast(t, v4);
		} else {
			const int a = ref_first_unicast(t, false), b = ref_first_unicast(t, true);
			idx = a < 0 ? b : b < 0 ? a : std::min(a, b);
		}
	} else {
		idx = ref_find(t, dst);
	}
	if (idx < 0 || idx > 255) {
		r.err = EINVAL;
		return r;
	}
	memcpy(r.a.grh.dgid.raw, src.raw, 16);
	r.a.grh.sgid_index = uint8_t(idx);
	r.a.grh.flow_label = flow;
	r.a.grh.hop_limit = 0xff;
	r.a.grh.traffic_class = tc;
	return r;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t area[40] = {};
	const size_t na = size < 40 ? size : 40;
	if (na != 0)
		memcpy(area, data, na);
	FuzzedDataProvider fdp(data + na, size - na);

	recv_wc wc{};
	wc.wc_flags = fdp.ConsumeIntegral<uint8_t>();
	const uint8_t l3 = fdp.ConsumeIntegral<uint8_t>();
	/* Mostly the three real values; sometimes any byte. */
	wc.l3 = l3 < 0xf0 ? (l3 % 3 == 0 ? l3_type::ib_grh : l3 % 3 == 1 ? l3_type::ipv6 : l3_type::ipv4)
			  : static_cast<l3_type>(l3 & 0x0f);
	wc.slid = fdp.ConsumeIntegral<uint16_t>();
	wc.sl = fdp.ConsumeIntegral<uint8_t>();
	wc.dlid_path_bits = fdp.ConsumeIntegral<uint8_t>();
	const uint8_t pn = fdp.ConsumeIntegral<uint8_t>();
	const uint8_t port_num = pn < 0xf0 ? 1 : uint8_t(pn & 0x0f);
	const uint8_t opts = fdp.ConsumeIntegral<uint8_t>();

	port_attr port;
	const bool eth = !(opts & 1);
	port.link = eth ? link_layer::ethernet : link_layer::infiniband;
	port.grh_required = eth || (opts & 2);
	const bool null_grh = (opts & 0x1c) == 0x1c; /* 1 in 8 */

	/* The GID table. */
	std::vector<wire::gid> &t = port.gids;
	if (opts & 0x20) {
		for (unsigned i = 0; i < 300; i++) /* indexes past 255 */
			t.push_back(eth ? v4g(10, 1, uint8_t(i >> 8), uint8_t(i)) : v6g({0xfe, 0x80}, uint8_t(i)));
	} else if (eth) {
		t = {wire::gid{}, v4g(10, 0, 0, 1), v6g({0xfd, 0}, 1), v4g(192, 168, 1, 1), v6g({0x20, 0x01, 0x0d, 0xb8}, 1),
		     v6g({0xff, 0x0e}, 1), v4g(10, 0, 0, 1)};
	} else {
		t = {v6g({0xfe, 0x80}, 1), v6g({0xfe, 0x80}, 2), wire::gid{}, v6g({0xff, 0x12}, 1)};
	}
	const unsigned extra = fdp.ConsumeIntegralInRange<unsigned>(0, 4);
	for (unsigned i = 0; i < extra; i++) {
		wire::gid g{};
		const auto b = fdp.ConsumeBytes<uint8_t>(16);
		if (!b.empty())
			memcpy(g.raw, b.data(), b.size());
		t.push_back(g);
	}
	if (opts & 0x40) {
		/* The GRH's destination (either reading) somewhere in the table. */
		const size_t at = fdp.ConsumeIntegralInRange<size_t>(0, t.size());
		wire::gid g{};
		if (opts & 0x80)
			memcpy(g.raw, area + 24, 16);
		else
			g = v4g(area[36], area[37], area[38], area[39]);
		t.insert(t.begin() + long(at), g);
	}

	gid_index gi;
	gi.build(t);
	/* The index against linear scans. */
	FUZZ_CHECK(gi.first_unicast(true) == ref_first_unicast(t, true));
	FUZZ_CHECK(gi.first_unicast(false) == ref_first_unicast(t, false));
	/* Every entry of small tables; a sample of the 300-entry one (the
	 * linear reference is quadratic over the table). */
	for (size_t i = 0; i < t.size(); i += t.size() > 32 ? 13 : 1)
		FUZZ_CHECK(gi.find(t[i]) == ref_find(t, t[i]));
	FUZZ_CHECK(gi.find(t.back()) == ref_find(t, t.back()));
	{
		wire::gid q{};
		memcpy(q.raw, area + 24, 16);
		FUZZ_CHECK(gi.find(q) == ref_find(t, q));
		q = v4g(area[36], area[37], area[38], area[39]);
		FUZZ_CHECK(gi.find(q) == ref_find(t, q));
	}

	ibv_ah_attr a;
	memset(&a, 0xa5, sizeof(a)); /* must be zeroed by the call */
	errno = 0;
	const int rc = init_ah_from_wc(port, gi, port_num, wc, null_grh ? nullptr : area, &a);
	const int err = errno;
	const ref_out r = reference(port, t, port_num, wc, null_grh ? nullptr : area);

	if (verbose())
		printf("ah_from_wc: rc %d (%s), is_global %u, sgid_index %u\n", rc, rc == 0 ? "ok" : strerror(err),
		       a.is_global, a.grh.sgid_index);
	FUZZ_CHECK(rc == 0 || rc == -1);
	FUZZ_CHECK(rc == 0 ? r.err == 0 : err == r.err);
	FUZZ_CHECK(a.dlid == r.a.dlid && a.sl == r.a.sl && a.src_path_bits == r.a.src_path_bits &&
		   a.port_num == r.a.port_num);
	if (rc != 0) {
		FUZZ_CHECK(err == EINVAL || err == EPROTOTYPE || err == EPROTONOSUPPORT);
		return 0;
	}
	FUZZ_CHECK(a.is_global == ((wc.wc_flags & wc_grh) ? 1 : 0));
	FUZZ_CHECK(a.static_rate == 0);
	if (!a.is_global) {
		FUZZ_CHECK(!eth && !port.grh_required);
		static const ibv_global_route zero{};
		FUZZ_CHECK(memcmp(&a.grh, &zero, sizeof(zero)) == 0);
		return 0;
	}
	FUZZ_CHECK(a.grh.sgid_index < t.size());
	const wire::gid &sg = t[a.grh.sgid_index];
	FUZZ_CHECK(!ref_zero(sg) && !ref_multicast(sg, eth));
	FUZZ_CHECK(a.grh.flow_label <= 0xfffff);
	FUZZ_CHECK(a.grh.hop_limit == 0xff);
	FUZZ_CHECK(!eth || (a.grh.traffic_class & 3) != 3);
	FUZZ_CHECK(memcmp(a.grh.dgid.raw, r.a.grh.dgid.raw, 16) == 0);
	FUZZ_CHECK(a.grh.sgid_index == r.a.grh.sgid_index && a.grh.flow_label == r.a.grh.flow_label &&
		   a.grh.traffic_class == r.a.grh.traffic_class);
	return 0;
}
