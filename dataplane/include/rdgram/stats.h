/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Counters. Every drop has a named reason (an X-macro list, as VPP does), so
 * a packet that does not reach the application is always accounted for.
 */
#ifndef RDGRAM_STATS_H
#define RDGRAM_STATS_H

#include <cstdint>

namespace rdgram {

/* Receive-side drop reasons, in the order a packet is checked. */
#define RDGRAM_RX_DROPS(X)                                                     \
	X(rx_not_ip, "ethertype is neither IPv4 nor IPv6")                      \
	X(rx_control_full, "ARP/ND frame for the control thread, its ring full") \
	X(rx_truncated, "frame shorter than its headers say")                   \
	X(rx_bad_ip_header, "IP version, IHL/options or payload length invalid") \
	X(rx_bad_ip_checksum, "IPv4 header checksum mismatch")                  \
	X(rx_ip_fragment, "IPv4 fragment (RoCEv2 forbids fragmentation)")      \
	X(rx_not_udp, "IP protocol/next header is not UDP")                     \
	X(rx_not_roce, "UDP destination port is not 4791")                     \
	X(rx_bad_udp_length, "UDP length inconsistent with the IP length")     \
	X(rx_dgid_mismatch, "destination IP is none of the port's GIDs")       \
	X(rx_bad_bth_version, "BTH transport header version is not 0")         \
	X(rx_bad_opcode, "BTH opcode is not UD SEND_ONLY[_WITH_IMMEDIATE]")    \
	X(rx_bad_pkey, "P_Key does not match the port's partition")            \
	X(rx_unknown_qpn, "destination QPN is not a QP of this queue")         \
	X(rx_bad_qkey, "DETH Q_Key differs from the QP's Q_Key")               \
	X(rx_bad_length, "payload length negative or above the path MTU")      \
	X(rx_bad_icrc, "invariant CRC mismatch")                               \
	X(rx_chained_mbuf, "frame spans mbufs that cannot be linearized")

/* Send-side drop reasons: work requests refused or lost after acceptance. */
#define RDGRAM_TX_DROPS(X)                                                     \
	X(tx_stale_ah, "AH handle generation no longer live")                  \
	X(tx_too_long, "payload above the path MTU")                           \
	X(tx_bad_mbuf, "payload mbuf not sendable as given: chained where one segment is taken (soft, verbs, efa), short of head/tailroom (soft), outside every registered region") \
	X(tx_bad_qkey, "controlled Q_Key (high bit) from a non-privileged QP")

struct qp_counters {
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes;
	/* Not drops: times tx_burst stopped early (mempool empty, port full). */
	uint64_t tx_no_mbuf, tx_port_full;
	/* Not drops either: neighbour frames (ARP, ND) handed to the control
	 * thread, and its frames sent on this queue or refused by the port. */
	uint64_t rx_to_control, tx_control, tx_control_dropped;
#define X(name, desc) uint64_t name;
	RDGRAM_RX_DROPS(X)
	RDGRAM_TX_DROPS(X)
#undef X

	uint64_t rx_drops() const
	{
		return 0
#define X(name, desc) +name
			RDGRAM_RX_DROPS(X)
#undef X
			;
	}
	uint64_t tx_drops() const
	{
		return 0
#define X(name, desc) +name
			RDGRAM_TX_DROPS(X)
#undef X
			;
	}
	qp_counters &operator+=(const qp_counters &o)
	{
		rx_pkts += o.rx_pkts;
		rx_bytes += o.rx_bytes;
		tx_pkts += o.tx_pkts;
		tx_bytes += o.tx_bytes;
		tx_no_mbuf += o.tx_no_mbuf;
		tx_port_full += o.tx_port_full;
		rx_to_control += o.rx_to_control;
		tx_control += o.tx_control;
		tx_control_dropped += o.tx_control_dropped;
#define X(name, desc) name += o.name;
		RDGRAM_RX_DROPS(X)
		RDGRAM_TX_DROPS(X)
#undef X
		return *this;
	}

	/* Calls f(name, description, value) for every counter. */
	template <class F> void for_each(F &&f) const
	{
		f("rx_pkts", "packets delivered", rx_pkts);
		f("rx_bytes", "payload bytes delivered", rx_bytes);
		f("tx_pkts", "packets handed to the port", tx_pkts);
		f("tx_bytes", "payload bytes handed to the port", tx_bytes);
		f("tx_no_mbuf", "bursts cut short: mempool empty", tx_no_mbuf);
		f("tx_port_full", "bursts cut short: port queue full", tx_port_full);
		f("rx_to_control", "ARP/ND frames handed to the control thread", rx_to_control);
		f("tx_control", "control-thread frames (ARP/ND) sent", tx_control);
		f("tx_control_dropped", "control-thread frames the port refused (freed)", tx_control_dropped);
#define X(name, desc) f(#name, desc, name);
		RDGRAM_RX_DROPS(X)
		RDGRAM_TX_DROPS(X)
#undef X
	}
};

} // namespace rdgram

#endif
