/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The soft driver's counters beyond the generic ones (rdgram/stats.h for
 * the kinds and the rule): every check a RoCE HCA makes on a received
 * frame has its drop reason, in the order soft_queue::parse checks them.
 */
#ifndef RDGRAM_SOFT_COUNTERS_H
#define RDGRAM_SOFT_COUNTERS_H

#include "rdgram/stats.h"

namespace rdgram::soft {

/* Receive-side drop reasons, in the order a frame is checked.
 * X(name, kind, description). */
#define RDGRAM_SOFT_RX_DROPS(X)                                                       \
	X(rx_vlan_double_tagged, drop, "two VLAN tags (0x88A8, or 802.1Q in 802.1Q)")  \
	X(rx_vlan_tagged, drop, "802.1Q-tagged frame on a port without a vlan")        \
	X(rx_vlan_untagged, drop, "untagged frame on a VLAN port")                     \
	X(rx_vlan_other, drop, "802.1Q VLAN ID other than the port's")                 \
	X(rx_not_ip, drop, "ethertype is neither IPv4 nor IPv6")                       \
	X(rx_control_full, drop, "ARP/ND frame for the control thread, its ring full") \
	X(rx_truncated, drop, "frame shorter than its headers say")                   \
	X(rx_bad_ip_header, drop, "IP version, IHL/options or payload length invalid") \
	X(rx_bad_ip_checksum, drop, "IPv4 header checksum mismatch")                  \
	X(rx_ip_fragment, drop, "IPv4 fragment (RoCEv2 forbids fragmentation)")      \
	X(rx_not_udp, drop, "IP protocol/next header is not UDP")                     \
	X(rx_not_roce, drop, "UDP destination port is not 4791")                     \
	X(rx_bad_udp_length, drop, "UDP length inconsistent with the IP length")     \
	X(rx_dgid_mismatch, drop, "destination IP is none of the port's GIDs")       \
	X(rx_bad_bth_version, drop, "BTH transport header version is not 0")         \
	X(rx_bad_opcode, drop, "BTH opcode is not UD SEND_ONLY[_WITH_IMMEDIATE]")    \
	X(rx_bad_pkey, drop, "P_Key does not match the port's partition")            \
	X(rx_unknown_qpn, drop, "destination QPN is a QP of no queue of this port")  \
	X(rx_bad_qkey, drop, "DETH Q_Key differs from the QP's Q_Key")               \
	X(rx_bad_length, drop, "payload length negative or above the path MTU")      \
	X(rx_bad_icrc, drop, "invariant CRC mismatch")                               \
	X(rx_chained_mbuf, drop, "frame spans mbufs that cannot be linearized")      \
	X(rx_handoff_full, drop, "frame for another queue's QP, that queue's ring full") \
	X(rx_group_copy_failed, drop, "no mbuf for a group member's copy")

/* Everything the soft queue counts beyond RDGRAM_QP_COUNTERS. */
#define RDGRAM_SOFT_COUNTERS(X)                                                                   \
	X(tx_no_mbuf, event, "bursts cut short: mempool empty (the caller keeps the rest)")        \
	X(tx_bad_qkey, drop, "controlled Q_Key (high bit) from a non-privileged QP")               \
	X(rx_to_control, event, "ARP/ND frames handed to the control thread")                      \
	X(tx_control, event, "control-thread frames (ARP/ND) sent")                                \
	X(tx_control_dropped, event, "control-thread frames the port refused (freed; not a message)") \
	X(rx_handoff_out, event, "frames handed to the queue that owns their QP")                   \
	X(rx_handoff_in, event, "frames other queues handed to this one")                            \
	X(rx_group_copies, event, "copies made for a group's other members (each counted on its own)") \
	X(rx_ecn_ce, event, "datagrams delivered marked ECN CE (congestion experienced)")           \
	RDGRAM_SOFT_RX_DROPS(X)

struct soft_counters : qp_counters {
	RDGRAM_COUNTER_SET(soft_counters, "soft", RDGRAM_SOFT_COUNTERS)
};

} // namespace rdgram::soft

#endif
