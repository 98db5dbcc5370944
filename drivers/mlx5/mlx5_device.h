/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/mlx5 control path: UD QPs on an mlx5 port through libibverbs
 * and mlx5dv. Each create_queue creates a QP and its two CQs with verbs
 * (the QP in a parent domain with a thread domain, so that it gets a
 * BlueFlame register of its own and the data path needs no lock), takes it
 * to RTS, and opens them with mlx5dv_init_obj; their rings become
 * mlx5::rings for mlx5_queue (mlx5_datapath.h). The mempool's memory is
 * registered chunk by chunk.
 *
 * AHs: ibv_create_ah + mlx5dv_init_obj(MLX5DV_OBJ_AH) on the control
 * thread, dv_ah.av copied into the per-NUMA AH table; on an InfiniBand
 * port the AV is built without any call into the provider when
 * build_ib_av (mlx5_av.h) can reproduce it.
 *
 * This has never run on an mlx5 device: no RDMA hardware exists where it
 * was written. tests/hw/test_mlx5_hw.cc exercises it where one exists.
 *
 * Threads: open/close on the main or control thread; create_ah,
 * destroy_ah, reclaim on the control thread; create_queue/destroy_queue
 * on the control path, before and after the queue's poll thread runs.
 */
#ifndef RDGRAM_MLX5_DEVICE_H
#define RDGRAM_MLX5_DEVICE_H

#include <string>
#include <vector>

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>

#include "mlx5_datapath.h"
#include "rdgram/device.h"
#include "rdgram/queue_params.h"

namespace rdgram::mlx5 {

/* qkey, sq_wrs, rq_wrs, max_inline, signal_every and recv_batch are the
 * defaults of every queue (queue_params 0 takes them); the rest is the
 * device's, for all its queues. */
struct mlx5_config {
	std::string device;          /* ibv device name; empty: the first mlx5 */
	uint8_t port_num = 1;
	uint32_t qkey = 0x11111111;
	uint32_t sq_wrs = 1024;      /* ibv_qp_cap.max_send_wr */
	uint32_t rq_wrs = 1024;      /* ibv_qp_cap.max_recv_wr */
	uint32_t max_inline = 64;    /* ibv_qp_cap.max_inline_data requested */
	/* ibv_qp_cap.max_send_sge requested (capped by the device's max_sge):
	 * the most segments of a chained mbuf one WQE carries. 8 data
	 * segments make a WQE of 16 + 48 + 8 * 16 = 192 bytes, three basic
	 * blocks: the size the 64-byte inline limit already gives the QP's
	 * WQEs (16 + 48 + 80 = 144, rounded up to three blocks), so the SQ
	 * is no larger for it. */
	uint32_t max_send_sge = 8;
	uint32_t signal_every = 64;
	uint32_t recv_batch = 32;    /* refill the RQ when this many slots are free */
	bool signal_last = false;
	bool use_bf = true;
	bool syscall_free_ib_av = true; /* build_ib_av on IB ports */
	bool compact_av = true;      /* the 16-byte AV for AHs without a GRH, when the device has it */
	uint32_t max_ah = 4096;      /* AH table slots (capped by device max_ah) */
	/* The device's mempool (device.h): every queue's receive buffers,
	 * registered at open. nullptr: open makes one of nb_mbufs on the
	 * device's NUMA node, data room headroom + 40 (GRH) + the MTU, and
	 * close frees it; given: the caller keeps it (its data room must be
	 * at least that). */
	rte_mempool *pool = nullptr;
	uint32_t nb_mbufs = 8191;
	uint32_t mtu = 0;            /* 0: the port's active MTU */
	rte_rcu_qsbr *qsbr = nullptr;
	std::vector<int> av_nodes;   /* NUMA nodes of the poll threads */
};

class mlx5_device final : public device {
public:
	mlx5_device() = default;
	~mlx5_device() override;

	/* The name of the first device mlx5dv_is_supported accepts: 0, or
	 * ENODEV when there is none (ENOSYS when libibverbs finds no devices
	 * at all, e.g. no RDMA subsystem). */
	static int find_device(std::string *name);

	/* Opens the device, creates the PD and parent domain, makes or takes
	 * the mempool and registers it, and creates the AH table. 0 or an
	 * errno value; see error(). */
	int open(const mlx5_config &cfg);
	/* Destroys the AHs, deregisters the MRs, frees the device's own
	 * mempool and closes the device. Refused while queues are alive
	 * (error() says how many; destroy_queue them first): nothing is
	 * freed then. */
	void close();

	const char *driver_name() const override { return "mlx5"; }
	const port_attr &port() const override { return attr_; }
	ah_handle create_ah(const ibv_ah_attr &attr, int *err) override;
	int destroy_ah(ah_handle h) override;
	void reclaim() override { ahs_.reclaim(); }
	uint32_t reclaim_pending() const override { return ahs_.retired_waiting(); }
	uint32_t live_ahs() const override { return ahs_.live(); }

	/* The queue contract (device.h, queue_params.h). */
	using queue_type = mlx5_queue;
	/* Creates a UD QP and its two CQs in the parent domain (a BlueFlame
	 * register of its own), takes it to RTS, opens the rings with
	 * mlx5dv_init_obj, binds q to them for a poll thread on NUMA node
	 * p.socket and fills its RQ from the device's mempool. Zero fields
	 * take mlx5_config's defaults; p.index is a label. 0 or errno;
	 * EINVAL: signal_every 0 or not below sq_depth, recv_batch 0 or
	 * above rq_depth, max_inline past what a WQE's DS can express
	 * (max_inline_limit), or rings the data path cannot use; ENODEV: not
	 * open; EBUSY: q is bound to a QP already; then what the provider
	 * says. See error(). */
	int create_queue(const queue_params &p, mlx5_queue &q);
	/* Destroys q's QP (the device stops reading and writing its
	 * buffers), frees every mbuf its rings hold, destroys its CQs. No
	 * poll thread may use q any more. */
	void destroy_queue(mlx5_queue &q);
	/* Largest inline payload a UD WQE can carry: 16 (ctrl) + 48 (AV) +
	 * 4 (inline header) + data within DS's 63 units of 16 bytes. */
	static constexpr uint32_t max_inline_limit = 63 * 16 - 16 - 48 - 4;
	/* Queues created and not yet destroyed. */
	uint32_t nb_queues() const { return uint32_t(qps_.size()); }
	/* The AV the provider gives for attr (ibv_create_ah +
	 * mlx5dv_init_obj, then ibv_destroy_ah): for comparing build_ib_av
	 * with it. 0 or errno. (Control thread.) */
	int provider_av(const ibv_ah_attr &attr, mlx5_av *out);

	/* Whether the device takes the compact 16-byte AV (mlx5_caps.h), and
	 * if it could not be asked, why (empty when the query ran). */
	bool compact_av() const { return compact_av_; }
	const std::string &compact_av_note() const { return compact_note_; }
	rte_mempool *mempool() const { return mp_; }
	const ah_table<mlx5_av> &ahs() const { return ahs_; }
	const std::string &error() const { return err_; }

private:
	int fail(int e, const std::string &what);
	/* One queue's verbs objects. */
	struct hw_qp {
		ibv_qp *qp = nullptr;
		ibv_cq *scq = nullptr, *rcq = nullptr;
		const mlx5_queue *q = nullptr; /* bound to them (not movable) */
	};
	/* Creates and opens them (create_queue); on failure destroys what it
	 * made and sets err_. */
	int setup_qp(uint32_t sq_wrs, uint32_t rq_wrs, uint32_t max_inline, uint32_t qkey, hw_qp *out,
		     rings *r, uint32_t *inline_got, uint32_t *sge_got);
	static void destroy_hw_qp(hw_qp &h);

	mlx5_config cfg_{};
	port_attr attr_{};
	ibv_context *ctx_ = nullptr;
	ibv_pd *pd_ = nullptr;
	ibv_td *td_ = nullptr;
	ibv_pd *pdom_ = nullptr; /* parent domain over pd_ and td_ */
	std::vector<hw_qp> qps_;    /* live queues' */
	uint32_t max_sge_ = 1;      /* the device's max_sge (ibv_query_device) */
	bool compact_av_ = false;
	std::string compact_note_;
	rte_mempool *mp_ = nullptr;
	bool own_mp_ = false;
	std::vector<ibv_mr *> mrs_;
	ibv::lkey_map mr_tab_;
	ah_table<mlx5_av> ahs_;
	std::vector<ibv_ah *> ah_of_slot_; /* provider AH behind a slot, or null */
	std::string err_;
};

} // namespace rdgram::mlx5

#endif
