/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * init_ah_from_wc / create_ah_from_wc (ibv_init_ah_from_wc(3),
 * ibv_create_ah_from_wc(3)) and gid_index: a hand-built IB GRH, real RoCEv2
 * completions over a soft_pair with the reply sent back through the AH made
 * from them, every errno case, and the places where rdgram differs from
 * rdma-core (see ah_from_wc.h).
 */
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rte_ip.h>

#include "eal_env.h"
#include "rdgram/ah_from_wc.h"

using namespace rdgram;
using namespace rdgram::test;

namespace {

using area_t = std::array<uint8_t, 40>;

wire::gid gid_of(const char *s) { return ip_of(s); }

/* An IPv6-shaped GRH (IB GRH or RoCEv2 IPv6 header). */
area_t grh6(uint8_t tclass, uint32_t flow, uint8_t next_hdr, uint8_t hop, const wire::gid &src,
	    const wire::gid &dst, uint8_t version = 6)
{
	area_t a{};
	uint32_t w0 = uint32_t(version) << 28 | uint32_t(tclass) << 20 | (flow & 0xfffff);
	a[0] = uint8_t(w0 >> 24);
	a[1] = uint8_t(w0 >> 16);
	a[2] = uint8_t(w0 >> 8);
	a[3] = uint8_t(w0);
	a[4] = 0;
	a[5] = 64; /* payload length, unused */
	a[6] = next_hdr;
	a[7] = hop;
	memcpy(a.data() + 8, src.raw, 16);
	memcpy(a.data() + 24, dst.raw, 16);
	return a;
}

/* A RoCEv2 IPv4 area: garbage (or zeros) then the IPv4 header with a right
 * checksum (DPDK's rte_ipv4_cksum, an implementation independent of ours). */
area_t grh4(uint8_t tos, const wire::gid &src, const wire::gid &dst, uint16_t packet_id = 0,
	    const uint8_t *first20 = nullptr)
{
	area_t a{};
	if (first20 != nullptr)
		memcpy(a.data(), first20, 20);
	auto *ip = reinterpret_cast<rte_ipv4_hdr *>(a.data() + 20);
	ip->version_ihl = 0x45;
	ip->type_of_service = tos;
	ip->total_length = rte_cpu_to_be_16(80);
	ip->packet_id = rte_cpu_to_be_16(packet_id);
	ip->fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = 9;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = src.v4();
	ip->dst_addr = dst.v4();
	ip->hdr_checksum = 0;
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	return a;
}

recv_wc wc_of(l3_type l3, uint8_t flags = wc_grh)
{
	recv_wc w{};
	w.wc_flags = flags;
	w.l3 = l3;
	w.src_qp = 0x77;
	return w;
}

port_attr eth_port(std::vector<wire::gid> gids)
{
	port_attr p;
	p.link = link_layer::ethernet;
	p.grh_required = true;
	p.gids = std::move(gids);
	return p;
}

/* init_ah_from_wc, expecting -1 and this errno. */
void expect_errno(const port_attr &port, const gid_index &gi, uint8_t pn, const recv_wc &w,
		  const void *grh, int want, const char *what)
{
	ibv_ah_attr a;
	errno = 0;
	EXPECT_EQ(init_ah_from_wc(port, gi, pn, w, grh, &a), -1) << what;
	EXPECT_EQ(errno, want) << what;
}

bool gid_eq(const ibv_gid &a, const wire::gid &b) { return memcmp(a.raw, b.raw, 16) == 0; }

/* -------------------------------------------------------------- gid_index */

wire::gid nth_gid(unsigned i, bool present)
{
	wire::gid g{};
	if (i & 1) {
		/* IPv4-mapped; absent ones in 172.16/12, present in 10/8 */
		g.raw[10] = g.raw[11] = 0xff;
		g.raw[12] = present ? 10 : 172;
		g.raw[13] = uint8_t(present ? i >> 16 : 16 | ((i >> 16) & 0xf));
		g.raw[14] = uint8_t(i >> 8);
		g.raw[15] = uint8_t(i);
	} else {
		g.raw[0] = 0xfd;
		g.raw[1] = present ? 0x00 : 0x01;
		g.raw[8] = 0x02;
		g.raw[12] = uint8_t(i >> 24);
		g.raw[13] = uint8_t(i >> 16);
		g.raw[14] = uint8_t(i >> 8);
		g.raw[15] = uint8_t(i);
	}
	return g;
}

TEST(GidIndex, TenThousand)
{
	const unsigned n = 10000;
	std::vector<wire::gid> t;
	for (unsigned i = 0; i < n; i++)
		t.push_back(nth_gid(i, true));
	t[500] = wire::gid{};     /* an empty entry */
	t[9000] = t[1234];        /* a duplicate: the lowest index wins */
	gid_index gi;
	EXPECT_EQ(gi.find(t[0]), -1) << "not built yet";
	gi.build(t);
	EXPECT_EQ(gi.size(), n - 2);
	for (unsigned i = 0; i < n; i++) {
		if (i == 500)
			continue;
		ASSERT_EQ(gi.find(t[i]), i == 9000 ? 1234 : int(i)) << i;
	}
	for (unsigned i = 0; i < n; i++)
		ASSERT_EQ(gi.find(nth_gid(i, false)), -1) << i;
	EXPECT_EQ(gi.find(wire::gid{}), -1) << "empty entries never match";
	EXPECT_EQ(gi.find(gid_of("10.1.0.1")), -1);
	EXPECT_EQ(gi.first_unicast(false), 0);
	EXPECT_EQ(gi.first_unicast(true), 1);

	/* Rebuilding replaces the contents. */
	gi.build({gid_of("239.1.1.1"), gid_of("ff0e::1"), gid_of("fd00::9"), gid_of("10.0.0.9")});
	EXPECT_EQ(gi.find(t[2]), -1);
	EXPECT_EQ(gi.find(gid_of("fd00::9")), 2);
	EXPECT_EQ(gi.find(gid_of("239.1.1.1")), 0);
	EXPECT_EQ(gi.first_unicast(false), 2) << "multicast entries are not unicast";
	EXPECT_EQ(gi.first_unicast(true), 3);
	gi.build({});
	EXPECT_EQ(gi.size(), 0u);
	EXPECT_EQ(gi.find(gid_of("fd00::9")), -1);
	EXPECT_EQ(gi.first_unicast(true), -1);
}

/* ------------------------------------------------------------- InfiniBand */

wire::gid ib_gid(uint64_t prefix, uint64_t guid)
{
	wire::gid g{};
	for (int i = 0; i < 8; i++) {
		g.raw[i] = uint8_t(prefix >> (56 - 8 * i));
		g.raw[8 + i] = uint8_t(guid >> (56 - 8 * i));
	}
	return g;
}

struct ib_fixture {
	port_attr port;
	gid_index gi;
	wire::gid remote = ib_gid(0xfe80000000000000ull, 0x0002c90300a1b2c3ull);
	ib_fixture()
	{
		port.link = link_layer::infiniband;
		port.grh_required = false;
		port.lid = 0x21;
		port.gids = {ib_gid(0xfe80000000000000ull, 0x0002c90300000001ull),
			     ib_gid(0xfec0000000000001ull, 0x0002c90300000001ull)};
		gi.build(port.gids);
	}
};

TEST(AhFromWc, InfiniBandGrh)
{
	ib_fixture f;
	/* TClass with both low bits set: on IB it is copied as is. */
	area_t g = grh6(0xa3, 0xabcde, 0x1b, 3, f.remote, f.port.gids[1]);
	recv_wc w = wc_of(l3_type::ib_grh);
	w.slid = 0x1717;
	w.sl = 9;
	w.dlid_path_bits = 5;
	ibv_ah_attr a;
	ASSERT_EQ(init_ah_from_wc(f.port, f.gi, 1, w, g.data(), &a), 0);
	EXPECT_EQ(a.dlid, 0x1717);
	EXPECT_EQ(a.sl, 9);
	EXPECT_EQ(a.src_path_bits, 5);
	EXPECT_EQ(a.static_rate, 0);
	EXPECT_EQ(a.port_num, 1);
	EXPECT_EQ(a.is_global, 1);
	EXPECT_TRUE(gid_eq(a.grh.dgid, f.remote));
	EXPECT_EQ(a.grh.sgid_index, 1);
	EXPECT_EQ(a.grh.flow_label, 0xabcdeu);
	EXPECT_EQ(a.grh.hop_limit, 0xff) << "not the received hop limit (3)";
	EXPECT_EQ(a.grh.traffic_class, 0xa3);

	/* Without a GRH an IB port needs none: LID routing, is_global 0. */
	recv_wc lw = w;
	lw.wc_flags = 0;
	ASSERT_EQ(init_ah_from_wc(f.port, f.gi, 1, lw, nullptr, &a), 0);
	EXPECT_EQ(a.is_global, 0);
	EXPECT_EQ(a.dlid, 0x1717);
	EXPECT_EQ(a.sl, 9);
	EXPECT_EQ(a.src_path_bits, 5);
	EXPECT_EQ(a.port_num, 1);
	EXPECT_EQ(a.grh.flow_label, 0u);
	/* ...unless the port requires one. */
	port_attr req = f.port;
	req.grh_required = true;
	expect_errno(req, f.gi, 1, lw, nullptr, EPROTOTYPE, "IB port with GRH required");

	/* An IB GRH is never taken for IPv4, whatever its GID bytes hold: a GID
	 * whose bytes 12..31 of the area form a valid IPv4 header. */
	area_t v4ish = grh4(0, gid_of("10.0.0.1"), gid_of("10.0.0.2"));
	wire::gid odd_src;
	memcpy(odd_src.raw, f.remote.raw, 12);
	memcpy(odd_src.raw + 12, v4ish.data() + 20, 4);
	wire::gid odd_dst = f.port.gids[0];
	area_t h = grh6(0x10, 0x1, 0x1b, 1, odd_src, odd_dst);
	memcpy(h.data() + 20, v4ish.data() + 20, 20); /* overwrites SGID/DGID tails */
	memcpy(odd_src.raw, h.data() + 8, 16);
	memcpy(odd_dst.raw, h.data() + 24, 16);
	port_attr p2 = f.port;
	p2.gids.push_back(odd_dst);
	gid_index gi2;
	gi2.build(p2.gids);
	ASSERT_EQ(init_ah_from_wc(p2, gi2, 1, w, h.data(), &a), 0);
	EXPECT_TRUE(gid_eq(a.grh.dgid, odd_src));
	EXPECT_EQ(a.grh.sgid_index, 2);
	EXPECT_EQ(a.grh.flow_label, 1u);

	/* Multicast destination: the reply comes from the lowest unicast GID. */
	area_t m = grh6(0, 0, 0x1b, 1, f.remote, gid_of("ff12:401b::1"));
	ASSERT_EQ(init_ah_from_wc(f.port, f.gi, 1, w, m.data(), &a), 0);
	EXPECT_EQ(a.grh.sgid_index, 0);

	/* Errors. */
	g = grh6(0, 0, 17, 1, f.remote, f.port.gids[0]);
	expect_errno(f.port, f.gi, 1, w, g.data(), EPROTONOSUPPORT, "UDP next header on IB");
	g = grh6(0, 0, 0x1b, 1, f.remote, f.port.gids[0], 4);
	expect_errno(f.port, f.gi, 1, w, g.data(), EPROTONOSUPPORT, "IPVer 4 on IB");
	g = grh6(0, 0, 0x1b, 1, gid_of("ff12::1"), f.port.gids[0]);
	expect_errno(f.port, f.gi, 1, w, g.data(), EINVAL, "multicast source");
	g = grh6(0, 0, 0x1b, 1, wire::gid{}, f.port.gids[0]);
	expect_errno(f.port, f.gi, 1, w, g.data(), EINVAL, "unspecified source");
	g = grh6(0, 0, 0x1b, 1, f.remote, ib_gid(0xfe80000000000000ull, 99));
	expect_errno(f.port, f.gi, 1, w, g.data(), EINVAL, "destination GID not ours");
	g = grh6(0, 0, 0x1b, 1, f.remote, f.port.gids[0]);
	expect_errno(f.port, f.gi, 2, w, g.data(), EINVAL, "port 2");
	expect_errno(f.port, f.gi, 0, w, g.data(), EINVAL, "port 0");
	expect_errno(f.port, f.gi, 1, w, nullptr, EINVAL, "GRH flag without a GRH");
}

/* ------------------------------------------- RoCEv2, hand-built headers */

/* A mixed table: IPv6 first, then IPv4, so the family matters. */
struct eth_fixture {
	port_attr port = eth_port({gid_of("fd00::1"), gid_of("10.1.0.2"), gid_of("10.1.0.3"),
				   gid_of("fd00::2")});
	gid_index gi;
	eth_fixture() { gi.build(port.gids); }
};

TEST(AhFromWc, RoceV4FlowLabelNotFromGarbage)
{
	eth_fixture f;
	/* The first 20 bytes of an IPv4 area are undefined; here they look like
	 * an IPv6 header with traffic class 0xff and flow label 0xfffff, as an
	 * old receive buffer might. rdma-core would report flow_label 0xfffff. */
	uint8_t junk[20];
	memset(junk, 0xff, sizeof(junk));
	junk[0] = 0x6f;
	area_t g = grh4(0x48, gid_of("10.9.9.9"), gid_of("10.1.0.3"), 7, junk);
	for (l3_type l3 : {l3_type::ipv4, l3_type::ib_grh /* not reported: bytes decide */}) {
		SCOPED_TRACE(int(l3));
		recv_wc w = wc_of(l3);
		w.sl = 0xd; /* the received PCP (5) in the low 3 bits; above: not an RoCE priority */
		ibv_ah_attr a;
		ASSERT_EQ(init_ah_from_wc(f.port, f.gi, 1, w, g.data(), &a), 0);
		EXPECT_EQ(a.grh.flow_label, 0u);
		EXPECT_EQ(a.grh.traffic_class, 0x48) << "the TOS, not the garbage";
		EXPECT_EQ(a.sl, 5) << "the request's priority class, 3 bits on RoCE";
		EXPECT_EQ(a.grh.sgid_index, 2);
		EXPECT_TRUE(gid_eq(a.grh.dgid, gid_of("10.9.9.9")));
		EXPECT_EQ(a.grh.hop_limit, 0xff) << "not the received TTL (9)";
		EXPECT_EQ(a.is_global, 1);
		EXPECT_EQ(a.dlid, 0);
	}
	/* Garbage whose first nibble is not 6: IPv4 by byte 20 alone. */
	junk[0] = 0x2f;
	g = grh4(0x48, gid_of("10.9.9.9"), gid_of("10.1.0.2"), 7, junk);
	ibv_ah_attr a;
	ASSERT_EQ(init_ah_from_wc(f.port, f.gi, 1, wc_of(l3_type::ib_grh), g.data(), &a), 0);
	EXPECT_EQ(a.grh.flow_label, 0u);
	EXPECT_EQ(a.grh.sgid_index, 1);
}

/* The IPv4 header checksum rdma-core computes folds the carry once; this
 * finds a header where that matters and checks that we still see IPv4. */
uint16_t one_fold_csum(const uint8_t *h)
{
	uint32_t s = 0;
	for (int i = 0; i < 20; i += 2)
		if (i != 10)
			s += uint32_t(h[i]) << 8 | h[i + 1];
	s = (s & 0xffff) + (s >> 16);
	return uint16_t(~s);
}

TEST(AhFromWc, RoceV4ChecksumWithDoubleCarry)
{
	eth_fixture f;
	uint8_t junk[20] = {0x60};
	bool found = false;
	area_t g{};
	for (unsigned id = 0; id < 65536 && !found; id++) {
		g = grh4(0xb8, gid_of("255.255.255.254"), gid_of("10.1.0.3"), uint16_t(id), junk);
		uint16_t real = uint16_t(g[30] << 8 | g[31]);
		found = one_fold_csum(g.data() + 20) != real;
	}
	ASSERT_TRUE(found) << "no header with a double carry";
	ibv_ah_attr a;
	ASSERT_EQ(init_ah_from_wc(f.port, f.gi, 1, wc_of(l3_type::ib_grh), g.data(), &a), 0);
	EXPECT_EQ(a.grh.sgid_index, 2) << "taken for IPv4";
	EXPECT_TRUE(gid_eq(a.grh.dgid, gid_of("255.255.255.254")));
	EXPECT_EQ(a.grh.flow_label, 0u);
	EXPECT_EQ(a.grh.traffic_class, 0xb8);
}

TEST(AhFromWc, RoceHandBuiltCases)
{
	eth_fixture f;
	ibv_ah_attr a;
	const recv_wc w4 = wc_of(l3_type::ipv4), w6 = wc_of(l3_type::ipv6), wx = wc_of(l3_type::ib_grh);

	/* IPv6: traffic class and flow label from word 0; ECN CE not echoed. */
	area_t g = grh6(0xbb, 0x54321, 17, 2, gid_of("fd00::77"), gid_of("fd00::2"));
	for (const recv_wc &w : {w6, wx}) {
		ASSERT_EQ(init_ah_from_wc(f.port, f.gi, 1, w, g.data(), &a), 0);
		EXPECT_EQ(a.grh.sgid_index, 3);
		EXPECT_TRUE(gid_eq(a.grh.dgid, gid_of("fd00::77")));
		EXPECT_EQ(a.grh.flow_label, 0x54321u);
		EXPECT_EQ(a.grh.traffic_class, 0xba) << "DSCP kept, CE -> ECT(0)";
		EXPECT_EQ(a.grh.hop_limit, 0xff);
	}
	/* ECT(1), ECT(0), not-ECT: kept. */
	for (uint8_t tc : {0xb9, 0xba, 0xb8}) {
		g = grh6(tc, 1, 17, 2, gid_of("fd00::77"), gid_of("fd00::2"));
		ASSERT_EQ(init_ah_from_wc(f.port, f.gi, 1, w6, g.data(), &a), 0);
		EXPECT_EQ(a.grh.traffic_class, tc);
	}

	/* Multicast destination: from the lowest unicast GID of the family. */
	g = grh4(0, gid_of("10.9.9.9"), gid_of("239.1.2.3"));
	ASSERT_EQ(init_ah_from_wc(f.port, f.gi, 1, w4, g.data(), &a), 0);
	EXPECT_EQ(a.grh.sgid_index, 1) << "first IPv4 GID";
	EXPECT_TRUE(gid_eq(a.grh.dgid, gid_of("10.9.9.9")));
	g = grh6(0, 0, 17, 2, gid_of("fd00::77"), gid_of("ff0e::1234"));
	ASSERT_EQ(init_ah_from_wc(f.port, f.gi, 1, w6, g.data(), &a), 0);
	EXPECT_EQ(a.grh.sgid_index, 0) << "first IPv6 GID";
	eth_fixture only6;
	only6.port.gids = {gid_of("fd00::1")};
	only6.gi.build(only6.port.gids);
	g = grh4(0, gid_of("10.9.9.9"), gid_of("239.1.2.3"));
	expect_errno(only6.port, only6.gi, 1, w4, g.data(), EINVAL, "multicast, no IPv4 GID");

	/* Errors. */
	g = grh4(0, gid_of("239.0.0.1"), gid_of("10.1.0.2"));
	expect_errno(f.port, f.gi, 1, w4, g.data(), EINVAL, "IPv4 multicast source");
	g = grh4(0, gid_of("0.0.0.0"), gid_of("10.1.0.2"));
	expect_errno(f.port, f.gi, 1, w4, g.data(), EINVAL, "IPv4 unspecified source");
	g = grh6(0, 0, 17, 2, gid_of("ff02::1"), gid_of("fd00::2"));
	expect_errno(f.port, f.gi, 1, w6, g.data(), EINVAL, "IPv6 multicast source");
	g = grh4(0, gid_of("10.9.9.9"), gid_of("10.1.0.99"));
	expect_errno(f.port, f.gi, 1, w4, g.data(), EINVAL, "IPv4 destination not ours");
	g = grh6(0, 0, 17, 2, gid_of("fd00::77"), gid_of("fd00::99"));
	expect_errno(f.port, f.gi, 1, w6, g.data(), EINVAL, "IPv6 destination not ours");
	g = grh6(0, 0, 0x1b, 2, gid_of("fd00::77"), gid_of("fd00::2"));
	expect_errno(f.port, f.gi, 1, wx, g.data(), EPROTONOSUPPORT, "RoCEv1");
	g = grh6(0, 0, 6, 2, gid_of("fd00::77"), gid_of("fd00::2"));
	expect_errno(f.port, f.gi, 1, w6, g.data(), EPROTONOSUPPORT, "IPv6 next header TCP");
	area_t zero{};
	expect_errno(f.port, f.gi, 1, wx, zero.data(), EPROTONOSUPPORT, "neither IPv4 nor IPv6");
	expect_errno(f.port, f.gi, 1, w4, zero.data(), EPROTONOSUPPORT, "l3 IPv4, no IPv4 header");
	expect_errno(f.port, f.gi, 1, w6, zero.data(), EPROTONOSUPPORT, "l3 IPv6, no IPv6 header");
	g = grh4(0, gid_of("10.9.9.9"), gid_of("10.1.0.2"));
	expect_errno(f.port, f.gi, 1, wc_of(l3_type::ipv4, 0), g.data(), EPROTOTYPE, "no GRH on RoCE");
	expect_errno(f.port, f.gi, 0, w4, g.data(), EINVAL, "port 0");
	expect_errno(f.port, f.gi, 2, w4, g.data(), EINVAL, "port 2");

	/* An sgid_index that ibv_ah_attr cannot hold (uint8_t) is refused,
	 * not truncated. */
	eth_fixture big;
	big.port.gids.clear();
	for (unsigned i = 0; i < 300; i++)
		big.port.gids.push_back(wire::gid::from_v4(rte_cpu_to_be_32(0x0a020000u + i)));
	big.gi.build(big.port.gids);
	g = grh4(0, gid_of("10.9.9.9"), gid_of("10.2.0.255"));
	ASSERT_EQ(init_ah_from_wc(big.port, big.gi, 1, w4, g.data(), &a), 0);
	EXPECT_EQ(a.grh.sgid_index, 255);
	g = grh4(0, gid_of("10.9.9.9"), gid_of("10.2.1.0"));
	expect_errno(big.port, big.gi, 1, w4, g.data(), EINVAL, "index 256");
}

/* ------------------------------------------- RoCEv2, real completions */

/* Sends one inline datagram on side `from` and receives it on the other. */
bool send_recv(soft_pair &p, int from, ah_handle ah, uint32_t dqpn, const std::string &msg,
	       recv_wc *out)
{
	send_wr wr{ah, dqpn, p.qkey, nullptr, msg.data(), uint32_t(msg.size()), 0, send_inline};
	if (p.q[from].tx_burst(&wr, 1) != 1)
		return false;
	p.q[from].tx_flush();
	for (int i = 0; i < 1000; i++)
		if (p.q[1 - from].rx_burst(out, 1) == 1)
			return true;
	return false;
}

void reflector(bool v6)
{
	soft_pair p(v6);
	ASSERT_TRUE(p.ok);
	const uint8_t tclass = 0x68; /* DSCP 26 (AF31), not-ECT */
	const uint32_t flow = v6 ? 0x9abcd : 0;

	/* Side 0 -> side 1 with a non-default traffic class and flow label. */
	ibv_ah_attr a0 = soft_pair::attr_to(p.addr[1]);
	a0.grh.traffic_class = tclass;
	a0.grh.flow_label = flow;
	a0.grh.hop_limit = 17;
	ah_handle h0 = ah_null;
	int e = -1;
	g_rt->ctl().call([&] { h0 = p.dev[0].create_ah(a0, &e); });
	ASSERT_EQ(e, 0);
	recv_wc wc{};
	ASSERT_TRUE(send_recv(p, 0, h0, p.qpn[1], "ping", &wc));
	const auto *area = rte_pktmbuf_mtod(wc.mbuf, const uint8_t *);
	EXPECT_EQ(wc.l3, v6 ? l3_type::ipv6 : l3_type::ipv4);
	EXPECT_EQ(0, memcmp(area + 40, "ping", 4));

	const port_attr &port = p.dev[1].port();
	gid_index gi;
	gi.build(port.gids);
	ibv_ah_attr r, rx;
	errno = 0;
	ASSERT_EQ(init_ah_from_wc(port, gi, 1, wc, area, &r), 0) << strerror(errno);
	EXPECT_EQ(r.dlid, 0);
	EXPECT_EQ(r.sl, 0);
	EXPECT_EQ(r.src_path_bits, 0);
	EXPECT_EQ(r.static_rate, 0);
	EXPECT_EQ(r.is_global, 1);
	EXPECT_EQ(r.port_num, 1);
	EXPECT_TRUE(gid_eq(r.grh.dgid, p.addr[0]));
	EXPECT_EQ(r.grh.sgid_index, 0);
	EXPECT_EQ(r.grh.flow_label, flow);
	EXPECT_EQ(r.grh.hop_limit, 0xff);
	EXPECT_EQ(r.grh.traffic_class, tclass);
	/* The same from the bytes alone (L3 type not reported). */
	recv_wc wx = wc;
	wx.l3 = l3_type::ib_grh;
	ASSERT_EQ(init_ah_from_wc(port, gi, 1, wx, area, &rx), 0);
	EXPECT_EQ(0, memcmp(&r, &rx, sizeof(r)));

	/* Errno cases on the real completion. */
	recv_wc nog = wc;
	nog.wc_flags &= uint8_t(~wc_grh);
	expect_errno(port, gi, 1, nog, area, EPROTOTYPE, "no GRH on RoCE");
	expect_errno(port, gi, 2, wc, area, EINVAL, "bad port_num");
	area_t m;
	memcpy(m.data(), area, 40);
	if (v6)
		memcpy(m.data() + 24, gid_of("fd00::99").raw, 16);
	else
		memcpy(m.data() + 36, gid_of("10.1.0.99").raw + 12, 4);
	expect_errno(port, gi, 1, wc, m.data(), EINVAL, "destination GID not in the table");
	memcpy(m.data(), area, 40);
	if (v6)
		memcpy(m.data() + 8, gid_of("ff05::2").raw, 16);
	else
		memcpy(m.data() + 32, gid_of("224.0.0.9").raw + 12, 4);
	expect_errno(port, gi, 1, wc, m.data(), EINVAL, "multicast source GID");

	/* The reflector: AH from the completion on side 1, reply to side 0. */
	ah_handle h1 = ah_null;
	int err = -1;
	g_rt->ctl().call([&] { h1 = create_ah_from_wc(p.dev[1], gi, 1, wc, area, &err); });
	ASSERT_EQ(err, 0);
	ASSERT_NE(h1, ah_null);
	const uint32_t back_qpn = wc.src_qp;
	EXPECT_EQ(back_qpn, p.qpn[0]);
	rte_pktmbuf_free(wc.mbuf);

	recv_wc rep{};
	ASSERT_TRUE(send_recv(p, 1, h1, back_qpn, "pong", &rep));
	EXPECT_EQ(rep.qp_num, p.qpn[0]);
	EXPECT_EQ(rep.src_qp, p.qpn[1]);
	EXPECT_EQ(rep.sgid, p.addr[1]);
	EXPECT_EQ(rep.dgid, p.addr[0]);
	const auto *ra = rte_pktmbuf_mtod(rep.mbuf, const uint8_t *);
	EXPECT_EQ(0, memcmp(ra + 40, "pong", 4));
	if (v6) {
		uint32_t w0 = uint32_t(ra[0]) << 24 | uint32_t(ra[1]) << 16 | uint32_t(ra[2]) << 8 | ra[3];
		EXPECT_EQ(w0, 6u << 28 | uint32_t(tclass) << 20 | flow) << "traffic class + flow label echoed";
		EXPECT_EQ(ra[7], 0xff) << "hop limit";
	} else {
		EXPECT_EQ(ra[21], tclass) << "TOS echoed";
		EXPECT_EQ(ra[28], 0xff) << "TTL";
	}
	rte_pktmbuf_free(rep.mbuf);

	/* create_ah_from_wc failures report the errno of init_ah_from_wc. */
	ah_handle bad = h1;
	g_rt->ctl().call([&] { bad = create_ah_from_wc(p.dev[1], gi, 2, nog, area, &err); });
	EXPECT_EQ(bad, ah_null);
	EXPECT_EQ(err, EINVAL);

	int rc0 = -1, rc1 = -1;
	g_rt->ctl().call([&] {
		rc0 = p.dev[0].destroy_ah(h0);
		rc1 = p.dev[1].destroy_ah(h1);
	});
	EXPECT_EQ(rc0, 0);
	EXPECT_EQ(rc1, 0);
	EXPECT_EQ(p.q[0].counters().rx_drops(), 0u);
	EXPECT_EQ(p.q[1].counters().rx_drops(), 0u);
	EXPECT_EQ(p.in_use(0), 0u) << "mbuf leak";
	EXPECT_EQ(p.in_use(1), 0u) << "mbuf leak";
}

TEST(AhFromWc, RoceV2Ipv4Reflector) { reflector(false); }
TEST(AhFromWc, RoceV2Ipv6Reflector) { reflector(true); }

/* A create_ah failure (here injected) comes back through *err and errno. */
TEST(AhFromWc, CreateErrorPassedThrough)
{
	soft_pair p(false);
	ASSERT_TRUE(p.ok);
	ah_handle h0 = p.ah_from(0);
	ASSERT_NE(h0, ah_null);
	recv_wc wc{};
	ASSERT_TRUE(send_recv(p, 0, h0, p.qpn[1], "x", &wc));
	gid_index gi;
	gi.build(p.dev[1].port().gids);
	ah_handle h = ah_null;
	int err = 0, en = 0;
	g_rt->ctl().call([&] {
		p.dev[1].inject_create_error(ENOMEM);
		errno = 0;
		h = create_ah_from_wc(p.dev[1], gi, 1, wc, rte_pktmbuf_mtod(wc.mbuf, void *), &err);
		en = errno;
	});
	EXPECT_EQ(h, ah_null);
	EXPECT_EQ(err, ENOMEM);
	EXPECT_EQ(en, ENOMEM);
	rte_pktmbuf_free(wc.mbuf);
	g_rt->ctl().call([&] { p.dev[0].destroy_ah(h0); });
	EXPECT_EQ(p.in_use(0), 0u);
	EXPECT_EQ(p.in_use(1), 0u);
}

} // namespace
