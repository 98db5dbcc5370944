/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * What a user sets of a soft-driver port, apart from which port and its
 * addresses: the part of soft_config an app's config file carries (the
 * [port] keys of soft_config_toml.h), so that an app's own config can hold
 * it and hand it to soft_config whole.
 */
#ifndef RDGRAM_SOFT_PARAMS_H
#define RDGRAM_SOFT_PARAMS_H

#include <cstdint>

namespace rdgram::soft {

/* How a datagram reaches the queue of its QP when the port has several
 * (soft_steer.h): "auto" asks the port for one rte_flow rule per address
 * (IPv4/IPv6 destination -> queue: address i goes to queue i % nb_queues)
 * and hands off in software what still lands on the wrong queue; "software"
 * takes the port's own spread and hands off; "flow" is "auto" that fails to
 * open when the port refuses a rule. */
enum class steer_mode : uint8_t { automatic, software, flow };

struct soft_port_params {
	uint16_t pkey = 0xffff;
	uint32_t mtu = 4096;            /* path MTU: 256..4096 (IB MTU enum sizes) */
	uint32_t max_ah = 65536;        /* the "device" AH table size */
	/* Neighbour resolution (ARP/ND, control thread). */
	bool resolve = true;            /* dynamic ARP/ND; false: static only */
	uint32_t neigh_ttl_ms = 30000;  /* reachable lifetime before re-resolution */
	uint32_t neigh_retry_ms = 100;  /* retransmit interval */
	uint32_t neigh_retries = 3;     /* requests before giving up */
	uint32_t neigh_fail_hold_ms = 1000; /* a failure is remembered this long */
	steer_mode steer = steer_mode::automatic; /* nb_queues > 1 only */
	/* 802.1Q: 0, untagged; 1..4094, every frame of the port (datagrams,
	 * ARP, ND, IGMP, MLD) carries this VLAN ID, with the AH's SL (0..7) as
	 * its PCP (control frames: PCP 0), and only frames of this VLAN are
	 * received (soft_rx.h). */
	uint16_t vlan = 0;
	/* Datagrams whose AH traffic class has no ECN bits go out ECT(0), as a
	 * RoCE NIC with ECN enabled sends them (DCQCN). */
	bool ecn = false;
};

} // namespace rdgram::soft

#endif
