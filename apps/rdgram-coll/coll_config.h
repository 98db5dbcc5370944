/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll settings: built-in defaults, then a TOML file (-c), then
 * command-line options, each overriding the last.
 */
#ifndef RDGRAM_COLL_CONFIG_H
#define RDGRAM_COLL_CONFIG_H

#include <cstdint>
#include <string>
#include <vector>

#include <rte_config.h>

#include "app_config.h"
#include "rdma_config.h"
#include "soft_config_toml.h"

namespace rdgram::coll {

/* app_common: eal_args, capture, driver ([job]), workers ([poll]: poll
 * threads; threads mode: ranks spread over them). */
struct coll_config : apps::app_common {
	std::string mode = "threads";   /* threads | procs */
	uint32_t ranks = 8;             /* job size (procs: unless a launcher says) */
	int32_t rank = -1;              /* procs: this process's rank (-1: launcher) */
	std::string bootstrap = "auto"; /* procs: auto | pmix | tcp (job_bootstrap.h) */
	std::string job;                /* procs: the job's name in every endpoint record ("": PMIx namespace) */
	std::string rendezvous = "127.0.0.1:18515"; /* procs: rank 0's TCP address */
	uint32_t iters = 100;           /* iterations of each collective */
	uint32_t size = 64;             /* bytes per block (allgather, alltoall) */
	uint32_t rto_us = 200;          /* retransmission timeout */
	double drop_rate = 0;           /* fraction of received datagrams dropped */
	uint64_t seed = 1;              /* drop pattern */
	double timeout_s = 30;          /* every phase's deadline */
	uint32_t qkey = 0x11110000;     /* Q_Key of every rank's QP */
	/* soft: [port] (soft_config_toml.h, docs/PORTS.md), every rank's:
	 * procs, its devargs are this rank's DPDK port ("{rank}": the rank),
	 * its addresses and mac the rank's own when given (else from the
	 * rank); threads, its settings only (each rank gets a net_ring).
	 * The path MTU 2048 unless it says. */
	soft::port_config port = [] {
		soft::port_config p;
		p.mtu = 2048;
		return p;
	}();
	std::string idle = "busy";      /* the poll lcore when idle: busy | yield | sleep (poll_idle.h) */
	uint32_t idle_spins = 64;       /* empty polls in a row before yielding or sleeping */
	uint32_t idle_sleep_us = 100;   /* sleep: the longest nap */
	std::string json;               /* write the results as JSON here ("-": stdout); empty: no */
	/* verbs, mlx5, efa ([rdma], apps/common/rdma_config.h): the RDMA
	 * device, its port and the source GID index of every AH (-1: the
	 * port's first IPv4 RoCE v2 GID, else its first GID; RoCEv2: the
	 * port's RoCE v2 GID of its IPv4 address, which is also the rank's
	 * address). */
	apps::rdma_device_config rdma;
};

inline constexpr uint32_t max_procs_ranks = 64;
/* Threads mode: one net_ring port per rank, so DPDK's RTE_MAX_ETHPORTS
 * (32 in Debian's build) bounds it; each rank's AH service is one of the
 * control thread's 128 pollers. */
inline constexpr uint32_t max_threads_ranks = RTE_MAX_ETHPORTS < max_procs_ranks ? RTE_MAX_ETHPORTS : max_procs_ranks;
inline constexpr uint32_t max_size = 1024;

/* Applies a TOML file; throws config_error with file:line:column. */
void load_coll_config(const std::string &path, coll_config &cfg);

} // namespace rdgram::coll

#endif
