/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The port table of every app's TOML config, [port] or [[port]], read the
 * same way by every app and by rdgram's libibverbs (rdgram/config.h's
 * table_reader; errors "file:line:column: key 'port[0].mtu': expected
 * ..."), docs/PORTS.md:
 *
 *   name                the port's name (port0, port1, ...: an app may
 *                       give another default); letters, digits, '_', '-',
 *                       '.', 1 to 63 characters, not used twice
 *   devargs             the DPDK device: a port given to the EAL (--vdev,
 *                       -a) by name, or devargs probed at start
 *                       ("net_memif0,role=server,socket=...")
 *   mac                 the port's MAC (absent: the port's own)
 *   addresses           the GID table: unicast IPv4 and IPv6 addresses
 *   neighbours          static [{ ip, mac }], never expire; ip of a family
 *                       the port has an address of
 *   mbufs               the port's receive pool: 1023 to 2^22
 *   queues              RX/TX queue pairs: 1 to 64 (absent: the app's,
 *                       one per poll thread)
 *   mtu                 256, 512, 1024, 2048 or 4096 (the IB MTU sizes)
 *   pkey                1 to 0xffff
 *   max_ah              1 to 2^24
 *   resolve             true or false
 *   neigh_ttl_ms        1 to 86400000
 *   neigh_retry_ms      1 to 60000
 *   neigh_retries       1 to 100
 *   neigh_fail_hold_ms  0 to 86400000
 *   steer               "auto", "software" or "flow" (soft_params.h)
 *   vlan                1 to 4094 (802.1Q VLAN ID; absent: untagged)
 *   ecn                 true or false (ECT(0) on datagrams without ECN bits)
 *   kind                rdgram-verbs only (verbs_port_rules): "soft" (the
 *                       default) or "mlx5", the verbs device the port is
 *                       (docs/VERBS.md)
 *
 * Cold path: config loading, before the EAL starts. (NOT thread safe)
 */
#ifndef RDGRAM_SOFT_CONFIG_TOML_H
#define RDGRAM_SOFT_CONFIG_TOML_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <rte_ether.h>

#include "rdgram/wire.h"
#include "soft_neigh.h"
#include "soft_params.h"

namespace rdgram {
class table_reader;
}

namespace rdgram::soft {

/* One [port] / [[port]] table. */
struct port_config : soft_port_params {
	std::string name;
	std::string devargs;
	bool set_mac = false;
	rte_ether_addr mac{};
	std::vector<wire::gid> addresses;
	std::vector<neighbour> neighbours;
	uint32_t nb_mbufs = 8191;
	uint16_t queues = 0; /* 0: the app's choice */
	/* rdgram-verbs' device kind ("soft" or "mlx5"); other apps refuse
	 * the key. */
	std::string kind = "soft";
	/* "file:line:column" of the table, for errors an app finds later
	 * (need_devargs below). */
	std::string where;
};

/* What an app asks of its port tables (load_ports). */
struct port_rules {
	/* Default names: prefix + index ("port0"; rdgram-verbs: "rdg0"). */
	std::string name_prefix = "port";
	/* devargs must be given (false: an app whose mode makes its own
	 * ports; need_devargs checks it once the mode is known). */
	bool devargs_required = true;
	bool addresses_required = false;
	/* The settings of a table that does not give them (rdgram-coll:
	 * mtu 2048). */
	soft_port_params defaults{};
	/* Reads an app's own keys of table i (rdgram-fwd's qps) before the
	 * table is finished; may be empty. */
	std::function<void(table_reader &, port_config &, size_t i)> extra;
};

/* Reads root's [port] table or [[port]] array into the returned list
 * (empty when root has neither). Every table is checked whole: unknown
 * keys, keys that were renamed ("unknown key 'port[0].vdev': the port's
 * DPDK device is 'devargs'"), a missing devargs or addresses (rules), a
 * name used twice. Throws config_error at the first fault. */
std::vector<port_config> load_ports(table_reader &root, const port_rules &rules);

/* The rules of a port that is one of rdgram's libibverbs devices: named
 * rdg0, rdg1, ... by default (the verbs device name), devargs and
 * addresses required, and the key kind. */
port_rules verbs_port_rules();

/* A file of [eal] args and port tables only: the file rdgram-verbs is
 * given and its libibverbs reads (docs/VERBS.md). Throws config_error
 * also when the file has no port table. */
struct port_file {
	std::vector<std::string> eal_args; /* empty: the reader's defaults */
	std::vector<port_config> ports;
};
port_file load_port_file(const std::string &path, const port_rules &rules);

/* For an app that found, after loading (its mode set on the command
 * line), that it needs p's devargs: "" when p has them, else the error
 * "file:line:column: key 'port.devargs': expected ..." (or "no [port]
 * table ..." when p came from no table). */
std::string need_devargs(const port_config &p);

/* Reads the keys above that t has into p (absent keys keep p's values).
 * Marks them read and leaves finish() to the caller. load_ports reads
 * these with the rest of the table.
 * Throws config_error at the first bad key. */
void load_soft_port(table_reader &t, soft_port_params &p);

/* One integer key of the list above, under its own name in a table of an
 * app's own (rdgram-coll's [job] mtu, rdgram-ah's [ah] max_ah): def when
 * absent, else its value with the same range and error text as
 * load_soft_port's. name must be one of the integer keys above
 * (std::invalid_argument otherwise). */
uint32_t get_soft_key(table_reader &t, const char *name, uint32_t def);

} // namespace rdgram::soft

#endif
