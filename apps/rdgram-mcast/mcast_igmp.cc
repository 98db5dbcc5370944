/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "mcast_igmp.h"

#include <netinet/in.h>

#include <cstring>

namespace rdgram::mcast {

namespace {
constexpr uint32_t eth_len = 14;
constexpr uint32_t ipv4_min = 20, ipv6_len = 40;
constexpr uint32_t igmp_len = 8;                 /* RFC 2236 section 2 */
constexpr uint32_t mld_hdr = 8, mld_record = 20; /* RFC 3810 5.2: report header, one record (no source) */
} // namespace

void classify(const uint8_t *f, uint32_t len, membership_seen &s)
{
	/* A report of a VLAN port (soft [mcast] vlan): behind one 802.1Q tag. */
	if (len >= eth_len + 4 && f[12] == 0x81 && f[13] == 0x00) {
		uint8_t untagged[eth_len + ipv6_len + 8 + mld_hdr + mld_record];
		const uint32_t n = len - 4 < sizeof(untagged) ? len - 4 : uint32_t(sizeof(untagged));
		memcpy(untagged, f, 12);
		memcpy(untagged + 12, f + 16, n - 12);
		classify(untagged, n, s);
		return;
	}
	/* The IPv4 test asks for a 24-byte header: the soft driver's reports
	 * carry the Router Alert option (RFC 2113, which RFC 2236 asks for). */
	if (len >= eth_len + ipv4_min + 4 + igmp_len && f[12] == 0x08 && f[13] == 0x00 &&
	    f[eth_len + 9] == IPPROTO_IGMP) {
		const uint32_t ihl = (f[eth_len] & 0xf) * 4u;
		if (eth_len + ihl >= len) {
			s.other++;
			return;
		}
		const uint8_t t = f[eth_len + ihl];
		if (t == 0x16)
			s.igmp_report++;
		else if (t == 0x17)
			s.igmp_leave++;
		else
			s.other++;
		return;
	}
	/* MLDv2 behind the 8-byte Hop-by-Hop header (next header 0) with
	 * Router Alert (RFC 3810 section 5), then ICMPv6 type 143. */
	if (len >= eth_len + ipv6_len + 8 + mld_hdr + mld_record && f[12] == 0x86 && f[13] == 0xdd &&
	    f[eth_len + 6] == 0 && f[eth_len + ipv6_len] == IPPROTO_ICMPV6 && f[eth_len + ipv6_len + 8] == 143) {
		const uint8_t rec = f[eth_len + ipv6_len + 8 + mld_hdr];
		if (rec == 4)
			s.mld_join++;
		else if (rec == 3)
			s.mld_leave++;
		else
			s.other++;
		return;
	}
	s.other++;
}

} // namespace rdgram::mcast
