/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/efa control path: an AWS Elastic Fabric Adapter through
 * libibverbs and libefa (efadv). It opens the device, holds the PD, the
 * efadv capabilities and the port facts, creates and destroys AHs (with
 * efadv_query_ah for each AH's number, ahn), owns a mempool and registers
 * it and any other a queue sends from, and creates UD or SRD queue pairs
 * (efa_datapath.h).
 *
 * NEVER RUN ON HARDWARE: see efa_datapath.h. The AH path runs here against
 * a device model through efa_ah_ops (tests/unit/test_efa_ah.cc).
 *
 * AHs. create_ah calls ibv_create_ah then efadv_query_ah(inlen =
 * sizeof(struct efadv_ah_attr), comp_mask 0) and keeps {ibv_ah, ahn} as the
 * AV in an ah_table<efa_av> (one replica per NUMA node of poll threads).
 * Errors are ibv_create_ah(3)'s, unchanged:
 *  - ENOMEM (the device's AH table is full) goes back as is: ah_registry
 *    answers it by evicting its least recently released AH and retrying
 *    once (ah_registry.h). Destroying an AH here frees the device's entry
 *    only after the QSBR grace period (a poll thread may still hold the
 *    ibv_ah it looked up), so with poll threads registered that retry
 *    meets ENOMEM again until the grace period ends; the registry sees
 *    reclaim_pending() and reports ENOMEM (transient) instead of emptying
 *    its cache.
 *  - EINVAL: error() names the likely cause (no GRH, port, sgid_index,
 *    zero GID, or a GID the device cannot reach: another subnet or
 *    availability zone, not an EFA address, or a PD not of this device).
 * destroy_ah of a stale or already destroyed handle: EINVAL (never passed
 * to the library, which would read freed memory).
 *
 * Threads: open/close on the main or control thread; everything else on
 * the control thread. Queues belong to one poll thread each.
 */
#ifndef RDGRAM_EFA_DEVICE_H
#define RDGRAM_EFA_DEVICE_H

#include <deque>
#include <string>
#include <vector>

#include <rte_rcu_qsbr.h>

#include "efa_ah.h"
#include "efa_datapath.h"
#include "rdgram/ah_table.h"
#include "rdgram/device.h"
#include "rdgram/queue_params.h"

namespace rdgram::efa {

struct efa_config {
	std::string device_name;     /* ibv device name; empty: the first EFA device */
	uint32_t max_ah = 65535;     /* AH slots here (an ahn is 16 bits, 0xFFFF = none);
					capped by ibv_device_attr.max_ah */
	rte_rcu_qsbr *qsbr = nullptr; /* poll threads' QSBR; nullptr: none read the AHs */
	std::vector<int> av_nodes;   /* NUMA nodes of poll threads; empty: the device's */
	/* The device's mempool (device.h): every queue's receive buffers,
	 * registered at open. nullptr: open makes one of nb_mbufs on the
	 * device's NUMA node, data room headroom + 40 (GRH) + the MTU, and
	 * close frees it; given: the caller keeps it (its data room must be
	 * at least that). open_with makes none (it creates no queues). */
	rte_mempool *pool = nullptr;
	uint32_t nb_mbufs = 8191;
	/* Every queue's: */
	bool srd = false;          /* SRD (EFADV_QP_DRIVER_TYPE_SRD) or UD */
	uint8_t rnr_retry = 7;     /* SRD, when the device has RNR retry: 7 = forever */
	/* Defaults of every queue (queue_params 0 takes these). */
	uint32_t qkey = 0x1efa;    /* high bit clear: IBA 10.2.5 */
	uint32_t sq_depth = 512;   /* send WRs in flight (capped by max_sq_wr) */
	uint32_t rq_depth = 512;   /* receive WRs posted (capped by max_rq_wr) */
	uint32_t max_inline = 0;   /* 0: the device's inline_buf_size */
	uint32_t recv_batch = 32;  /* receive buffers posted per ibv_post_recv */
};

/* efadv_query_device(3), plus what ibv_query_device says. */
struct efa_caps {
	uint32_t max_sq_wr = 0, max_rq_wr = 0;
	uint16_t max_sq_sge = 0, max_rq_sge = 0;
	uint16_t inline_buf_size = 0;
	uint32_t max_rdma_size = 0;
	uint32_t device_caps = 0;   /* EFADV_DEVICE_ATTR_CAPS_* */
	bool rdma_read = false;
	bool rnr_retry = false;     /* SRD QPs take an RNR retry count */
	bool cq_with_sgid = false;  /* EFADV_WC_EX_WITH_SGID */
};

class efa_device final : public device {
public:
	efa_device() = default;
	~efa_device() override;
	efa_device(const efa_device &) = delete;
	efa_device &operator=(const efa_device &) = delete;

	/* Names of the EFA devices on this host: ibv devices that answer
	 * efadv_query_device (which fails with EOPNOTSUPP on any other
	 * provider). Empty when there are none. */
	static std::vector<std::string> list();

	/* Opens cfg.device_name (or the first EFA device), allocates a PD,
	 * queries capabilities, port 1 and its GID table, and creates the AH
	 * table. 0 or an errno value; see error(). ENODEV: no such EFA device. */
	int open(const efa_config &cfg);
	/* For tests and tools: no verbs context; AHs go through ops on pd
	 * (e.g. a device model's), port facts as given. Queues cannot be
	 * created on a device opened this way (ENODEV). */
	int open_with(const efa_ah_ops &ops, ibv_pd *pd, const port_attr &port, const efa_config &cfg);
	/* Destroys every AH still live or waiting (no poll thread may use a
	 * queue any more), the MRs, the device's own mempool, the PD and the
	 * context. Refused while queues are alive (error() says how many;
	 * destroy_queue them first): nothing is freed then. */
	void close();

	const char *driver_name() const override { return "efa"; }
	const port_attr &port() const override { return attr_; }
	ah_handle create_ah(const ibv_ah_attr &attr, int *err) override;
	int destroy_ah(ah_handle h) override;
	/* Destroys, in the device, the AHs whose grace period has ended. */
	void reclaim() override;
	uint32_t reclaim_pending() const override;
	uint32_t live_ahs() const override { return ahs_.live(); }

	/* The device's number for a live AH (what receives from its address
	 * report in wc.slid), or 0xFFFF if h is not live. (Control thread.) */
	uint16_t ahn_of(ah_handle h) const;

	/* Registers mp's memory (every chunk) with the PD, once per mempool:
	 * memory queues created afterwards may send from. 0 (also when it is
	 * already), ENODEV (opened with open_with), ENOSPC (more chunks than
	 * ibv::lkey_map holds), or ibv_reg_mr's errno (drivers/common/ibv
	 * register_mempool). */
	int register_mempool(rte_mempool *mp);
	/* The queue contract (device.h, queue_params.h). */
	using queue_type = efa_queue;
	/* Creates queue q: CQs (receive CQ with EFADV_WC_EX_WITH_SGID when
	 * the device has it), the QP (SRD via efadv_create_qp_ex, UD via
	 * ibv_create_qp_ex: libefa 44's efadv_create_qp_ex takes only
	 * IBV_QPT_DRIVER), INIT -> RTR -> RTS, and posts receive buffers from
	 * the device's mempool. Zero fields take efa_config's defaults;
	 * p.index is a label. 0 or an errno value; EINVAL: a controlled Q_Key
	 * (high bit), signal_every other than 1 (libefa 44 refuses
	 * unsignalled sends), recv_batch above efa_queue::max_recv_batch, an
	 * sq_depth, rq_depth or max_inline past the device's caps; ENODEV: not
	 * open, or opened with open_with; EBUSY: q is live. See error(). */
	int create_queue(const queue_params &p, efa_queue &q);
	/* Destroys q's QP and CQs and frees every buffer it holds. */
	void destroy_queue(efa_queue &q);
	rte_mempool *mempool() const { return mp_; }
	/* Queues created and not yet destroyed. */
	uint32_t nb_queues() const { return nqueues_; }

	const efa_caps &caps() const { return caps_; }
	ibv_context *context() const { return ctx_; }
	ibv_pd *pd() const { return pd_; }
	const std::string &name() const { return name_; }
	/* The last failure's explanation (open, create_ah, create_queue). */
	const std::string &error() const { return err_; }
	const ah_table<efa_av> &ahs() const { return ahs_; }

private:
	int init_ahs(const efa_config &cfg, int socket);
	void destroy_now(ibv_ah *ah);
	/* One mempool's memory regions (deregistered at close); their lkeys
	 * are in mr_map_, which each queue copies. */
	struct efa_mr_set {
		const rte_mempool *mp = nullptr;
		std::vector<ibv_mr *> mr;
	};
	const efa_mr_set *mrs_of(const rte_mempool *mp) const;

	struct dead_ah {
		ibv_ah *ah;
		uint64_t token; /* rte_rcu_qsbr_start */
	};

	efa_ah_ops ops_ = verbs_ah_ops;
	ibv_context *ctx_ = nullptr;
	ibv_pd *pd_ = nullptr;
	bool own_pd_ = false;
	rte_rcu_qsbr *qs_ = nullptr;
	std::string name_;
	port_attr attr_{};
	efa_caps caps_{};
	ah_table<efa_av> ahs_;
	std::vector<ibv_ah *> live_ah_; /* slot -> live AH (control thread's record) */
	std::deque<dead_ah> dead_;    /* destroyed here, not yet in the device */
	std::deque<efa_mr_set> mrs_;
	ibv::lkey_map mr_map_;        /* every registered pool's lkeys */
	rte_mempool *mp_ = nullptr;
	bool own_mp_ = false;
	efa_config cfg_{};
	uint32_t nqueues_ = 0;
	std::string err_;
};

} // namespace rdgram::efa

#endif
