/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf settings: built-in defaults (the in-process loopback), then a
 * TOML file (-c), then command-line options, each overriding the last.
 */
#ifndef RDGRAM_PERF_CONFIG_H
#define RDGRAM_PERF_CONFIG_H

#include <cstdint>
#include <string>
#include <vector>

#include <rte_ether.h>

#include "rdgram/wire.h"
#include "app_config.h"
#include "rdma_config.h"
#include "soft_config_toml.h"

namespace rdgram::perf {

struct endpoint_config {
	rte_ether_addr mac{};
	wire::gid address{};
	uint32_t qpn = 0;
	uint32_t qkey = 0x11111111;
	std::string lcores;        /* EAL -l for this role when no EAL args given */
	uint16_t lid = 0;          /* verbs/mlx5 on InfiniBand: the peer's LID (AH dlid) */
};

/* verbs / mlx5 / EFA drivers: [rdma]'s device, port and the source GID
 * index of the AH to the peer (apps/common/rdma_config.h: not given, 0;
 * given, the peer is addressed by GID on InfiniBand too), and the
 * exchange with the peer. */
struct rdma_config : apps::rdma_device_config {
	/* "host:port" of a TCP exchange of QPN, GID, LID and Q_Key before the
	 * test, as perftest does (the server listens there, the client
	 * connects); empty: [server] of the config says where the server is. */
	std::string oob;
	/* What is spoken there: "rdgram" (rdgram-perf's own rendezvous,
	 * peer/perf_oob.h, with rdgram-perf's own tests), "perftest" (perftest
	 * 6.06's exchange and data phase: the peer is ib_send_lat or
	 * ib_send_bw -c UD) or "ud_pingpong" (ibv_ud_pingpong's). peer/perf_peer.h. */
	std::string oob_proto = "rdgram";
};

/* The side's port (select_port): its mtu, pkey, max_ah (every driver's)
 * and the soft driver's neighbour resolution, as soft_port_params (the
 * peer's MAC is always a static neighbour, these govern everything
 * else). */
struct perf_config : soft::soft_port_params, apps::app_common {
	/* (app_common: driver, workers (poll threads a side, each with its
	 * own queue and QP), eal_args, capture.) */
	std::string test = "both";     /* lat | bw | both */
	std::string mode = "loopback"; /* loopback | server | client */
	uint32_t size = 64;
	uint64_t lat_iters = 10000;
	uint64_t bw_iters = 1000000;
	uint64_t warmup = 1000;
	uint32_t inline_size = 236;
	uint32_t tx_depth = 128;
	uint32_t cq_mod = 64;
	double timeout_s = 60;
	/* The control thread's idle nap ceiling (control_thread::set_max_nap). */
	uint32_t ctl_max_nap_us = 2000;
	bool json = false;
	bool use_imm = false;
	/* txonly: prepared destinations the client cycles through (distinct
	 * GIDs, each a static neighbour with its own AH), and in which order:
	 * "rr" (round robin) or "random" (a permutation made before the loop). */
	uint32_t dests = 0; /* 0: the peer's AH only, not cycled */
	std::string dest_order = "rr";
	endpoint_config server, client;
	/* The port tables ([port] or [[port]], soft_config_toml.h), and the
	 * one this side runs on (select_port): the [[port]] named after the
	 * side ("server", "client"), else the first; loopback takes its
	 * settings, not its devargs (it makes a net_ring pair). */
	std::vector<soft::port_config> ports;
	soft::port_config port;
	rdma_config rdma;

	perf_config();
};

/* Applies a TOML file; throws config_error with file:line:column. */
void load_perf_config(const std::string &path, perf_config &cfg);
/* Once the mode is known (after the command line): c.port is the side's
 * port table, c's soft_port_params its settings, and the side's own MAC
 * and address those of the table when it gives them (the address of the
 * peer's family). Throws config_error when the table's addresses have
 * none of that family. */
void select_port(perf_config &c);

} // namespace rdgram::perf

#endif
