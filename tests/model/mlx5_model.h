/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * A device model of one mlx5 UD QP, for running drivers/mlx5's data path
 * (mlx5_queue) unmodified without hardware. It is a model, written from
 * mlx5dv.h's layouts and rdma-core's provider, not a ConnectX: nothing it
 * accepts is thereby known to work on a device.
 *
 * It allocates what mlx5dv_init_obj would hand out (SQ and RQ rings, the
 * doorbell record, a BlueFlame register, two CQs with their doorbell
 * records) and, when asked (process()):
 *   - reads the SQ doorbell record and walks the WQEs from its own consumer
 *     counter up to it, checking every field against mlx5dv.h / the PRM:
 *     opcode SEND or SEND_IMM with opmod 0, the WQE index equal to the
 *     position, the QPN, DS consistent with the segments, only the CQ_UPDATE
 *     and SOLICITED bits in fm_ce_se, signature 0; the datagram segment
 *     (MLX5_EXTENDED_UD_AV set for a 48-byte AV, clear for the compact one;
 *     Q_Key; reserved bytes zero); an inline segment (MLX5_INLINE_SEG, the
 *     length within max_inline, zero padding) or a gather list of data
 *     segments filling the rest of DS, at most max_send_sge of them, none
 *     of 0 bytes (rdma-core skips empty SGEs), each with an lkey
 *     registered for the whole [addr, addr + len); the message is their
 *     bytes in order, at most the path MTU; every violation is
 *     recorded, with the WQE index;
 *   - delivers each WQE addressed to its own QPN with its Q_Key to the RQ:
 *     takes the next receive WQE below the RQ doorbell record, writes the
 *     GRH area as the wire would have it (RoCEv2: the IPv4 header in its
 *     last 20 bytes, or the IPv6 header; IB: an IB GRH when the AV has one)
 *     and the payload into the posted buffer, or a responder error CQE
 *     (LOCAL_LENGTH_ERR) when it does not fit, and a responder CQE64:
 *     owner bit of the CQ lap, byte_cnt = 40 + payload, flags_rqpn with
 *     the source QP, GRH bit and (RoCE) L3 type or (IB) SL, slid, the
 *     immediate, wqe_counter, SE;
 *   - writes a requester CQE for each signalled WQE;
 *   - checks that no CQE would overwrite one software has not consumed
 *     (the CQ doorbell record's consumer index).
 * doorbell() inspects the BlueFlame register the driver wrote since the
 * last call: how many doorbells, 8-byte or BlueFlame, and whether their
 * bytes are the last WQE's.
 *
 * Simplifications, on purpose: one QP, loopback only (other destination
 * QPNs are counted and dropped as a switch would drop an unknown LID);
 * an injected requester error fails one WQE without moving the QP to the
 * error state.
 */
#ifndef RDGRAM_TESTS_MLX5_MODEL_H
#define RDGRAM_TESTS_MLX5_MODEL_H

#include <cstdint>
#include <string>
#include <vector>

#include "mlx5_ring.h"
#include "rdgram/wire.h"

namespace rdgram::test {

struct mlx5_model_config {
	uint32_t sq_wqe_cnt = 1024;
	uint32_t rq_wqe_cnt = 64;
	uint32_t scq_cqe_cnt = 64;
	uint32_t rcq_cqe_cnt = 64;
	uint32_t bf_size = 256;   /* 0: no BlueFlame (8-byte doorbells only) */
	uint32_t qpn = 0x000123;
	uint32_t qkey = 0x11111111;
	uint32_t max_inline = 188;
	uint32_t max_send_sge = 1; /* the QP's cap.max_send_sge: data segments per WQE */
	uint32_t mtu = 4096;      /* path MTU: a longer message is a violation */
	bool roce = true;
	wire::gid local_gid{};    /* RoCE: the source address of loopback packets */
	uint16_t local_lid = 0;   /* IB */
};

/* One data segment of a WQE's gather list. */
struct mlx5_model_seg {
	uint64_t addr = 0;
	uint32_t len = 0, lkey = 0;
};

/* One WQE as the model read it. */
struct mlx5_model_wqe {
	uint32_t pi;              /* SQ counter of its first block */
	uint8_t opcode, fm_ce_se, ds;
	uint32_t imm;             /* as in the WQE (network order) */
	bool compact;
	uint32_t dqpn, qkey;
	mlx5_wqe_av av;           /* the AV as in the WQE (compact: 16 bytes, rest 0) */
	bool inl;
	uint32_t len, lkey;       /* message length; the first data segment's lkey */
	uint64_t addr;            /* the first data segment's address */
	std::vector<mlx5_model_seg> segs; /* the gather list, in WQE order */
	std::vector<uint8_t> bytes;   /* the WQE, ds * 16 bytes, unwrapped */
	std::vector<uint8_t> payload; /* inline data, or the segments' bytes concatenated */
};

struct mlx5_doorbell {
	unsigned writes = 0;      /* halves of the register written */
	bool bf = false;          /* the last was a BlueFlame copy */
	bool matches = false;     /* its bytes are the last WQE's */
	uint32_t bbs = 0;         /* blocks copied (BlueFlame) */
};

class mlx5_model {
public:
	mlx5_model() = default;
	mlx5_model(const mlx5_model &) = delete;
	mlx5_model &operator=(const mlx5_model &) = delete;
	~mlx5_model();

	/* Allocates the rings. 0 or EINVAL/ENOMEM. */
	int init(const mlx5_model_config &c);
	const mlx5::rings &rings() const { return r_; }
	const mlx5_model_config &config() const { return c_; }

	/* A memory region the device knows: [start, start + len) under lkey. */
	void add_mr(uintptr_t start, size_t len, uint32_t lkey);

	/* Executes every WQE the SQ doorbell record announces. Returns how
	 * many. */
	unsigned process();
	/* What the driver wrote to the BlueFlame register since the last call
	 * (the register is re-poisoned after). */
	mlx5_doorbell doorbell();

	/* Fault injection. The next WQE executed completes with a requester
	 * error CQE of this syndrome. */
	void fail_next_send(uint8_t syndrome) { fail_send_ = syndrome; }
	/* The next delivery completes with a responder error CQE. */
	void fail_next_recv(uint8_t syndrome) { fail_recv_ = syndrome; }
	/* The next responder CQE reports extra bytes more than it wrote (a
	 * device the driver must not trust). */
	void lie_next_byte_cnt(uint32_t extra) { lie_ = extra; }
	/* The next delivery is scattered to the CQE (mlx5 PRM "scatter to
	 * CQE"; op_own 3:2 = fmt, MLX5_INLINE_SCATTER_32 or _64): the first
	 * 32 bytes of GRH area + payload in the CQE's first 32 bytes, the
	 * posted buffer left untouched. rdgram does not ask for this
	 * format (mlx5_ring.h); this plays a device that uses it anyway. */
	void scatter_next_recv(uint8_t fmt) { scatter_ = fmt; }

	/* Every WQE executed, in order (tests inspect and may clear). */
	std::vector<mlx5_model_wqe> executed;
	/* Rule violations seen, each naming the WQE or CQE. */
	std::vector<std::string> violations;
	uint64_t delivered = 0, drop_no_rwqe = 0, drop_qkey = 0, drop_qpn = 0;
	uint64_t req_cqes = 0, resp_cqes = 0, err_cqes = 0;
	uint32_t sq_ci() const { return sq_ci_; }

private:
	void violation(const std::string &what);
	bool mr_ok(uint64_t addr, uint32_t len, uint32_t lkey) const;
	bool parse_wqe(mlx5_model_wqe &w);
	void deliver(const mlx5_model_wqe &w);
	mlx5_cqe64 *next_cqe(mlx5::cq_ring &cq, uint32_t &pi, const char *which);
	void publish_cqe(mlx5_cqe64 *cqe, uint8_t op_own_low, uint8_t opcode, uint32_t pi, uint32_t cnt);
	void write_req_cqe(const mlx5_model_wqe &w, uint8_t err_syndrome);
	uint32_t grh_area(const mlx5_model_wqe &w, uint8_t *area, uint32_t paylen, uint8_t *l3);

	struct mr {
		uint64_t start, end;
		uint32_t lkey;
	};
	mlx5_model_config c_{};
	mlx5::rings r_{};
	void *mem_[8]{};
	std::vector<mr> mrs_;
	uint32_t sq_ci_ = 0;
	uint32_t rq_ci_ = 0;
	uint32_t scq_pi_ = 0, rcq_pi_ = 0;
	uint32_t bf_next_ = 0;
	uint8_t fail_send_ = 0, fail_recv_ = 0;
	uint32_t lie_ = 0;
	uint8_t scatter_ = 0;
};

} // namespace rdgram::test

#endif
