/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The mlx5 driver's counters beyond the generic ones (rdgram/stats.h for
 * the kinds and the rule): each error CQE and malformed completion has its
 * drop reason; doorbells and CQEs are events.
 */
#ifndef RDGRAM_MLX5_COUNTERS_H
#define RDGRAM_MLX5_COUNTERS_H

#include "rdgram/stats.h"

namespace rdgram::mlx5 {

/* X(name, kind, description). */
#define RDGRAM_MLX5_COUNTERS(X)                                                                    \
	X(tx_inline_too_long, drop, "inline send longer than the QP's max_inline_data")             \
	X(tx_too_many_segs, drop, "chained mbuf of more segments than the QP's max_send_sge")       \
	X(tx_cqe_err, drop, "requester error CQE (MLX5_CQE_REQ_ERR); its WQEs' mbufs freed")        \
	X(rx_cqe_err, drop, "responder error CQE (MLX5_CQE_RESP_ERR); buffer back to its pool")     \
	X(rx_cqe_bad_len, drop, "CQE byte_cnt beyond the posted buffer or under the GRH area")      \
	X(rx_cqe_scatter, drop, "responder CQE with data scattered to the CQE (not enabled)")       \
	X(rx_cqe_unexpected, drop, "CQE of an opcode or format this queue never asks for")          \
	X(rx_cqe_no_wqe, drop, "responder CQE with no receive WQE outstanding")                     \
	X(tx_cqe_stray, drop, "requester CQE whose WQE index is not outstanding")                   \
	X(doorbells, event, "SQ doorbells rung (one per burst)")                                    \
	X(bf_copies, event, "SQ doorbells that were BlueFlame copies")                              \
	X(tx_cqes, event, "requester CQEs (MLX5_CQE_REQ)")                                          \
	X(rq_doorbells, event, "RQ doorbell-record updates (refill batches)")                       \
	X(rq_no_mbuf, event, "RQ refills cut short: mempool empty")                                 \
	X(rx_wqe_mismatch, event, "responder CQE wqe_counter differs from the RQ tail")             \
	X(rx_grh_unparsed, event, "GRH area of unknown layout: GIDs left zero")

struct mlx5_counters : qp_counters {
	RDGRAM_COUNTER_SET(mlx5_counters, "mlx5", RDGRAM_MLX5_COUNTERS)
};

} // namespace rdgram::mlx5

#endif
