/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft queue state: one poll thread's queue on a soft port, its
 * QPs, multicast attachments, port facts and counters. The data path is in
 * soft_tx.h (send) and soft_rx.h (receive, and the control thread's frames
 * out); the set-up (attach, QPs, multicast attachment) is out of line in
 * soft_queue.cc; soft_datapath.h includes them all.
 */
#ifndef RDGRAM_SOFT_QUEUE_H
#define RDGRAM_SOFT_QUEUE_H

#include <cstdint>

#include <rte_common.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "rdgram/ah_table.h"
#include "rdgram/crc32.h"
#include "rdgram/crc32_choose.h"
#include "rdgram/dest_cache.h"
#include "rdgram/stats.h"
#include "rdgram/ud.h"
#include "rdgram/wire.h"
#include "soft_av.h"
#include "soft_counters.h"
#include "soft_steer.h"

namespace rdgram::soft {

/* A UD QP as the data path sees it. */
struct soft_qp {
	uint32_t qpn;
	uint32_t qkey;
	uint32_t psn; /* next send PSN, 24 bits */
	/* May hold (and so send and receive) a controlled Q_Key, IBA 10.2.5. */
	bool privileged;
};

/* IBA 10.2.5: Q_Keys with the most significant bit set are "controlled";
 * a consumer cannot put one in a send WR (the bit there means "use the QP
 * context's Q_Key", ibv_post_send(3)), and only a privileged consumer may
 * have one in its QP context. */
inline constexpr uint32_t qkey_controlled = 0x80000000u;

/* Port facts the data path checks against (copied per queue). */
struct soft_port_view {
	uint16_t pkey = 0xffff;
	uint32_t mtu = 4096; /* path MTU: largest UD payload */
	uint8_t n_v4 = 0, n_v6 = 0;
	rte_be32_t v4[4]{};
	uint8_t v6[4][16]{};
	/* 802.1Q (soft_port_params::vlan): 0, untagged. */
	uint16_t vlan = 0;
	/* The port inserts the tag itself (RTE_ETH_TX_OFFLOAD_VLAN_INSERT,
	 * enabled at open): TX sets RTE_MBUF_F_TX_VLAN and vlan_tci instead of
	 * writing the 4 bytes. */
	bool vlan_tx_offload = false;
};

/* Pseudo-LRH + masked field values of the RoCEv2 ICRC (Annex A17.3.3). */
inline constexpr uint64_t icrc_ones64 = ~0ull;

/*
 * One poll thread's queue on a soft port: the ud_driver policy.
 * (NOT multi-thread safe: owned by one poll thread.)
 */
class soft_queue {
public:
	static constexpr unsigned max_burst = 32;
	static constexpr unsigned max_qps = 8;
	static constexpr unsigned tx_stash_size = 2 * max_burst;
	static constexpr unsigned max_mcast = 8;
	/* IBA 10.5.2.1 / ibv_post_send(3): the DQPN of every multicast send. */
	static constexpr uint32_t mcast_qpn = 0xffffff;

	soft_queue() = default;

	/* Setup (control path, soft_queue.cc). ctl_rx: the device's
	 * slow-path ring (multi-producer, the control thread consumes):
	 * ARP/ND frames go there; nullptr: they are dropped as rx_not_ip /
	 * rx_not_udp. ctl_tx: frames the control thread wants sent (single
	 * producer and consumer: only the poll thread of queue 0 gets it);
	 * nullptr: none. */
	void attach(uint16_t port, uint16_t queue, rte_mempool *mp,
		    const ah_table<soft_av> *ahs, const soft_port_view &view,
		    rte_ring *ctl_rx = nullptr, rte_ring *ctl_tx = nullptr, int socket = SOCKET_ID_ANY);
	/* The ICRC kernels (crc32.h), per frame length: the process's plan
	 * (crc32_choose.h: the fastest this CPU runs at each size class,
	 * measured once; RDGRAM_CPU_MAX forces one), taken at attach. Tests
	 * set one kernel for every length (it must be one the CPU runs:
	 * crc32_select(cap)). (Setup.) */
	const crc32_plan &crc_plan() const { return crc_plan_; }
	/* The kernel of a CRC over len bytes. */
	crc32_kernel crc_for(uint32_t len) const { return likely(crc_uniform_) ? crc_ : crc_plan_.for_len(len); }
	void set_crc_kernel(crc32_kernel k);
	void set_crc_plan(const crc32_plan &p);
	/* Adds a QP with Q_Key qkey in its context (ibv_modify_qp(3) with
	 * IBV_QP_QKEY). A controlled Q_Key needs privileged: EPERM otherwise,
	 * as Linux refuses a controlled Q_Key to a process without
	 * CAP_NET_RAW. The two-argument form is the trusted set-up path (the
	 * process's own configuration, as before: rdgram-perf and rdgram-fwd
	 * refuse controlled Q_Keys in their configs); code that sets up QPs for
	 * a less trusted party passes privileged = false. With steering, the
	 * QPN becomes this queue's on the whole port (soft_steer::claim). 0,
	 * ENOSPC, EPERM, or EEXIST: another queue of the port has qpn. */
	int add_qp(uint32_t qpn, uint32_t qkey, bool privileged);
	int add_qp(uint32_t qpn, uint32_t qkey) { return add_qp(qpn, qkey, true); }
	/* Removes QP qpn (ibv_destroy_qp(3), or ibv_modify_qp(3) to RESET):
	 * its datagrams are rx_unknown_qpn from then on, its multicast
	 * attachments go, and the QPs after it move down one index (qp(i)
	 * and select_send_qp indices change; the send QP index is reset to 0
	 * when it no longer exists). (The owning poll thread, or while it
	 * does not run.) 0; EINVAL: qpn is not a QP of this queue. */
	int remove_qp(uint32_t qpn);
	/* Multicast attachment, ibv_attach_mcast(3)/ibv_detach_mcast(3):
	 * QP qpn of this queue receives RoCEv2 datagrams sent to group g (its
	 * IPv4-mapped or IPv6 multicast GID) with the multicast DQPN 0xFFFFFF.
	 * Every QP attached to a group gets its own copy, on this queue and,
	 * with steering (soft_steer.h), on the port's other queues: the
	 * queue that receives the frame copies it for the others
	 * (rx_group_copies; a copy without an mbuf is rx_group_copy_failed).
	 * Attaching is the data-path half of a join: soft_device::join_mcast
	 * sends the IGMP/MLD report. (The owning poll thread, or before it
	 * runs.) attach: 0 (also when already attached to that QP); EINVAL: g
	 * is not a multicast GID or qpn is not a QP of this queue; ENOMEM:
	 * max_mcast attachments on this queue, or the port's group table is
	 * full. detach: 0; EINVAL: not a multicast GID, or not attached to
	 * qpn. */
	int attach_mcast(uint32_t qpn, const wire::gid &g);
	int detach_mcast(uint32_t qpn, const wire::gid &g);
	unsigned nb_mcast() const { return nmc_; }
	/* This queue's QPs attached to g. */
	unsigned members_of(const wire::gid &g) const;
	soft_qp *qp(unsigned i) { return i < nqp_ ? &qps_[i] : nullptr; }
	unsigned nb_qps() const { return nqp_; }
	/* Which local QP sends (its QPN goes in DETH); index into qps. */
	void select_send_qp(unsigned i) { sq_ = i; }
	const soft_counters &counters() const { return ctr_; }
	uint16_t port_id() const { return port_; }
	rte_mempool *mempool() const { return mp_; }

	/* Steering between the port's queues (soft_device::create_queue when
	 * the port has more than one; nullptr: this queue receives only what
	 * the port puts on it). (Setup, before any QP is added.) */
	void set_steer(soft_steer *s) { steer_ = s; }
	const soft_steer *steer() const { return steer_; }

	/* Built packets the port has not taken yet. */
	unsigned tx_pending() const { return nstash_; }
	/* Teardown (soft_device::destroy_queue): frees them, and the group
	 * copies still waiting for this queue's next rx_burst, and forgets
	 * the port (mempool() is nullptr until the next attach). Returns how
	 * many frames it freed. (soft_queue.cc) */
	unsigned detach();
	uint16_t queue_id() const { return queue_; }

	/* A hint, no effect on what is sent: starts loading the AV of an AH
	 * the caller will send to soon (its next burst's destinations, while
	 * it posts this burst). With many destinations in an order the
	 * hardware prefetcher cannot follow, every AV is a cache and TLB miss;
	 * asked for one burst ahead, the miss overlaps a whole burst's build
	 * instead of the few frames before its first use. A stale or
	 * out-of-range handle is ignored. (The owning poll thread.) */
	void prefetch_ah(ah_handle h) const { ahs_.prefetch(h); }

	/* Receive buffers come from the port's mempool: nothing to post. */
	void post_recvs() {}

	/* Pushes built packets still waiting for room in the port queue. */
	void tx_flush()
	{
		if (nstash_ != 0)
			push_stash();
	}

	/* Accepts up to n send WRs; returns how many it took (the caller keeps
	 * the rest). An accepted WR that cannot be sent (stale AH, payload over
	 * the MTU, unusable mbuf) is dropped and counted, its mbuf freed.
	 * (soft_tx.h) */
	uint16_t tx_burst(send_wr *wrs, uint16_t n);
	/* tx_burst without handing the frames to the port: they wait in the
	 * stash for tx_flush, or for a later tx_burst/tx_stage that needs the
	 * room (then the stash goes to the port first). For a caller that
	 * takes one WR at a time (a verbs ibv_post_send per datagram) and
	 * flushes when it polls: one port burst for many sends, as a NIC's
	 * doorbell batching. (soft_tx.h) */
	uint16_t tx_stage(send_wr *wrs, uint16_t n);

	/* Receives up to n completions. Every frame read from the port is
	 * either delivered, handed to the control thread, handed to the queue
	 * that owns its QP (steering), or dropped and counted. Frames other
	 * queues handed here, and this queue's own group copies, are taken
	 * before the port. Also sends what the control thread queued for this
	 * port (queue 0 only; one ring-empty test per call otherwise).
	 * (soft_rx.h) */
	uint16_t rx_burst(recv_wc *wcs, uint16_t n);

	/* (NOT multi-thread safe: the owning poll thread.) One send from the
	 * selected send QP to an address of this port (a verbs program
	 * sending to its own GID, which a NIC loops back): the frame is
	 * built as tx_burst builds it, into an mbuf from the queue's pool,
	 * and received as rx_burst receives a frame from the port, through
	 * the same checks, without the port. wr's payload is inline
	 * (send_inline) or its mbuf, which is the queue's from then on. true:
	 * delivered into wc, whose mbuf is the caller's. false: not
	 * delivered, and counted: no mbuf (tx_no_mbuf), a WR that cannot be
	 * sent, a frame rx_burst would drop; or the frame went where
	 * rx_burst would hand it (the control thread, a queue that owns the
	 * destination QP). Either way every mbuf is accounted for.
	 * (soft_datapath.h) */
	bool tx_loopback(const send_wr &wr, recv_wc &wc);

	/* EFA receive semantics (soft_config::report_ahn): wc.slid = our AH
	 * number for the sender's GID, 0xFFFF without one. (Setup.) */
	void report_ahn(const dest_cache *by_gid);

	/* soft_tx.h: the steps of tx_burst, public for the tests. */
	/* An mbuf straight from the pool (rte_mempool_get_bulk), made a
	 * one-segment TX packet of len bytes. refcnt 1, nb_segs 1 and next
	 * NULL are the pool's invariants (rte_mbuf_raw_alloc); of what
	 * rte_pktmbuf_reset writes, only the fields a TX path reads are set,
	 * all in the mbuf's first cache line (reset also writes next and
	 * tx_offload in the second; with no offload flag no PMD reads them). */
	static void raw_tx_init(rte_mbuf *m, uint16_t len);
	/* A packet between the TX passes. */
	struct tx_pending_pkt {
		rte_mbuf *m;
		uint8_t *p;          /* frame start */
		const soft_av *av;
		uint32_t icrc_off;   /* from p */
	};
	/* What build_masked reads from the queue and its QP, copied into a
	 * local for one burst. The packet is written through byte pointers,
	 * which may alias any member: read per packet from the members, these
	 * were reloaded after every store. (Counters of the rare drop reasons
	 * stay in ctr_.) */
	struct tx_state {
		ah_table<soft_av>::view ahs;
		uint32_t mtu;
		uint32_t psn, qpn, qkey;
		rte_be16_t pkey_be;
		bool privileged;
		uint8_t tag_len; /* headroom vlan_tag takes: 4 on a VLAN port without insert offload */
		uint64_t pkts, bytes;
	};
	tx_state tx_state_of(const soft_qp &sq) const;
	void end_tx(const tx_state &st, soft_qp &sq);
	/* Builds one packet (all three passes): tx_loopback's, and the
	 * tests'. m is the frame's buffer (inline) or wr's mbuf; it stays
	 * the caller's when this returns false (dropped and counted). */
	bool build(const send_wr &wr, soft_qp &sq, rte_mbuf *m);
	bool build_masked(const send_wr &wr, tx_state &st, rte_mbuf *m, tx_pending_pkt &t);
	template <crc32_kernel K> static void store_icrc(const tx_pending_pkt &t);
	static void unmask(const tx_pending_pkt &t);
	/* A VLAN port's tag on a built frame: VLAN ID and, as PCP, the AH's
	 * SL; written in front of the ethertype, or left to the port's
	 * insert offload. (soft_tx.h) */
	void vlan_tag(const tx_pending_pkt &t) const;

	/* soft_rx.h: the steps of rx_burst, public for the tests. */
	/* true: delivered into wc. false: not delivered; m is the caller's to
	 * free, except when it went elsewhere (ARP/ND to the control thread,
	 * a frame to the queue that owns its QP, a group's frame to another
	 * queue with members), which handed_to_control() then says once.
	 * tag: 0 for a frame from the port; what a hand-off put in its mbuf's
	 * hash.usr otherwise (soft_steer.h, handoff_tag). */
	bool parse(rte_mbuf *m, recv_wc &wc, uint32_t tag = 0);
	/* The 802.1Q part of parse, for a frame that is tagged, or was
	 * stripped by the PMD, or arrives on a VLAN port: a tag in the frame
	 * is taken out (the frame then looks as if the PMD had stripped it:
	 * RTE_MBUF_F_RX_VLAN_STRIPPED, vlan_tci), the VLAN checked against the
	 * port's, *pcp set. false: dropped and counted. */
	bool vlan_rx(rte_mbuf *m, uint8_t *&f, uint32_t &flen, uint16_t &et, uint8_t *pcp);
	bool handed_to_control()
	{
		bool t = taken_;
		taken_ = false;
		return t;
	}
	/* The RoCEv2 ICRC of a frame whose masked fields are already all ones:
	 * CRC-32 over [l3 - 8, end of pad). Stored little-endian after the pad. */
	static uint32_t icrc_of(crc32_kernel k, const uint8_t *l3_minus8, uint32_t len);
	/* Verifies the ICRC of a frame in place with kernel k (default: the
	 * process's best, crc32_select); restores every byte. */
	static bool icrc_ok(uint8_t *frame, bool v4, uint32_t l3_off, uint32_t icrc_off,
			    crc32_kernel k = crc32_select());

private:
	/* soft_tx.h */
	/* Hands the stash to the port; what it does not take stays, in order. */
	void push_stash();

	/* soft_rx.h */
	/* Neighbour frames: off the RoCE path (only reached from branches that
	 * drop), so kept out of line. */
	inline __rte_noinline bool to_control(rte_mbuf *m);
	inline __rte_noinline void tx_control();
	/* ICMPv6 Neighbor Solicitation or Advertisement (RFC 4861), from the
	 * IPv6 header's next header and the ICMPv6 type; the control thread
	 * validates the rest. */
	static bool is_nd(const uint8_t *f, uint32_t flen);
	/* One bulk lookup for the burst's senders. */
	inline __rte_noinline void set_ahns(recv_wc *wcs, uint16_t n);
	/* A frame to a group (dst: 4 or 16 bytes): copies for the group's
	 * other members (this queue's, and other queues' through steering),
	 * then the QP index of the member that gets m, or -1 (m went
	 * elsewhere or is dropped: taken_ or a counter says which). */
	inline __rte_noinline int group_route(rte_mbuf *m, bool v4, const uint8_t *dst, uint32_t tag);
	/* A unicast frame for a QP of another queue: staged for the owner's
	 * ring (flushed once per rx_burst). */
	inline void hand_off(rte_mbuf *m, uint16_t owner);
	inline __rte_noinline void flush_handoff();
	/* Local group copies waiting for the next rx_burst (in again_). */
	inline void again(rte_mbuf *m);

	uint16_t port_ = 0, queue_ = 0;
	int guard_ = -1; /* burst_guard slot: net_memif ports only */
	const dest_cache *ahn_ = nullptr; /* report_ahn: sender GID -> our AH */
	bool taken_ = false; /* parse handed its mbuf on (control thread, other queue) */
	soft_steer *steer_ = nullptr; /* steering between the port's queues */
	crc32_plan crc_plan_ = crc32_chosen(); /* the ICRC kernels (attach, set_crc_plan) */
	crc32_kernel crc_ = crc_plan_.kernel[0]; /* every length's when crc_uniform_ */
	bool crc_uniform_ = crc_plan_.uniform();
	unsigned sq_ = 0;
	unsigned nqp_ = 0;
	unsigned nstash_ = 0;
	rte_mempool *mp_ = nullptr;
	ah_table<soft_av>::view ahs_{};
	rte_ring *ctl_rx_ = nullptr; /* slow path: frames to the control thread */
	rte_ring *ctl_tx_ = nullptr; /* frames from the control thread (queue 0) */
	soft_qp qps_[max_qps]{};
	/* Attached multicast groups and the QP (index) each goes to. */
	struct mcast_member {
		wire::gid gid;
		unsigned qi;
	};
	unsigned nmc_ = 0;
	mcast_member mc_[max_mcast]{};
	soft_port_view view_{};
	soft_counters ctr_{};
	rte_mbuf *stash_[tx_stash_size];
	/* Frames for other queues, staged during one rx_burst. */
	unsigned nho_ = 0;
	rte_mbuf *ho_[max_burst];
	uint16_t hoq_[max_burst];
	/* Group copies for this queue's second and later members. */
	unsigned nagain_ = 0;
	rte_mbuf *again_[max_burst];
};

} // namespace rdgram::soft

#endif
