/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The NIC of the mlx5 device kind: what a ConnectX-5 does with the queues
 * libmlx5 (or any other writer of mlx5 WQEs) builds in user memory. One
 * poll thread per kind=mlx5 port (rv_mlx5_nic.cc) reads each QP's send
 * queue up to the producer counter in its doorbell record, parses the
 * WQEs (control, datagram and data/inline segments, PRM "Send WQE
 * format"), sends them as RoCEv2 UD through the port's soft_queue, and
 * writes CQE64s into the CQ buffers; datagrams the soft_queue receives
 * for a QP go into its next receive WQE, the 40-byte GRH area first, with
 * a responder CQE.
 *
 * The emulated mlx5_ib (rv_mlx5_ib.cc) creates the objects and hands them
 * here; both are written from the uAPI (<rdma/mlx5-abi.h>), the public
 * <infiniband/mlx5dv.h> layouts and libmlx5 v44's reading of them, and
 * share nothing with drivers/mlx5.
 *
 * Threads: the tables below are changed by commands (any program thread)
 * under the device's dp lock, which the NIC's thread holds for each of
 * its rounds: an object removed under dp is never touched again.
 */
#ifndef RDGRAM_RV_MLX5_NIC_H
#define RDGRAM_RV_MLX5_NIC_H

#include <atomic>
#include <cstdint>
#include <thread>

#include <infiniband/verbs.h>

#include "rdgram/ud.h"

namespace rdgram::rv {

struct rv_device;
struct rv_channel;

namespace m5 {

/* Everything the NIC counts, by name (printed at exit with
 * RDGRAM_VERBS_STATS=1). Errors give an error CQE with the PRM's
 * syndrome and move the QP to ERR. */
#define RV_M5_COUNTERS(X)                                                                              \
	X(tx_wqes, "send WQEs executed")                                                               \
	X(rx_delivered, "datagrams written into receive WQEs")                                         \
	X(tx_lkey_err, "send data segment outside any MR of its lkey (LOCAL_PROT_ERR 0x04)")           \
	X(tx_len_err, "send longer than the port's MTU (LOCAL_LENGTH_ERR 0x01)")                       \
	X(tx_opcode_err, "send WQE with an opcode other than SEND/SEND_IMM/NOP (LOCAL_QP_OP_ERR 0x02)") \
	X(tx_ds_err, "send WQE whose DS count is 0, past the SQ, or inconsistent (LOCAL_QP_OP_ERR)")   \
	X(tx_compact_av, "compact (non-GRH) AV on the RoCE port (LOCAL_QP_OP_ERR)")                     \
	X(tx_av_unknown, "AV to a GID no create_ah of this device resolved: not sent (success CQE)")   \
	X(tx_av_retired, "WQE parses with the AV of a destroyed AH: sent, the WQE carries it (event)") \
	X(tx_no_mbuf, "send the soft queue dropped (counted there too)")                              \
	X(rx_no_qp, "datagram for a QPN the device does not have")                                     \
	X(rx_qp_not_ready, "datagram for a QP not in RTR/RTS")                                         \
	X(rx_no_wqe, "datagram while the QP had no receive WQE posted (UD drops it)")                  \
	X(rx_lkey_err, "receive scatter entry outside any MR of its lkey (LOCAL_PROT_ERR)")            \
	X(rx_len_err, "receive WQE shorter than GRH + payload (LOCAL_LENGTH_ERR)")                     \
	X(flushed, "WQEs completed with WR_FLUSH_ERR (syndrome 0x05) on a QP in ERR")                 \
	X(cq_overrun, "CQEs lost to a full CQ")                                                        \
	X(events, "completion events raised on armed CQs")

struct counters {
#define RV_M5_FIELD(n, d) uint64_t n = 0;
	RV_M5_COUNTERS(RV_M5_FIELD)
#undef RV_M5_FIELD
};

/* A CQ (mlx5_ib_create_cq): the buffer of ncqe CQEs of cqe_sz bytes (the
 * CQE64 in the last 64 of each), the doorbell record (SET_CI, ARM_DB). */
struct cq {
	uint32_t cqn;
	uint8_t *buf;
	uint32_t ncqe; /* a power of two */
	uint32_t log_ncqe;
	uint32_t cqe_sz; /* 64 or 128 */
	uint32_t *dbrec; /* big-endian words, the provider's */
	uint32_t pi = 0; /* CQEs written (the NIC's producer index) */
	rv_channel *chan; /* the completion channel, or null */
	ibv_cq *ibcq;     /* the provider's CQ, as events name it */
	uint32_t arm_seen; /* the ARM_DB word last seen */
	bool armed = false, sol_only = false;
	bool fire = false; /* an event is due at the end of this round */
	uint32_t events_reported = 0; /* under chan->mu */
};

/* A basic SRQ (mlx5_ib_create_srq): max WQEs of 1 << wqe_shift bytes,
 * each a next segment (struct mlx5_wqe_srq_next_seg: the index of the
 * WQE that follows in the free list the provider keeps) then data
 * segments; the doorbell record's one word counts the WQEs posted. The
 * NIC takes WQEs in the list's order: from WQE 0, each time the one the
 * WQE it took names as next (a posted WQE is never the provider's tail,
 * so its next does not change under the NIC). */
struct srq {
	uint32_t srqn;
	uint8_t *buf;
	uint32_t max, wqe_shift, max_gs;
	uint32_t limit = 0;
	uint32_t *db;
	uint16_t head = 0;     /* the next WQE the NIC takes */
	uint16_t consumed = 0; /* WQEs taken (the doorbell's counterpart) */
	uint32_t users = 0;    /* QPs receiving from it */
};

/* A UD QP (mlx5_ib_create_qp): one buffer with the RQ (rq_cnt WQEs of
 * 1 << rq_shift bytes) then the SQ (sq_cnt 64-byte WQEBBs); the doorbell
 * record (RCV, SND counters, 16 bits each). */
struct qp {
	uint32_t qpn, uidx;
	ibv_qp_state state = IBV_QPS_RESET;
	uint32_t qkey = 0, sq_psn = 0;
	uint16_t pkey_index = 0;
	uint8_t port = 1;
	uint8_t *rq, *sq;
	uint32_t rq_cnt, rq_shift, sq_cnt;
	uint32_t *db;
	cq *scq, *rcq;
	m5::srq *srq = nullptr; /* receives from it, not from an RQ */
	uint16_t sq_ci = 0, rq_ci = 0; /* the NIC's consumer counters */
	int sidx = -1; /* index in the soft queue's QP table */
	ibv_qp_cap cap{};
	bool sq_sig_all = false;
};

struct mr {
	uintptr_t lo, hi;
	uint32_t lkey;
	uint32_t pdn;
	int access;
};

/* A destination a create_ah of this device resolved: the soft AH that
 * carries frames to it. A ConnectX never looks an AH up: the WQE carries
 * the whole AV, and a program may destroy the AH while WQEs made from it
 * wait in the SQ (drivers/mlx5 and libmlx5 both copy the AV). So a
 * destroyed entry is retired, not freed: its soft AH stays until its slot
 * is needed again, and sends to its GID still go (docs/HARDWARE.md). */
struct av_entry {
	uint8_t rgid[16];
	uint8_t sgid_index;
	bool loop;    /* one of the port's own GIDs */
	bool retired; /* destroyed by the program; h still valid */
	uint32_t refs;
	ah_handle h;
};

/* The CQ doorbell record's two words (libmlx5's MLX5_CQ_SET_CI and
 * MLX5_CQ_ARM_DB, not in the public header). */
inline constexpr unsigned MLX5_CQ_SET_CI = 0;
inline constexpr unsigned MLX5_CQ_ARM_DB = 1;

inline constexpr unsigned max_cqs = 64;
inline constexpr unsigned max_qps = 8; /* the soft queue's */
inline constexpr unsigned max_mrs = 4096;
inline constexpr unsigned max_srqs = 16;
inline constexpr unsigned max_avs = 256;
inline constexpr unsigned max_uars = 32; /* contexts watched for CQ arm doorbells */

struct nic {
	rv_device *d;
	std::thread th;
	std::atomic<bool> stop{false};
	/* Tables (dp). Handles are indices; a QPN's low 3 bits are its slot,
	 * a CQN is its slot + 1, an lkey is slot << 8 | a tag (never 0x100,
	 * MLX5_INVALID_LKEY). */
	cq *cqs[max_cqs]{};
	qp *qps[max_qps]{};
	srq *srqs[max_srqs]{}; /* an SRQN is its slot + 1 */
	mr *mrs[max_mrs]{};
	av_entry avs[max_avs]{};
	/* The UAR pages' CQ doorbell words (offset MLX5_CQ_DOORBELL) of
	 * every context, and the last value seen in each. */
	const uint64_t *uar_db[max_uars]{};
	uint64_t uar_seen[max_uars]{};
	uint32_t qpn_serial = 1, mr_serial = 1;
	counters ctr;
	uint64_t ctl_seen = 0;
	/* Gathered payloads of one burst (multi-segment, wrapped inline). */
	uint8_t gather[32][4096];
};

/* Starts d's NIC thread (provider_attach); stops and joins it (before
 * the port closes). */
int start(rv_device &d);
void stop(rv_device &d);
void print_counters(const rv_device &d);

/* The value written into a new CQ's ARM_DB word, which no arm doorbell
 * equals (the sequence number's bits 31:30 and the reserved 27:25 set). */
inline constexpr uint32_t arm_poison = 0xffffffffu;

/* One NIC round on the calling thread, when no other thread is doing
 * one (ibv_poll_cq of an empty CQ: run to completion, as the soft kind).
 * true when a round ran. (Any thread.) */
bool assist(rv_device &d);

/* Completes every posted WQE of q with WR_FLUSH_ERR (a QP moved to ERR);
 * (dp held). */
void flush(nic &n, qp &q);

} // namespace m5
} // namespace rdgram::rv

#endif
