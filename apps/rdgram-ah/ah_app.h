/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-ah settings: built-in defaults, then a TOML file (-c), then
 * command-line options, each overriding the last.
 */
#ifndef RDGRAM_AH_APP_H
#define RDGRAM_AH_APP_H

#include <cstdint>
#include <string>
#include <vector>

#include "app_config.h"
#include "rdgram/wire.h"
#include "soft_config_toml.h"

namespace rdgram::ahtool {

/* rdgram-ah's defaults of a port table: an AH table of 2^20. */
inline soft::port_config default_port()
{
	soft::port_config p;
	p.max_ah = 1u << 20;
	return p;
}

/* app_common: eal_args, capture, driver (only soft serves this tool),
 * workers (poll threads, each with its queue of both devices). */
struct ah_app_config : apps::app_common {
	bool ipv6 = false;            /* addresses: IPv6 (fd00::/16) instead of IPv4 */
	uint32_t capacity = 65536;    /* AH registry capacity */
	/* The local port: [port] or the first [[port]] (docs/PORTS.md). With
	 * devargs, the local device is that DPDK port and its peer whatever
	 * is on the other end; without, an in-process net_ring pair, the
	 * table's settings (mac, addresses, vlan, ecn, max_ah, neigh_*) its
	 * local end's, vlan and ecn the peer end's too. */
	soft::port_config port = default_port();
	/* On a DPDK port: the destinations (resolved by ARP/ND, or static
	 * neighbours of the table), and the QP inspect sends one datagram
	 * per AH to (rdgram-fwd reflects it back; rdgram-perf's server QP
	 * is 0x100 too). Its Q_Key is the local QP's, so that a reflected
	 * reply (sent with the reflector's own Q_Key) is received. */
	std::vector<wire::gid> to;
	uint32_t ping_qpn = 0x100;
	uint32_t ping_qkey = 0x11111111;
	double hold_s = 0;            /* keep running after the report (telemetry) */
	bool json = false;
	/* inspect */
	uint32_t dests = 4;           /* destinations known statically */
	uint32_t resolved = 2;        /* destinations resolved by ARP/ND via the peer */
	uint32_t flows = 1;           /* AHs per destination (distinct flow labels) */
	uint32_t release = 1;         /* AHs destroyed again: cached, refcount 0 */
	/* bench */
	uint32_t count = 10000;       /* AHs per bench phase */
	double lookup_s = 0.5;        /* seconds of dest_cache lookups */
	/* storm and bench */
	uint32_t batch = 4096;        /* AHs per create_ah_batch call */
	uint32_t storm_dests = 1024;  /* storm: distinct destination addresses */
	bool storm_resolve = false;   /* storm: destinations resolved by ARP/ND */
	double timeout_s = 30;        /* storm: give up waiting for readiness */
};

/* Applies a TOML file; throws config_error with file:line:column. */
void load_ah_config(const std::string &path, ah_app_config &cfg);

} // namespace rdgram::ahtool

#endif
