/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-verbs' configuration (rdgram-verbs(1), docs/VERBS.md): an optional
 * [eal] args, and one [[port]] per verbs device with the keys rdgram-fwd's
 * [[port]] has, but QPs (those come from the program):
 *
 *   name        the verbs device name (default rdg0, rdg1, ...)
 *   device      DPDK devargs (net_memif0,role=server,..., net_af_packet0,
 *               iface=..., a port given to the EAL with --vdev or -a)
 *   mac         the port's MAC (default: the port's own)
 *   addresses   the GID table after the link-local GID (IPv4 and IPv6)
 *   mtu, pkey, max_ah, resolve, neigh_*   soft_config_toml.h
 *   mbufs       the port's receive pool
 *   neighbours  static [{ ip, mac }]
 *
 * Read twice: by rdgram-verbs before it starts the program (errors:
 * "file:line:column: key ...", exit 2) and by the library in the program's
 * process. (NOT thread safe: cold path.)
 */
#ifndef RDGRAM_RV_CONFIG_H
#define RDGRAM_RV_CONFIG_H

#include <cstdint>
#include <string>
#include <vector>

#include <rte_ether.h>

#include "rdgram/wire.h"
#include "soft_params.h"

namespace rdgram::rv {

struct rv_neighbour {
	wire::gid ip;
	rte_ether_addr mac;
};

struct rv_port_config : soft::soft_port_params {
	std::string name;
	std::string device;
	bool set_mac = false;
	rte_ether_addr mac{};
	std::vector<wire::gid> addresses;
	std::vector<rv_neighbour> neighbours;
	uint32_t nb_mbufs = 8191;
};

struct rv_config {
	std::vector<std::string> eal_args; /* empty: the defaults (rv_eal.cc) */
	std::vector<rv_port_config> ports;
};

/* The environment variable rdgram-verbs sets to the config's path. */
inline constexpr const char *config_env = "RDGRAM_VERBS_CONFIG";

/* Reads path; throws config_error ("file:line:column: key ...: expected
 * ...") at the first bad or unknown key, and for a config without ports. */
rv_config load_config(const std::string &path);

} // namespace rdgram::rv

#endif
