/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/mlx5 queue state: one UD QP's rings, its settings, and what its
 * data path keeps between bursts. As DPDK's mlx5 PMD keeps a hot
 * mlx5_txq_data inside a cold mlx5_txq_ctrl, mlx5_queue (the control
 * object: what attach was given, the allocations it owns) holds
 * mlx5_txq_data and mlx5_rxq_data first: the counters and indices the poll
 * thread reads and writes per burst. The data path is in mlx5_tx.h (send),
 * mlx5_tx_writers.h (its run writers) and mlx5_completion.h (both CQs and
 * the RQ); set-up in mlx5_queue.cc; mlx5_datapath.h includes them all.
 */
#ifndef RDGRAM_MLX5_QUEUE_H
#define RDGRAM_MLX5_QUEUE_H

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include <rte_branch_prediction.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "ibv_lkey_map.h"
#include "mlx5_av.h"
#include "mlx5_counters.h"
#include "mlx5_ring.h"
#include "mlx5_tx_writers.h"
#include "rdgram/ah_table.h"
#include "rdgram/cpu_isa.h"
#include "rdgram/stats.h"
#include "rdgram/ud.h"

namespace rdgram::mlx5 {

/* Per-queue settings (setup). */
struct queue_config {
	uint32_t qkey = 0;            /* the QP's Q_Key */
	bool roce = true;             /* Ethernet port: CQE 27:24 is the L3 type */
	uint32_t mtu = 4096;          /* path MTU: largest UD payload */
	uint32_t max_inline = 0;      /* the QP's cap.max_inline_data */
	uint32_t max_send_sge = 1;    /* the QP's cap.max_send_sge: data segments per WQE */
	uint32_t signal_every = 64;   /* CQ_UPDATE on one WQE in this many */
	bool signal_last = false;     /* also on the last WQE of every burst */
	bool compact_av = false;      /* device supports the 16-byte AV */
	bool use_bf = true;           /* BlueFlame copy when the WQE fits */
	uint32_t rx_buf_len = 0;      /* bytes posted per receive (0: data room) */
	uint32_t rq_refill_batch = 32; /* refill when this many RQ slots are free */
	int socket = SOCKET_ID_ANY;   /* NUMA node of the poll thread */
	/* Widest SIMD the inline run writers may use; the CPU and
	 * RDGRAM_CPU_MAX (cpu_isa_max) cap it further. Tests lower it to
	 * run each writer. */
	cpu_isa isa_cap = cpu_isa::avx512;
};

/* What tx_burst's loop uses, as locals of the burst (see there). */
struct tx_state {
	uint8_t *sq;      /* ring start */
	uint8_t *sq_end;  /* ring end */
	uint32_t mask;    /* sq_wqe_cnt - 1 */
	uint32_t qpn_be;  /* qpn_ds without DS: htobe32(qpn << 8) */
	uint32_t own_qkey;
};

enum class chain_verdict : uint8_t { ok, too_many_segs, bad_mbuf, too_long };
struct chain_gather {
	uintptr_t addr;    /* the first non-empty segment's */
	uint32_t len;      /* the message: the segments' sum */
	uint32_t lkey;     /* the first non-empty segment's */
	uint32_t seg_len;  /* 16 per data segment in txq_.chain */
	chain_verdict v;
};

/*
 * A WQE's first 64-byte block for one destination, prebuilt (VPP's
 * rdma plugin keeps such a template per queue): the control segment
 * with what is constant for the QP (QPN; signature and DCI stream 0),
 * then the datagram segment: the AH's AV with key.qkey and dqp_dct
 * filled in. Per WQE the block is copied whole and the control
 * segment's two varying 8-byte halves are stored over it. The AH
 * table slot cannot hold it (ctrl + AV is 64 bytes, the slot's
 * generation needs 4 more), and the control segment is per QP while
 * an AH serves every QP.
 */
static_assert(offsetof(send_wr, ah) == 0 && offsetof(send_wr, remote_qpn) == 8 &&
	      offsetof(send_wr, remote_qkey) == 12 && sizeof(ah_handle) == 8);
struct alignas(64) wqe_head {
	uint8_t block[wqe_bb];
	/* What it was built from: send_wr's first 16 bytes (ah,
	 * remote_qpn, remote_qkey) as the WR gave them. */
	union {
		uint8_t key[16];
		struct {
			ah_handle ah;
			uint32_t remote_qpn, remote_qkey;
		} key_wr;
	};
	uint32_t av_len; /* 48, or 16 for the compact AV */
};

/*
 * The send side's hot state (DPDK's mlx5_txq_data): the SQ's software
 * indices and per-slot records, the requester CQ's index, the BlueFlame
 * half in use, and the run writers' SIMD level, chosen at attach.
 * (NOT multi-thread safe: the owning poll thread's.)
 */
struct mlx5_txq_data {
	uint8_t *sq_end = nullptr;
	rte_mbuf **sq_mbuf = nullptr; /* by WQE start block: the mbuf it sends */
	uint8_t *sq_bbs = nullptr;    /* by WQE start block: its size in blocks */
	uint32_t sq_pi = 0, sq_ci = 0; /* basic blocks posted / retired */
	uint32_t sq_nmbuf = 0;         /* outstanding WQEs that hold an mbuf */
	uint32_t scq_ci = 0;           /* requester CQ consumer index */
	uint32_t bf_off = 0;           /* BlueFlame buffer half of the next doorbell */
	uint32_t since_signal = 0;     /* WQEs since the last CQ_UPDATE */
	uint32_t max_bbs = 2;          /* the largest WQE in basic blocks */
	cpu_isa isa = cpu_isa::portable; /* the run writers' level (attach) */
	/* max_send_sge data segments: those of the chained mbuf being sent
	 * (gather_chain), beside the rings on the queue's NUMA node. */
	mlx5_wqe_data_seg *chain = nullptr;
};

/* The receive side's hot state (DPDK's mlx5_rxq_data).
 * (NOT multi-thread safe: the owning poll thread's.) */
struct mlx5_rxq_data {
	rte_mbuf **rq_mbuf = nullptr;  /* by RQ slot: the posted buffer */
	uint32_t rq_pi = 0, rq_ci = 0; /* receive WQEs posted / completed */
	uint32_t rcq_ci = 0;           /* responder CQ consumer index */
	uint32_t rx_len = 0;           /* bytes posted per receive */
};

/*
 * One UD QP on an mlx5 device: the ud_driver policy.
 * (NOT multi-thread safe: owned by one poll thread.)
 */
class mlx5_queue {
public:
	static constexpr unsigned max_burst = 32;
	/* Requester CQEs reaped per tx_burst / tx_flush. */
	static constexpr unsigned tx_cqe_budget = 64;
	/* Most data segments a UD WQE can carry: DS is a 6-bit count of
	 * 16-byte units (qpn_ds 5:0), ctrl and the extended AV take 4. */
	static constexpr uint32_t max_send_sge_limit = (63 * 16 - 16 - 48) / 16;

	mlx5_queue() = default;
	mlx5_queue(const mlx5_queue &) = delete;
	mlx5_queue &operator=(const mlx5_queue &) = delete;
	~mlx5_queue() { detach(); }

	/* Binds the queue to its rings (setup, control path). mp: receive
	 * buffers; mrs: the lkeys of every mempool it sends from or receives
	 * into; ahs: the AH table (this thread's NUMA replica is used).
	 * Returns 0, EINVAL (rings not as this driver needs them: power-of-two
	 * counts, 64-byte stride and CQEs, one RQ entry at least 16 bytes, no
	 * doorbell register, an inline limit or a max_send_sge (0, or above
	 * max_send_sge_limit) whose WQE DS cannot express, a signal interval
	 * that could let an all-unsignalled window fill the SQ), ENOMEM. */
	int attach(const rings &r, const queue_config &c, rte_mempool *mp, const ibv::lkey_map &mrs,
		   const ah_table<mlx5_av> *ahs);

	/* Frees every mbuf the rings still hold (after the QP is destroyed or
	 * reset on hardware; the model stops reading). (Control path.) */
	void detach();

	const mlx5_counters &counters() const { return ctr_; }
	/* The SIMD level of the inline run writers, chosen at attach:
	 * avx512 (block_writer_avx512), avx2 (block_writer_avx2, whole
	 * 4-byte words), otherwise the portable copy_writer. */
	cpu_isa tx_isa() const { return txq_.isa; }
	uint32_t qpn() const { return r_.qpn; }
	rte_mempool *mempool() const { return mp_; }
	/* WQE basic blocks posted and not yet known complete. */
	uint32_t sq_outstanding() const { return txq_.sq_pi - txq_.sq_ci; }
	/* Receive WQEs posted and not yet completed. */
	uint32_t rq_posted() const { return rxq_.rq_pi - rxq_.rq_ci; }
	/* Largest WQE of this queue in basic blocks. */
	uint32_t max_wqe_bbs() const { return txq_.max_bbs; }
	uint32_t rx_buf_len() const { return rxq_.rx_len; }

	/* Nothing is held back in software: every accepted WR is in the SQ
	 * and the doorbell rang with its burst. */
	unsigned tx_pending() const { return 0; }

	/* Reaps requester completions (frees sent mbufs). */
	void tx_flush() { reap_tx(tx_cqe_budget); }

	/* Fills every free RQ slot (one doorbell-record update). */
	void post_recvs() { refill(); }

	/*
	 * Accepts up to n send WRs; returns how many it took (the caller keeps
	 * the rest: the SQ had no room for the next one). A chained mbuf goes
	 * as one data segment per non-empty segment (see gather_chain). An
	 * accepted WR that cannot be sent (stale AH, payload over the MTU or
	 * the inline limit, a chain of more segments than max_send_sge, a
	 * segment outside every registered region) is dropped and counted,
	 * its whole chain freed. One doorbell for the burst.
	 * (mlx5_tx.h)
	 */
	uint16_t tx_burst(send_wr *wrs, uint16_t n);

	/* Receives up to n completions. Every responder CQE is delivered or
	 * dropped under one counter; the RQ is refilled in batches.
	 * (mlx5_completion.h) */
	uint16_t rx_burst(recv_wc *wcs, uint16_t n);

	/* The SQ basic block of counter pi, and the SQ counter (tests read
	 * posted WQEs back). */
	const uint8_t *sq_block(uint32_t pi) const
	{
		return r_.sq_buf + size_t(pi & (r_.sq_wqe_cnt - 1)) * wqe_bb;
	}
	uint32_t sq_head() const { return txq_.sq_pi; }

private:
	/* tx_burst's step codes, running values and checked WR (mlx5_tx.h):
	 * no routine that takes them by reference is out of line, so they
	 * stay in registers. */
	struct tx_burst_state;
	struct tx_wqe;
	enum class tx_code : uint8_t;

	/* mlx5_tx.h */
	static uint32_t align16(uint32_t v) { return (v + 15) & ~15u; }
	void drop_wr(send_wr &wr);
	__rte_always_inline tx_state tx_begin() const;
	__rte_always_inline tx_code tx_run(const tx_state &t, tx_burst_state &b, const wqe_head &h,
					   send_wr *&wr, send_wr *end);
	__rte_always_inline tx_code tx_check(tx_burst_state &b, send_wr &wr, tx_wqe &w);
	__rte_always_inline tx_code tx_single(const tx_state &t, tx_burst_state &b, const wqe_head &h,
					      const send_wr &wr, const tx_wqe &w);
	__rte_always_inline void tx_end(tx_burst_state &b, uint16_t taken);
	inline __rte_noinline chain_gather gather_chain(const rte_mbuf *m);
	inline __rte_noinline void count_chain_drop(chain_verdict v);
	__rte_always_inline void write_chain(uint8_t *seg, uint8_t *ring, const uint8_t *ring_end, uint32_t n);
	static void build_head(wqe_head &h, const tx_state &t, const send_wr &wr, const mlx5_av &av,
			       bool compact);
	static __rte_always_inline uint8_t *write_head(const tx_state &t, const wqe_head &h, uint32_t pi,
						       uint32_t flags, uint32_t imm_data, bool sig, uint32_t ds);
	run_args start_run(const tx_state &t, const wqe_head &h, send_wr *wr, send_wr *end, uint32_t pi,
			   uint32_t bbs, uint32_t ds, uint32_t blocks, uint8_t *blk) const;
	static __rte_always_inline uint32_t run_room(const tx_state &t, uint32_t pi, uint32_t pi_limit,
						     uint32_t sig_left, uint32_t bbs);
	inline __rte_noinline run_result inline_run(const tx_state &t, const wqe_head &h, send_wr *wr,
					     send_wr *const end, uint32_t pi, uint32_t len, uint32_t seg_len,
					     uint32_t bbs, uint32_t ds, uint32_t blocks);
	inline __rte_noinline run_result mbuf_run(const tx_state &t, const wqe_head &h, send_wr *wr, send_wr *const end,
					   uint32_t pi, uint32_t bbs, uint32_t ds, uint32_t blocks);
	__rte_always_inline void write_inline(const tx_state &t, uint8_t *seg, const uint8_t *src, uint32_t len,
					      uint32_t seg_len);
	void copy_wrapped(const tx_state &t, uint8_t *dst, const uint8_t *src, uint32_t len, uint32_t total);
	void ring_sq(const uint8_t *ctrl, uint32_t bbs);

	/* mlx5_completion.h */
	void reap_tx(unsigned budget);
	void complete_to(uint16_t wc);
	static constexpr unsigned free_batch = 64;
	bool rx_one(const mlx5_cqe64 &cqe, recv_wc &wc);
	void fill_wc(const cqe_fields &f, rte_mbuf *m, recv_wc &wc);
	void refill();

	/* Hot: what the poll thread reads and writes per burst. */
	mlx5_txq_data txq_{};
	mlx5_rxq_data rxq_{};
	mlx5_counters ctr_{};
	ah_table<mlx5_av>::view ahs_{};
	/* Read per burst, written at attach only. */
	rings r_{};
	queue_config c_{};
	ibv::lkey_map mrs_; /* drivers/common/ibv */
	rte_mempool *mp_ = nullptr;
};

} // namespace rdgram::mlx5

#endif
