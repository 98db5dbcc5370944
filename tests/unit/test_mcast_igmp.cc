/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast's IGMP/MLD decoder (apps/rdgram-mcast/mcast_igmp.h): the
 * frames the soft driver sends (IGMPv2 with Router Alert, MLDv2 behind a
 * Hop-by-Hop header) are counted by type, and everything else, truncated
 * or malformed frames included, is "other" without reading past the end.
 */
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "mcast_igmp.h"

using rdgram::mcast::classify;
using rdgram::mcast::membership_seen;

namespace {

/* Ethernet + IPv4 (IHL 6: Router Alert) + IGMPv2 of type t, RFC 2236. */
std::vector<uint8_t> igmp_frame(uint8_t t)
{
	std::vector<uint8_t> f(14 + 24 + 8, 0);
	f[12] = 0x08;
	f[13] = 0x00;
	f[14] = 0x46;
	f[14 + 8] = 1; /* TTL */
	f[14 + 9] = 2; /* IGMP */
	f[14 + 20] = 0x94; /* Router Alert */
	f[14 + 21] = 4;
	f[14 + 24] = t;
	return f;
}

/* Ethernet + IPv6 + Hop-by-Hop (Router Alert) + MLDv2 report with one
 * record of type rec, RFC 3810 5.2. */
std::vector<uint8_t> mld_frame(uint8_t rec)
{
	std::vector<uint8_t> f(14 + 40 + 8 + 8 + 20, 0);
	f[12] = 0x86;
	f[13] = 0xdd;
	f[14] = 0x60;
	f[14 + 6] = 0;        /* next header: Hop-by-Hop */
	f[14 + 40] = 58;      /* HBH next header: ICMPv6 */
	f[14 + 48] = 143;     /* MLDv2 report */
	f[14 + 48 + 7] = 1;   /* one record */
	f[14 + 48 + 8] = rec; /* record type */
	return f;
}

membership_seen count(const std::vector<uint8_t> &f, size_t len)
{
	membership_seen s;
	/* A copy of exactly len bytes: ASan sees a read past it. */
	std::vector<uint8_t> c(f.begin(), f.begin() + long(len));
	classify(c.data(), uint32_t(c.size()), s);
	return s;
}

} // namespace

TEST(McastIgmp, CountsIgmpv2ReportAndLeave)
{
	const auto r = igmp_frame(0x16), l = igmp_frame(0x17);
	membership_seen s;
	classify(r.data(), uint32_t(r.size()), s);
	classify(l.data(), uint32_t(l.size()), s);
	classify(r.data(), uint32_t(r.size()), s);
	EXPECT_EQ(s.igmp_report, 2u);
	EXPECT_EQ(s.igmp_leave, 1u);
	EXPECT_EQ(s.mld_join + s.mld_leave + s.other, 0u);
}

TEST(McastIgmp, CountsMldv2JoinAndLeaveRecords)
{
	const auto j = mld_frame(4), l = mld_frame(3);
	membership_seen s;
	classify(j.data(), uint32_t(j.size()), s);
	classify(l.data(), uint32_t(l.size()), s);
	EXPECT_EQ(s.mld_join, 1u);
	EXPECT_EQ(s.mld_leave, 1u);
	EXPECT_EQ(s.igmp_report + s.igmp_leave + s.other, 0u);
}

TEST(McastIgmp, EverythingElseIsOther)
{
	EXPECT_EQ(count(igmp_frame(0x11), 46).other, 1u); /* a query */
	EXPECT_EQ(count(mld_frame(1), 90).other, 1u);     /* MODE_IS_INCLUDE */
	auto no_hbh = mld_frame(4);
	no_hbh[14 + 6] = 58; /* ICMPv6 right after the IPv6 header */
	EXPECT_EQ(count(no_hbh, 90).other, 1u);
	auto arp = igmp_frame(0x16);
	arp[13] = 0x06;
	EXPECT_EQ(count(arp, 46).other, 1u);
	auto udp = igmp_frame(0x16);
	udp[14 + 9] = 17;
	EXPECT_EQ(count(udp, 46).other, 1u);
}

TEST(McastIgmp, TruncatedOrMalformedFramesAreOtherWithoutOverread)
{
	EXPECT_EQ(count(igmp_frame(0x16), 45).other, 1u);
	EXPECT_EQ(count(mld_frame(4), 89).other, 1u);
	EXPECT_EQ(count(igmp_frame(0x16), 0).other, 1u);
	auto big_ihl = igmp_frame(0x16);
	big_ihl[14] = 0x4f; /* 60-byte header in a 46-byte frame */
	EXPECT_EQ(count(big_ihl, 46).other, 1u);
}

/* A VLAN port's reports (soft vlan): the same, behind an 802.1Q tag; a
 * tagged frame cut short is "other". */
TEST(McastIgmp, CountsTaggedReports)
{
	auto tag = [](std::vector<uint8_t> f) {
		const uint8_t t[4] = {0x81, 0x00, 0xa0, 78};
		f.insert(f.begin() + 12, t, t + 4);
		return f;
	};
	const auto r = tag(igmp_frame(0x16)), j = tag(mld_frame(4));
	membership_seen s;
	classify(r.data(), uint32_t(r.size()), s);
	classify(j.data(), uint32_t(j.size()), s);
	EXPECT_EQ(s.igmp_report, 1u);
	EXPECT_EQ(s.mld_join, 1u);
	EXPECT_EQ(s.other, 0u);
	EXPECT_EQ(count(r, 17).other, 1u);
}
