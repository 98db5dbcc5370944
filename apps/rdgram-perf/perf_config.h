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
#include "rdma_config.h"
#include "soft_params.h"

namespace rdgram::perf {

struct endpoint_config {
	std::string vdev;          /* DPDK devargs; "" in loopback: a net_ring pair */
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

/* [port]: mtu, pkey, max_ah (every driver's) and the soft driver's
 * neighbour resolution, as soft_port_params (soft_config_toml.h reads
 * them; the peer's MAC is always a static neighbour, these govern
 * everything else). */
struct perf_config : soft::soft_port_params {
	std::string driver = "soft";   /* soft | verbs | mlx5 | efa (apps/common/driver.h) */
	/* Poll threads a side, each with its own queue and QP (--workers). */
	uint32_t workers = 1;
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
	std::vector<std::string> eal_args; /* used when none on the command line */
	std::string capture = "auto";     /* [eal] capture: auto | on | off (runtime.h capture_mode) */
	/* txonly: prepared destinations the client cycles through (distinct
	 * GIDs, each a static neighbour with its own AH), and in which order:
	 * "rr" (round robin) or "random" (a permutation made before the loop). */
	uint32_t dests = 0; /* 0: the peer's AH only, not cycled */
	std::string dest_order = "rr";
	endpoint_config server, client;
	rdma_config rdma;

	perf_config();
};

/* Applies a TOML file; throws config_error with file:line:column. */
void load_perf_config(const std::string &path, perf_config &cfg);

} // namespace rdgram::perf

#endif
