/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/mlx5: the raw queue memory the data path works on, the barriers
 * it uses between that memory and the device, and the CQE64 parser.
 *
 * mlx5_rings is exactly what mlx5dv_init_obj(3) hands out for a UD QP and
 * its two CQs (struct mlx5dv_qp: dbrec, sq, rq, bf; struct mlx5dv_cq: buf,
 * dbrec, cqe_cnt, cqe_size, cq_uar, cqn) in a plain struct, so that the data
 * path in mlx5_datapath.h runs unchanged on rings a device model allocates
 * (tests/model/mlx5_model.h) and on rings a ConnectX maps.
 *
 * Layouts are mlx5dv.h's (rdma-core 44): struct mlx5_wqe_ctrl_seg,
 * mlx5_wqe_datagram_seg (the 48-byte mlx5_wqe_av), mlx5_wqe_inline_seg,
 * mlx5_wqe_data_seg, mlx5_cqe64 and mlx5_err_cqe. Nothing here redefines
 * them; the static asserts below pin the offsets the code relies on.
 */
#ifndef RDGRAM_MLX5_RING_H
#define RDGRAM_MLX5_RING_H

#include <endian.h>

#include <cstddef>
#include <cstdint>

#include <infiniband/mlx5dv.h>

namespace rdgram::mlx5 {

static_assert(sizeof(mlx5_wqe_ctrl_seg) == 16);
static_assert(sizeof(mlx5_wqe_av) == 48);
static_assert(sizeof(mlx5_wqe_datagram_seg) == 48);
static_assert(sizeof(mlx5_wqe_data_seg) == 16);
static_assert(sizeof(mlx5_cqe64) == 64);
static_assert(sizeof(mlx5_err_cqe) == 64);
static_assert(offsetof(mlx5_cqe64, byte_cnt) == 44);
static_assert(offsetof(mlx5_cqe64, slid) == 22);
static_assert(offsetof(mlx5_cqe64, flags_rqpn) == 24);
static_assert(offsetof(mlx5_cqe64, wqe_counter) == 60);
static_assert(offsetof(mlx5_cqe64, op_own) == 63);
static_assert(offsetof(mlx5_err_cqe, syndrome) == 55);
static_assert(offsetof(mlx5_err_cqe, wqe_counter) == 60);

/* WQE basic block (MLX5_SEND_WQE_BB) and the 16-byte unit DS counts in. */
inline constexpr uint32_t wqe_bb = MLX5_SEND_WQE_BB;
inline constexpr uint32_t ds_unit = 16;
/* The compact AV: the first 16 bytes of mlx5_wqe_av (key, dqp_dct,
 * stat_rate_sl, fl_mlid, rlid), sent without MLX5_EXTENDED_UD_AV in
 * dqp_dct (UCX ud_mlx5's base AV). Only for an AH without a GRH, on a
 * device that reports support. */
inline constexpr uint32_t compact_av_len = 16;
/* The inline segment's header: byte_count | MLX5_INLINE_SEG (rdma-core's
 * struct mlx5_wqe_inline_seg, not in mlx5dv.h). */
inline constexpr uint32_t inline_hdr_len = 4;
/* CQ doorbell record words (rdma-core providers/mlx5/mlx5.h: MLX5_CQ_SET_CI,
 * MLX5_CQ_ARM_DB; not in mlx5dv.h): the consumer index, 24 bits. */
enum : unsigned { cq_set_ci = 0, cq_arm_db = 1 };
inline constexpr uint32_t cq_ci_mask = 0xffffff;
/* Verbs reserves the first 40 bytes of every UD receive buffer for the GRH
 * (ibv_post_recv(3), ibv_poll_cq(3): byte_len includes them). */
inline constexpr uint32_t grh_len = 40;
/* flags_rqpn (mlx5 PRM, CQE format): source QP in 23:0; on RoCE the L3
 * header type in 25:24 (kernel MLX5_CQE_ROCE_L3_HEADER_TYPE_*), on IB the
 * SL in 27:24; the GRH-present indication in 29:28. */
inline constexpr uint32_t cqe_src_qp_mask = 0xffffff;
enum : uint8_t { roce_l3_grh = 0, roce_l3_ipv6 = 1, roce_l3_ipv4 = 2 };
/* op_own bits 3:2 (mlx5dv_get_cqe_format): 0 = data in the buffer; 1 and
 * 2 = data scattered into the CQE (MLX5_INLINE_SCATTER_32/64); 3 = a
 * compressed mini-CQE array. rdgram enables neither on its CQs. */
inline constexpr uint8_t cqe_format_compressed = 3;

/* One CQ as mlx5dv_cq describes it. */
struct cq_ring {
	uint8_t *buf = nullptr;        /* cqe_cnt * cqe_size bytes */
	uint32_t cqe_cnt = 0;          /* power of two */
	uint32_t cqe_size = 64;        /* rdgram creates 64-byte CQEs only */
	volatile uint32_t *dbrec = nullptr; /* [MLX5_CQ_SET_CI], [MLX5_CQ_ARM_DB] (big endian) */
	void *uar = nullptr;           /* CQ arm doorbell: unused, poll mode */
	uint32_t cqn = 0;
};

/* A UD QP's rings and doorbells as mlx5dv_qp describes them, plus its CQs. */
struct rings {
	/* Send queue: wqe_cnt basic blocks of stride 64. */
	uint8_t *sq_buf = nullptr;
	uint32_t sq_wqe_cnt = 0;       /* power of two */
	uint32_t sq_stride = wqe_bb;
	/* Receive queue: a cyclic array of mlx5_wqe_data_seg lists. */
	uint8_t *rq_buf = nullptr;
	uint32_t rq_wqe_cnt = 0;       /* power of two */
	uint32_t rq_stride = 16;       /* 16 per scatter entry (max_recv_sge) */
	/* Doorbell record: [MLX5_RCV_DBR] RQ head, [MLX5_SND_DBR] SQ head,
	 * both 16-bit counters stored big endian in 32 bits. */
	volatile uint32_t *dbrec = nullptr;
	/* BlueFlame register (write-combining MMIO): two halves of bf_size
	 * bytes, used alternately; bf_size 0: 8-byte doorbell writes only. */
	uint8_t *bf_reg = nullptr;
	uint32_t bf_size = 0;
	uint32_t qpn = 0;
	cq_ring scq; /* requester completions */
	cq_ring rcq; /* responder completions */
};

/*
 * Barriers between the CPU, the rings in host memory and the device,
 * named by what each orders (rdma-core util/udma_barrier.h defines the
 * primitives; providers/mlx5/qp.c post_send_db and mlx5_post_recv, and
 * cq.c mlx5_get_next_cqe, place them). x86-64 and AArch64 only.
 */
#if defined(__x86_64__)
#define RDGRAM_MLX5_UDMA_TO_DEVICE() asm volatile("" ::: "memory")
/* x86 keeps loads from write-back memory in program order (TSO), and CQEs
 * live in coherent write-back memory: a compiler barrier suffices, as in
 * DPDK's mlx5 PMD (rte_io_rmb). rdma-core's lfence here cost parse_cqe 3.8x
 * on this machine (~100 M vs 385 M CQE/s, bench_mlx5_wqe). */
#define RDGRAM_MLX5_UDMA_FROM_DEVICE() asm volatile("" ::: "memory")
#define RDGRAM_MLX5_MMIO_FLUSH() asm volatile("sfence" ::: "memory")
#elif defined(__aarch64__)
#define RDGRAM_MLX5_UDMA_TO_DEVICE() asm volatile("dmb oshst" ::: "memory")
#define RDGRAM_MLX5_UDMA_FROM_DEVICE() asm volatile("dmb oshld" ::: "memory")
#define RDGRAM_MLX5_MMIO_FLUSH() asm volatile("dsb st" ::: "memory")
#else
#error "drivers/mlx5: no DMA barrier definitions for this architecture"
#endif

/* The WQEs of a burst are in memory before the doorbell record says they
 * exist: the device may fetch any WQE below the SQ counter it reads
 * (udma_to_device_barrier before qp->db[MLX5_SND_DBR]). */
inline void wqes_before_sq_dbrec() { RDGRAM_MLX5_UDMA_TO_DEVICE(); }
/* The doorbell record store is ordered before the BlueFlame / doorbell
 * MMIO store that makes the device look at it (mmio_wc_start). */
inline void sq_dbrec_before_doorbell() { RDGRAM_MLX5_MMIO_FLUSH(); }
/* The write-combining buffer holding the BlueFlame copy leaves the CPU now
 * and in one piece, before the next doorbell reuses the other half of the
 * register (mmio_flush_writes after mlx5_bf_copy). */
inline void flush_doorbell() { RDGRAM_MLX5_MMIO_FLUSH(); }
/* Receive WQEs are in memory before the RQ doorbell record publishes them
 * (udma_to_device_barrier in mlx5_post_recv). */
inline void rwqes_before_rq_dbrec() { RDGRAM_MLX5_UDMA_TO_DEVICE(); }
/* The owner bit was seen flipped: every other CQE byte, and the receive
 * buffer the CQE describes, is read only after it (udma_from_device_barrier
 * in mlx5_get_next_cqe; DPDK's rte_io_rmb). */
inline void cqe_owner_before_fields() { RDGRAM_MLX5_UDMA_FROM_DEVICE(); }
/* The CQEs consumed are read before the consumer index hands their slots
 * back to the device, which may overwrite them at once. */
inline void cqe_reads_before_ci() { RDGRAM_MLX5_UDMA_TO_DEVICE(); }

/* Big-endian helpers for volatile doorbell words. */
inline void store_be32(volatile uint32_t *p, uint32_t v) { *p = htobe32(v); }
inline uint32_t load_be32(const volatile uint32_t *p) { return be32toh(*p); }

/*
 * CQE ownership (mlx5 PRM "Completion Queue"; rdma-core cq.c get_sw_cqe):
 * the CQE at consumer index ci belongs to software when its opcode is not
 * MLX5_CQE_INVALID and its owner bit equals bit log2(cqe_cnt) of ci, i.e.
 * the parity of the lap the device wrote it in. Freshly created CQs hold
 * MLX5_CQE_INVALID with owner 0 everywhere.
 * (Any thread; reads one byte.)
 */
inline bool cqe_sw_owned(const mlx5_cqe64 *cqe, uint32_t ci, uint32_t cqe_cnt)
{
	const uint8_t op_own = *reinterpret_cast<const volatile uint8_t *>(&cqe->op_own);
	return (op_own >> 4) != MLX5_CQE_INVALID &&
	       (op_own & MLX5_CQE_OWNER_MASK) == ((ci & cqe_cnt) != 0);
}

/* What a software-owned CQE is. */
enum class cqe_class : uint8_t {
	recv,           /* MLX5_CQE_RESP_SEND / _IMM / _INV, plain format */
	req,            /* MLX5_CQE_REQ: a signalled send completed */
	req_err,        /* MLX5_CQE_REQ_ERR */
	resp_err,       /* MLX5_CQE_RESP_ERR: the receive WQE is consumed */
	inline_scatter, /* responder CQE with the data in the CQE (scatter to
			 * CQE, never enabled by rdgram): the WQE is consumed */
	compressed,     /* mini-CQE array format (never enabled by rdgram) */
	other,          /* any other opcode (RESP_WR_IMM on a UD QP, resize,
			 * signature error, ...) */
};

/* The fields of a CQE64, decoded (host order unless noted). */
struct cqe_fields {
	uint32_t byte_cnt;
	uint32_t flags_rqpn;  /* raw, host order */
	uint32_t src_qp;      /* flags_rqpn 23:0 */
	uint32_t qpn;         /* local QP: sop_drop_qpn 23:0 */
	uint32_t imm;         /* network order, as ibv_wc.imm_data */
	uint16_t slid;
	uint16_t wqe_counter;
	uint16_t pkey_index;  /* meaningless with an immediate */
	uint8_t opcode;
	uint8_t syndrome;     /* error CQEs */
	uint8_t vendor_syndrome;
	uint8_t ml_path;
	uint8_t grh;          /* flags_rqpn 29:28: nonzero = GRH present */
	uint8_t l3_or_sl;     /* flags_rqpn 27:24 (RoCE: L3 type; IB: SL) */
	bool with_imm;
	bool solicited;       /* op_own bit 1 (mlx5dv_get_cqe_se) */
};

/*
 * Decodes one software-owned CQE64 (the caller has checked cqe_sw_owned and
 * placed cqe_owner_before_fields). Pure: reads the 64 bytes, writes *f.
 * (Any thread.)
 */
inline cqe_class parse_cqe(const mlx5_cqe64 &c, cqe_fields *f)
{
	auto *cq = const_cast<mlx5_cqe64 *>(&c); /* mlx5dv getters take non-const */
	const uint8_t op = mlx5dv_get_cqe_opcode(cq);
	f->opcode = op;
	f->byte_cnt = be32toh(c.byte_cnt);
	f->flags_rqpn = be32toh(c.flags_rqpn);
	f->src_qp = f->flags_rqpn & cqe_src_qp_mask;
	f->grh = uint8_t((f->flags_rqpn >> 28) & 3);
	f->l3_or_sl = uint8_t((f->flags_rqpn >> 24) & 0xf);
	f->qpn = be32toh(c.sop_drop_qpn) & cqe_src_qp_mask;
	f->slid = be16toh(c.slid);
	f->wqe_counter = be16toh(c.wqe_counter);
	f->ml_path = c.ml_path;
	f->imm = c.imm_inval_pkey;
	f->pkey_index = uint16_t(be32toh(c.imm_inval_pkey) & 0xffff);
	f->with_imm = false;
	f->solicited = mlx5dv_get_cqe_se(cq) != 0;
	f->syndrome = 0;
	f->vendor_syndrome = 0;

	switch (op) {
	case MLX5_CQE_REQ:
		return cqe_class::req;
	case MLX5_CQE_REQ_ERR:
	case MLX5_CQE_RESP_ERR: {
		const auto &e = reinterpret_cast<const mlx5_err_cqe &>(c);
		f->syndrome = e.syndrome;
		f->vendor_syndrome = e.vendor_err_synd;
		return op == MLX5_CQE_REQ_ERR ? cqe_class::req_err : cqe_class::resp_err;
	}
	case MLX5_CQE_RESP_SEND:
	case MLX5_CQE_RESP_SEND_IMM:
	case MLX5_CQE_RESP_SEND_INV:
		if (mlx5dv_get_cqe_format(cq) == cqe_format_compressed)
			return cqe_class::compressed;
		if (c.op_own & (MLX5_INLINE_SCATTER_32 | MLX5_INLINE_SCATTER_64))
			return cqe_class::inline_scatter;
		f->with_imm = op == MLX5_CQE_RESP_SEND_IMM;
		return cqe_class::recv;
	default:
		return mlx5dv_get_cqe_format(cq) == cqe_format_compressed ? cqe_class::compressed
									  : cqe_class::other;
	}
}

} // namespace rdgram::mlx5

#endif
