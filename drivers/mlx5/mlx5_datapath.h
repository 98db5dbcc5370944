/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/mlx5 data path: UD sends written straight into the SQ ring and
 * CQE64s parsed straight from the CQ rings (mlx5 direct verbs). This header
 * gathers the files that hold it, each one thing, as DPDK's
 * drivers/net/mlx5 does:
 *   mlx5_queue.h       the queue's state: hot mlx5_txq_data / mlx5_rxq_data
 *                      inside the cold mlx5_queue, counters, settings
 *   mlx5_tx.h          tx_burst and the routines it dispatches to
 *   mlx5_tx_writers.h  the run writers (AVX-512, AVX2, portable)
 *   mlx5_completion.h  both CQs and the RQ's refill
 *   mlx5_queue.cc      attach and detach (set-up, out of line)
 * Everything a poll thread runs per packet is inline in the headers.
 *
 * Send (one WQE per datagram, rdma-core providers/mlx5/qp.c
 * _mlx5_post_send for IBV_QPT_UD is the reference):
 *   ctrl seg (16)  opcode SEND / SEND_IMM, WQE index, QPN, DS count,
 *                  fm_ce_se (CQ_UPDATE one in N, SOLICITED), immediate
 *   datagram (48)  the AH's AV from the NUMA-local AH table replica, with
 *                  key.qkey and dqp_dct = remote QPN | MLX5_EXTENDED_UD_AV;
 *                  or the compact 16-byte AV (no extended bit) for an AH
 *                  without a GRH when the device supports it
 *   inline (4+n)   byte_count = n | MLX5_INLINE_SEG, data, zero pad to 16
 *   or data (16)   byte_count, lkey of the mempool's memory region, address;
 *                  one per non-empty segment of a chained mbuf (16 each,
 *                  as rdma-core writes one per non-empty SGE), at most
 *                  the QP's max_send_sge
 * in 64-byte basic blocks of a power-of-two ring; a WQE that runs past the
 * ring's end continues at its start. The first block (ctrl + extended AV,
 * or ctrl + compact AV) is prebuilt once per destination and burst (the
 * WQE head: AH handle, remote QPN, Q_Key) and copied whole; the WQE index,
 * DS, fm_ce_se and imm are stored over it. A run of WRs after it that
 * differ only in payload (plain inline SENDs of one length to the same
 * head) is written by one loop that checks signalling, room and the ring's
 * end once for the run and stores little but the WQE index and the payload
 * (inline_run; with AVX-512BW, or AVX2 for whole 4-byte words, in whole
 * aligned blocks: the writer is chosen from the CPU at attach, cpu_isa.h,
 * so a generic build runs them where the CPU has them). Each WQE's
 * stores are preceded by a prefetchw of the next WQE's blocks
 * (prefetch_next). Per burst one doorbell: the doorbell
 * record, then a BlueFlame copy of the burst's last WQE when it fits the
 * BlueFlame buffer (otherwise its first 8 bytes as the doorbell), with the
 * barriers of mlx5_ring.h. rdma-core uses BlueFlame only for one-WQE posts;
 * for a burst the copied WQE is its last one, whose index covers the rest,
 * as DPDK's mlx5 PMD rings with the last WQE of a burst.
 *
 * TX completions: one WQE in signal_every (and optionally the last of each
 * burst) asks for a CQE; a requester CQE's wqe_counter covers every WQE up
 * to it, whose mbufs go back to their pool.
 *
 * Receive: a cyclic RQ of one data segment per WQE, refilled in batches
 * with one doorbell-record update; responder CQE64s decoded by parse_cqe
 * (mlx5_ring.h) into recv_wc with verbs' layout (40-byte GRH area, then
 * the payload). A byte count the CQE reports beyond the posted buffer is
 * never trusted: the buffer is dropped and counted.
 */
#ifndef RDGRAM_MLX5_DATAPATH_H
#define RDGRAM_MLX5_DATAPATH_H

#include "mlx5_completion.h"
#include "mlx5_queue.h"
#include "mlx5_tx.h"
#include "rdgram/ud.h"

namespace rdgram::mlx5 {

static_assert(ud_driver<mlx5_queue>);

} // namespace rdgram::mlx5

#endif
