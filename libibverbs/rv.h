/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram's libibverbs.so.1: the verbs objects of a process whose verbs
 * devices are soft-driver ports (docs/VERBS.md).
 *
 * One rv_device per [[port]]: a soft_device with one soft_queue. The queue
 * is driven by whichever thread needs it (run to completion): ibv_post_send
 * builds and hands frames to the port on the caller's thread, ibv_poll_cq
 * with an empty CQ receives a burst on the caller's thread and sorts it into
 * the CQs of the QPs it is for. The queue is not thread safe, so every use
 * holds the device's data-path lock (dp): a spinlock, uncontended in the
 * common case of one thread per device; a poller that finds it taken does
 * not wait (the holder fills the CQs). CQs are rings with one producer at a
 * time (the dp holder) and a consumer lock (verbs lets two threads poll one
 * CQ).
 *
 * The service thread (rv_service.cc) does what no caller may be around
 * for: the soft device's control work (ARP/ND, AH reclamation), and the
 * port's receive path while a CQ is armed for an event, an ibv_create_ah
 * waits for its neighbour, or no caller polled for a while (peers' ARP
 * requests are answered even while the program sleeps).
 */
#ifndef RDGRAM_RV_H
#define RDGRAM_RV_H

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <infiniband/verbs.h>
#include <rte_spinlock.h>

#include "rdgram/tsan.h"
#include "rv_config.h"
#include "soft_port.h"
#include "rv_ops.h"
#include "soft_datapath.h"
#include "soft_device.h"

namespace rdgram::rv {

struct rv_device;
struct rv_provider_dev; /* rv_provider.cc */
namespace m5 {
struct nic; /* rv_mlx5_nic.h */
}

/* rte_spinlock, told to ThreadSanitizer: DPDK's x86 lock is inline asm,
 * which it cannot see. */
inline void rv_lock(rte_spinlock_t *l)
{
	rte_spinlock_lock(l);
	RDGRAM_TSAN_ACQUIRE(l);
}
inline bool rv_trylock(rte_spinlock_t *l)
{
	if (!rte_spinlock_trylock(l))
		return false;
	RDGRAM_TSAN_ACQUIRE(l);
	return true;
}
inline void rv_unlock(rte_spinlock_t *l)
{
	RDGRAM_TSAN_RELEASE(l);
	rte_spinlock_unlock(l);
}

struct rv_cq {
	ibv_cq cq; /* must be first */
	rv_device *dev;
	rv_channel *chan;
	/* Ring of completions: produced under dev->dp, consumed under
	 * poll_lock. */
	ibv_wc *ring;
	uint32_t mask;
	std::atomic<uint32_t> head{0}, tail{0};
	rte_spinlock_t poll_lock;
	/* ibv_req_notify_cq: 0 disarmed, 1 next completion, 2 solicited. */
	std::atomic<int> armed{0};
	uint32_t events_reported = 0; /* under chan->mu */
	uint64_t overruns = 0;        /* completions lost to a full CQ */
};

struct rv_mr {
	ibv_mr mr; /* must be first */
	uintptr_t lo, hi;
};

/* One posted receive; its SGEs are the QP's rq_sge row of the same index
 * (rows of cap.max_recv_sge: a QP pays for the SGEs it asked for). */
struct rv_recv {
	uint64_t wr_id;
	uint32_t nsge;
};
/* The max_sge ibv_query_device(3) advertises, for sends and receives
 * alike: a QP asking for up to this many of either is created. */
inline constexpr uint32_t rv_max_sge = 32;

struct rv_qp {
	ibv_qp qp; /* must be first */
	rv_device *dev;
	rv_cq *scq, *rcq;
	ibv_qp_cap cap;
	bool sq_sig_all;
	uint32_t qkey = 0;
	uint32_t sq_psn = 0;
	uint16_t pkey_index = 0;
	uint8_t port = 1;
	int sidx = -1; /* its index in the soft queue's QP table; -1: none */
	/* Receive queue: producers serialised by rq_lock, the consumer is
	 * the dp holder. */
	rv_recv *rq;
	ibv_sge *rq_sge; /* rq_mask + 1 rows of cap.max_recv_sge */
	uint32_t rq_mask;
	std::atomic<uint32_t> rq_head{0}, rq_tail{0};
	rte_spinlock_t rq_lock;
	/* Send queue: sends the port could not take at once, in order, each
	 * with its payload already copied into an mbuf (the program may reuse
	 * an inline buffer at once). Completed as the port takes them; full
	 * at cap.max_send_wr: then ibv_post_send says ENOMEM. (dp) */
	struct pending {
		send_wr s;
		uint64_t wr_id;
		bool signaled;
	};
	pending *sq;
	uint32_t sq_mask;
	uint32_t sq_head = 0, sq_tail = 0;
	std::vector<ibv_gid> mcast; /* attached groups (dp) */
};

struct rv_ah {
	ibv_ah ah; /* must be first */
	rv_device *dev;
	ah_handle h;
	bool loop; /* to one of the device's own GIDs: delivered in software */
};

/* Datagrams and completions the device dropped, by reason (counted under
 * dp; printed at exit with RDGRAM_VERBS_STATS=1). */
#define RV_DROPS(X)                                                                                    \
	X(rx_no_qp, "received for a QP this process does not have (destroyed, or never created)")        \
	X(rx_qp_not_ready, "received for a QP not yet in RTR (or in RESET/ERR)")                          \
	X(rx_no_recv_wqe, "received while the QP had no receive posted (UD drops, IBA 9.8.3.1)")          \
	X(rx_len_err, "receive buffers shorter than GRH + payload (IBV_WC_LOC_LEN_ERR)")                  \
	X(cq_overrun, "completions lost to a full CQ")                                                    \
	X(tx_sq_full, "post_send refused: max_send_wr sends waiting for the port (ENOMEM)")             \
	X(tx_no_mbuf, "post_send refused: no mbuf to hold a send the port could not take (ENOMEM)")    \
	X(tx_lkey_err, "send SGE outside any MR of its lkey (IBV_WC_LOC_PROT_ERR)")

struct rv_drops {
#define RV_FIELD(n, d) uint64_t n = 0;
	RV_DROPS(RV_FIELD)
#undef RV_FIELD
};

inline constexpr unsigned rv_max_mrs = 4096;
/* The GID table's length a port reports, when it has fewer GIDs. */
inline constexpr size_t rv_gid_tbl_len = 16;

/* A soft device: the soft kind's rv_ibdev. */
struct rv_device {
	rv_ibdev ib; /* must be first: the ibv_device */
	rv_port_config cfg;
	/* A provider device (kind mlx5): the provider and its device. */
	rv_provider_dev *prov = nullptr;
	/* Its NIC (kind mlx5): the poll thread that executes its queues. */
	m5::nic *nic = nullptr;
	/* The DPDK port and the soft device on it (soft_port.h); its queue is
	 * q below, next to the data path's other state. */
	soft::port port;
	rte_ether_addr mac{};
	std::vector<wire::gid> gids; /* index = sgid_index; 0 is link-local */
	uint64_t guid_be = 0;        /* EUI-64 of the MAC, network order */
	ibv_mtu mtu_enum = IBV_MTU_1024;

	soft::soft_device &dev = port.device();
	soft::soft_queue q;
	bool queue_up = false;
	rte_spinlock_t dp; /* the soft queue, qps[], CQ production */
	std::mutex ctl;    /* soft_device control calls, qpn, mrs[] */
	rv_qp *qps[soft::soft_queue::max_qps]{};
	uint32_t next_qpn_serial = 2;
	rv_mr *mrs[rv_max_mrs]{};
	uint32_t mr_serial = 1;
	/* Activity, seen by the service thread as a change between two of its
	 * rounds (counters: no TSC read on the data path). */
	std::atomic<uint64_t> rx_polls{0};  /* receive bursts (progress) */
	std::atomic<uint64_t> app_calls{0}; /* a program's posts and polls */
	uint64_t seen_rx = 0, seen_app = 0; /* the service thread's last look */
	uint64_t rx_seen_at = 0, app_seen_at = 0; /* TSC when they last changed */
	uint64_t ctl_seen = 0; /* rx_to_control at the last receive burst (dp) */
	std::atomic<uint32_t> backlog{0};   /* sends in the QPs' send queues */
	std::atomic<bool> tx_staged{false}; /* frames in the soft queue's stash */
	std::atomic<int> armed_cqs{0};      /* CQs armed with a channel */
	std::atomic<int> ah_waiters{0};     /* ibv_create_ah waiting for ARP/ND */
	std::atomic<int> contexts{0};
	rv_drops drops;
	/* Channel events raised while dp was held, posted by dp_unlock. */
	rv_cq *notify[256];
	unsigned nnotify = 0;
	std::atomic<int> events_in_flight{0};
	uint8_t gather[4096 + 64]; /* multi-SGE sends are gathered here (dp) */
};

inline rv_device *dev_of(ibv_context *c) { return reinterpret_cast<rv_device *>(ctx_of(c)->dev); }

/* rv_soft_ops.cc: the soft kind's operations. */
extern const rv_ops soft_ops;

/* rv_device.cc: the process's devices (started once, by the first
 * ibv_get_device_list). */
struct rv_process {
	std::mutex mu;
	bool started = false;
	int start_errno = 0;
	std::vector<rv_device *> devs;
};
rv_process &process();
/* Starts the EAL and opens every configured port (once); 0 or an errno. */
int start();

/* The data-path lock. Taken by spinning a little, then yielding the CPU:
 * a program's threads and the service thread may share one CPU, and a
 * holder preempted there would be spun against for a whole time slice.
 * dp_unlock raises the channel events queued while it was held (queue_event)
 * after releasing it: a thread woken by an event must not find dp held by
 * the thread that woke it. (Any thread.) */
void dp_lock(rv_device &d);
bool dp_trylock(rv_device &d);
void dp_unlock(rv_device &d);
/* rv_service.cc: the service thread's loop (it returns when
 * service_stop() is called) and the stop. */
void service_run();
void service_stop();
/* Wakes the service thread for work that cannot wait for its round: a
 * frame for the control thread, an AH waiting for its neighbour. (Any
 * thread; a system call: control path only.) */
void service_wake();
/* service_wake, but only when the service thread sleeps a long round (a
 * program was polling): a CQ armed or frames staged must not wait for
 * it. One relaxed load otherwise. (Any thread.) */
void service_kick();
/* Counts one event of a counter only its owner threads move; a plain
 * load and store (a lost increment between two racing threads costs
 * nothing: any change is activity). */
inline void bump(std::atomic<uint64_t> &c)
{
	c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
/* rv_device.cc: the attributes the query verbs report. */
void device_attr(const rv_device &d, ibv_device_attr &a);
void port_attr(const rv_device &d, ibv_port_attr &a);

/* rv_datapath.cc: the data-path entries of soft_ops. */
int post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad);
int post_recv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad);
int poll_cq(ibv_cq *cq, int n, ibv_wc *wc);
int req_notify_cq(ibv_cq *cq, int solicited_only);
/* One receive burst of d's port, sorted into CQs. (dp held.) */
unsigned progress(rv_device &d);
/* Drops qp's waiting sends: with IBV_WC_WR_FLUSH_ERR completions when
 * complete (a QP moved to ERR), silently otherwise (RESET, destroy); their
 * mbufs go back. (dp held.) */
void flush_sends(rv_qp &qp, bool complete);
/* Completes every posted receive of qp with IBV_WC_WR_FLUSH_ERR (a QP in
 * ERR, IBA 10.3.1). (dp held.) */
void flush_recvs(rv_qp &qp);

} // namespace rdgram::rv

#endif
