/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * What a caller asks of one data-path queue, the same struct for every
 * driver (DPDK's rte_eth_rx/tx_queue_setup take one set of arguments for
 * every PMD). Each device's
 *
 *     int create_queue(const queue_params &p, queue_type &q);
 *
 * reads it (device.h: the queue contract). Zero means "the driver's
 * default" for every size and for qkey; a field a driver cannot honour is
 * refused with EINVAL and error() names the field and why, never ignored.
 * Knobs only one driver has (EFA's SRD and RNR retry, mlx5's signal_last,
 * BlueFlame, compact AV, max_send_sge, SIMD cap) live in that device's
 * config as the defaults of all its queues.
 */
#ifndef RDGRAM_QUEUE_PARAMS_H
#define RDGRAM_QUEUE_PARAMS_H

#include <cstdint>

#include <rte_memory.h>

namespace rdgram {

struct queue_params {
	/* soft: the port's RX/TX queue pair (< soft_config::nb_queues), one
	 * live queue each. Hardware: a label only; every create_queue makes
	 * a QP of its own. */
	uint16_t index = 0;
	/* NUMA node of the poll thread that will own the queue: the AV
	 * replica it reads (SOCKET_ID_ANY: the device's first replica). */
	int socket = SOCKET_ID_ANY;
	uint32_t qkey = 0;         /* the QP's Q_Key; 0: the device config's */
	uint32_t sq_depth = 0;     /* send WRs in flight; 0: the driver's default */
	uint32_t rq_depth = 0;     /* receive WRs posted; 0: the driver's default */
	uint32_t max_inline = 0;   /* inline payload bytes requested; 0: the driver's default */
	uint32_t signal_every = 0; /* one signalled send in N; 0: the driver's default */
	uint32_t recv_batch = 0;   /* receive buffers per post; 0: the driver's default */
};

} // namespace rdgram

#endif
