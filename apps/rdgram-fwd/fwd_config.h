/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd settings: built-in defaults, then a TOML file (--config), then
 * command-line options, each overriding the last. See config/rdgram-fwd.toml
 * for every key.
 */
#ifndef RDGRAM_FWD_CONFIG_H
#define RDGRAM_FWD_CONFIG_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <rte_ether.h>

#include "rdgram/wire.h"
#include "app_config.h"
#include "rdma_config.h"
#include "soft_config_toml.h"

namespace rdgram::fwd {

struct qp_config {
	uint32_t qpn;
	uint32_t qkey;
	/* The worker (= the port's queue) that owns it; -1: QP k of the port
	 * goes to worker k mod workers. */
	int worker = -1;
};

/* One [[port]]: the port table every app reads (soft_config_toml.h,
 * docs/PORTS.md) and rdgram-fwd's own key, its QPs. */
struct port_config : soft::port_config {
	std::vector<qp_config> qps;
};

/* A destination of forwarded traffic. */
struct peer_config {
	std::string name;
	wire::gid ip{};
	std::optional<rte_ether_addr> mac; /* static neighbour; else ARP/ND */
	uint32_t qpn = 0;
	std::optional<uint32_t> qkey; /* unset: keep the packet's Q_Key */
	std::string port;             /* egress port name; "" = the first */
	uint8_t hop_limit = 64;
	uint8_t traffic_class = 0;
};

/* Forwarding rule: first match wins. */
struct rule_config {
	std::optional<uint32_t> match_qpn;  /* destination QPN (a local QP) */
	std::optional<uint32_t> match_qkey; /* the packet's Q_Key */
	std::string to;                     /* peer name */
	std::optional<uint32_t> rewrite_qkey;
};

/* The RDMA device of the verbs, mlx5 and efa drivers: [rdma]'s device,
 * port and gid_index (apps/common/rdma_config.h: the sgid_index of the
 * peers' AHs in forward mode, 0 when not given), and the Q_Key. Each
 * worker gets one UD QP of its own on it (the device numbers it). */
struct rdma_config : apps::rdma_device_config {
	uint32_t qkey = 0x11111111;
};

/* app_common: the driver, named once (soft: the [[port]]s; the others:
 * [rdma]), and the poll threads (workers: each owns queue i of every port
 * (soft: the port opens `workers` queues) and its share of the QPs),
 * eal_args, capture. */
struct fwd_config : apps::app_common {
	rdma_config rdma;
	std::string mode = "reflect"; /* reflect | forward */
	double duration_s = 0;        /* 0: until a signal */
	uint64_t max_packets = 0;     /* 0: no limit */
	double idle_exit_s = 0;       /* 0: never */
	double stats_interval_s = 0;  /* 0: only on exit and SIGUSR1 */
	std::string stats_json;       /* "" : none */
	/* The reply path's pending queue (ah_client_config). */
	uint32_t pending_dests = 1024;
	uint32_t pending_per_dest = 1024;
	uint32_t pending_total = 16384;
	uint32_t pending_timeout_ms = 1000;
	std::vector<port_config> ports;
	std::vector<peer_config> peers;
	std::vector<rule_config> rules;
};

/* Applies a TOML file; throws config_error with file:line:column. */
void load_fwd_config(const std::string &path, fwd_config &cfg);
/* Cross-checks that need the whole config (after CLI overrides); throws
 * config_error. */
void check_fwd_config(const fwd_config &cfg);
/* The worker that owns QP k of port p: its `worker` key, else k mod
 * workers. */
unsigned qp_worker(const port_config &p, size_t k, unsigned workers);

} // namespace rdgram::fwd

#endif
