/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast: the IGMP/MLD decoder of the in-process switch (--mode
 * both). It counts the membership frames a subscriber's port sends, as a
 * switch would see them, to check the soft driver's reports against the
 * numbers of RFC 2236 (IGMPv2) and RFC 3810 (MLDv2).
 */
#ifndef RDGRAM_MCAST_IGMP_H
#define RDGRAM_MCAST_IGMP_H

#include <cstdint>

namespace rdgram::mcast {

/* IGMP/MLD frames one subscriber port sent. */
struct membership_seen {
	uint64_t igmp_report = 0; /* IGMPv2 Membership Report (type 0x16) */
	uint64_t igmp_leave = 0;  /* IGMPv2 Leave Group (type 0x17) */
	uint64_t mld_join = 0;    /* MLDv2 Report (143), first record CHANGE_TO_EXCLUDE (4) */
	uint64_t mld_leave = 0;   /* MLDv2 Report, first record CHANGE_TO_INCLUDE (3) */
	uint64_t other = 0;       /* anything else, truncated frames included */
};

/* Decodes one Ethernet frame of len bytes (untagged: IPv4 carrying IGMP,
 * or IPv6 whose next header is ICMPv6 with no extension header) and counts
 * it in s. (Any thread: touches only its arguments.) */
void classify(const uint8_t *frame, uint32_t len, membership_seen &s);

} // namespace rdgram::mcast

#endif
