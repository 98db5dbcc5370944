/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft data path: RoCEv2 UD in software over one DPDK ethdev queue.
 * Everything a poll thread runs per packet is in this file, inline.
 *
 * TX copies the AH's prebuilt Eth/IP/UDP template (the software twin of the
 * mlx5 AV), writes BTH/DETH/[ImmDt], and computes the ICRC in place: the
 * fields the RoCEv2 annex masks (the 8 pseudo-LRH bytes before the IP header,
 * IPv4 TOS/TTL/checksum or IPv6 traffic class/flow label/hop limit, the UDP
 * checksum and BTH byte 4) are first written as all ones, the CRC runs over
 * the contiguous bytes (crc32.h), then the real values go in.
 *
 * RX checks, in order, every field a RoCE HCA checks for a UD QP and counts
 * each drop under its reason (soft_counters.h). A delivered packet is rearranged in
 * its own mbuf into verbs' layout: 40-byte GRH area, then the payload.
 *
 * Neighbour frames (ARP, and the ICMPv6 Neighbor Solicitation/Advertisement
 * of ND) are not the poll thread's business: the branches that would drop
 * them (not IP, not UDP) hand the mbuf to the control thread over the
 * device's slow-path ring instead (soft_neigh.h). The control thread's own
 * frames come back the other way, on queue 0's control-TX ring, which
 * rx_burst empties onto the port: the control thread never calls
 * rte_eth_tx_burst on a queue a poll thread owns.
 */
#ifndef RDGRAM_SOFT_DATAPATH_H
#define RDGRAM_SOFT_DATAPATH_H

#include <cstring>

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_memcpy.h>
#include <rte_net_crc.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#include "rdgram/ah_table.h"
#include "rdgram/burst_guard.h"
#include "rdgram/crc32.h"
#include "rdgram/dest_cache.h"
#include "rdgram/stats.h"
#include "rdgram/tsan.h"
#include "rdgram/ud.h"
#include "rdgram/wire.h"
#include "soft_counters.h"

namespace rdgram::soft {

/* The soft AV: the Eth/IP/UDP headers of every packet to one destination,
 * with lengths and checksums left zero, plus what TX needs to finish them.
 * 60 bytes, so that with its generation it fills one 64-byte line of the
 * AH table (the 48-byte mlx5 AV's counterpart). For IPv6 the header stops
 * after the UDP destination port: the UDP length and checksum are written
 * per packet anyway. In the table the AV starts its 64-byte slot, so the
 * first 8 bytes (av_mac_word) are an aligned word. */
inline constexpr size_t av_hdr_len = wire::addr_len_v6 - 4;
struct alignas(4) soft_av {
	uint8_t hdr[av_hdr_len]; /* 58: Eth/IPv6/UDP ports, or Eth/IPv4/UDP + spare */
	uint8_t l3;              /* 4 or 6 */
	uint8_t addr_len;        /* 42 or 62 */
};
static_assert(sizeof(soft_av) == 60);
/* For IPv4 the spare bytes after the 42 header bytes hold the one's
 * complement partial sum of the IPv4 header without its total length, so
 * TX finishes the checksum with one add. */
inline constexpr size_t av_v4_csum_off = 44;

/* The AV's first 8 bytes as one word: the destination MAC and the first two
 * bytes of the source MAC. The control thread swaps the destination MAC of
 * a live AV with set_av_mac (one atomic store), so a poll thread copying
 * the AV sees the old MAC or the new one, never a mix. */
/* The AV starts a 64-byte table slot, so the word is 8-byte aligned. (With
 * clang, whose atomics go through libatomic for an alignas(4) type, the
 * fuzz build links libatomic; __builtin_assume_aligned would avoid that but
 * crashes clang 14's -fsanitize=alignment code generation.) */
inline uint64_t av_mac_word(const soft_av &av)
{
	return __atomic_load_n(reinterpret_cast<const uint64_t *>(av.hdr), __ATOMIC_RELAXED);
}
inline void set_av_mac(soft_av &av, const rte_ether_addr &mac)
{
	uint64_t v = av_mac_word(av);
	memcpy(&v, mac.addr_bytes, 6);
	__atomic_store_n(reinterpret_cast<uint64_t *>(av.hdr), v, __ATOMIC_RELAXED);
}

inline uint16_t fold_csum(uint32_t s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return uint16_t(~s);
}

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
};

/* Pseudo-LRH + masked field values of the RoCEv2 ICRC (Annex A17.3.3). */
inline constexpr uint64_t icrc_ones64 = ~0ull;

/* P_Key match, IBA 10.9.3: same 15-bit partition, at least one full member. */
inline bool pkey_match(uint16_t a, uint16_t b)
{
	return ((a ^ b) & 0x7fff) == 0 && ((a | b) & 0x8000) != 0;
}

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

	/* Setup (control path). ctl_rx: the device's slow-path ring (multi-
	 * producer, the control thread consumes): ARP/ND frames go there;
	 * nullptr: they are dropped as rx_not_ip / rx_not_udp. ctl_tx: frames
	 * the control thread wants sent (single producer and consumer: only the
	 * poll thread of queue 0 gets it); nullptr: none. */
	void attach(uint16_t port, uint16_t queue, rte_mempool *mp,
		    const ah_table<soft_av> *ahs, const soft_port_view &view,
		    rte_ring *ctl_rx = nullptr, rte_ring *ctl_tx = nullptr, int socket = SOCKET_ID_ANY)
	{
		port_ = port;
		queue_ = queue;
		guard_ = burst_guard::slot_for(port, queue);
		mp_ = mp;
		/* The AV replica on the poll thread's node: two words, so the TX
		 * lookup does not go through the table object. */
		ahs_ = ahs != nullptr ? ahs->for_socket(socket) : ah_table<soft_av>::view{};
		view_ = view;
		ctl_rx_ = ctl_rx;
		ctl_tx_ = ctl_tx;
		crc_ = crc32_select();
	}
	/* The ICRC kernel (crc32.h), chosen at attach: the fastest this CPU
	 * runs under RDGRAM_CPU_MAX. Tests set another one (it must be one
	 * the CPU runs: crc32_select(cap)). (Setup.) */
	crc32_kernel crc_kernel() const { return crc_; }
	void set_crc_kernel(crc32_kernel k) { crc_ = k; }
	/* Adds a QP with Q_Key qkey in its context (ibv_modify_qp(3) with
	 * IBV_QP_QKEY). A controlled Q_Key needs privileged: EPERM otherwise,
	 * as Linux refuses a controlled Q_Key to a process without
	 * CAP_NET_RAW. The two-argument form is the trusted set-up path (the
	 * process's own configuration, as before: rdgram-perf and rdgram-fwd
	 * refuse controlled Q_Keys in their configs); code that sets up QPs for
	 * a less trusted party passes privileged = false. 0, ENOSPC or EPERM. */
	int add_qp(uint32_t qpn, uint32_t qkey, bool privileged)
	{
		if (nqp_ == max_qps)
			return ENOSPC;
		if ((qkey & qkey_controlled) && !privileged)
			return EPERM;
		qps_[nqp_++] = soft_qp{qpn, qkey, 0, privileged};
		return 0;
	}
	int add_qp(uint32_t qpn, uint32_t qkey) { return add_qp(qpn, qkey, true); }
	/* Multicast attachment, ibv_attach_mcast(3)/ibv_detach_mcast(3):
	 * QP qpn of this queue receives RoCEv2 datagrams sent to group g (its
	 * IPv4-mapped or IPv6 multicast GID) with the multicast DQPN 0xFFFFFF.
	 * A group is delivered to ONE QP per queue: the first attached one (a
	 * later attach of the same group to another QP of the queue is
	 * refused with EBUSY rather than silently never delivered); several
	 * receivers of one group use separate queues or ports. Attaching is
	 * the data-path half of a join: soft_device::join_mcast sends the
	 * IGMP/MLD report. (The owning poll thread, or before it runs.)
	 * attach: 0 (also when already attached to that QP); EINVAL: g is
	 * not a multicast GID or qpn is not a QP of this queue; EBUSY: the
	 * group is attached to another QP here; ENOMEM: max_mcast groups.
	 * detach: 0; EINVAL: not a multicast GID, or not attached to qpn. */
	int attach_mcast(uint32_t qpn, const wire::gid &g)
	{
		if (!g.is_multicast())
			return EINVAL;
		unsigned qi = 0;
		while (qi < nqp_ && qps_[qi].qpn != qpn)
			qi++;
		if (qi == nqp_)
			return EINVAL;
		for (unsigned i = 0; i < nmc_; i++)
			if (memcmp(mc_[i].gid.raw, g.raw, 16) == 0)
				return mc_[i].qi == qi ? 0 : EBUSY;
		if (nmc_ == max_mcast)
			return ENOMEM;
		mc_[nmc_++] = mcast_member{g, qi};
		return 0;
	}
	int detach_mcast(uint32_t qpn, const wire::gid &g)
	{
		if (!g.is_multicast())
			return EINVAL;
		for (unsigned i = 0; i < nmc_; i++)
			if (memcmp(mc_[i].gid.raw, g.raw, 16) == 0 && qps_[mc_[i].qi].qpn == qpn) {
				mc_[i] = mc_[--nmc_];
				return 0;
			}
		return EINVAL;
	}
	unsigned nb_mcast() const { return nmc_; }
	soft_qp *qp(unsigned i) { return i < nqp_ ? &qps_[i] : nullptr; }
	unsigned nb_qps() const { return nqp_; }
	/* Which local QP sends (its QPN goes in DETH); index into qps. */
	void select_send_qp(unsigned i) { sq_ = i; }
	const soft_counters &counters() const { return ctr_; }
	uint16_t port_id() const { return port_; }
	rte_mempool *mempool() const { return mp_; }

	/* Built packets the port has not taken yet. */
	unsigned tx_pending() const { return nstash_; }
	/* Teardown (soft_device::destroy_queue): frees them and forgets the
	 * port (mempool() is nullptr until the next attach). Returns how
	 * many frames it freed. */
	unsigned detach()
	{
		const unsigned n = nstash_;
		rte_pktmbuf_free_bulk(stash_, n);
		nstash_ = 0;
		mp_ = nullptr;
		return n;
	}
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
	 * the MTU, unusable mbuf) is dropped and counted, its mbuf freed. */
	uint16_t tx_burst(send_wr *wrs, uint16_t n)
	{
		/* Leftovers go out with this burst at the end; push them first only
		 * when they leave no room for a whole burst. */
		if (nstash_ > tx_stash_size - max_burst)
			push_stash();
		unsigned room = tx_stash_size - nstash_;
		if (n > room)
			n = uint16_t(room);
		if (n > max_burst)
			n = max_burst;
		if (n == 0)
			return 0;
		/* Every AV of the burst on its way before the first is read: the
		 * misses of many destinations overlap (docs/PERFORMANCE.md, "Send
		 * rate as destinations grow"). */
		for (unsigned i = 0; i < n; i++)
			ahs_.prefetch(wrs[i].ah);

		/* Buffers for inline sends, in one bulk get of raw mbufs:
		 * build_masked sets the fields a TX path reads (raw_tx_init). */
		rte_mbuf *fresh[max_burst];
		unsigned ninl = 0;
		for (unsigned i = 0; i < n; i++)
			ninl += (wrs[i].flags & send_inline) != 0;
		if (ninl != 0 && rte_mempool_get_bulk(mp_, reinterpret_cast<void **>(fresh), ninl) != 0) {
			ctr_.tx_no_mbuf++;
			/* Take the WRs before the first inline one, if any. */
			unsigned k = 0;
			while (k < n && !(wrs[k].flags & send_inline))
				k++;
			n = uint16_t(k);
			ninl = 0;
		}

		/* Three passes over the burst: write every packet with its masked
		 * fields, then every ICRC, then the real field values. The CRC
		 * loads then read headers whose stores have left the store buffer
		 * (no store-forwarding stalls) and independent CRCs overlap. */
		soft_qp &sq = qps_[sq_];
		tx_state st = tx_state_of(sq);
		unsigned used = 0;
		tx_pending_pkt pend[max_burst];
		unsigned np = 0;
		for (unsigned i = 0; i < n; i++) {
			send_wr &wr = wrs[i];
			rte_mbuf *m = (wr.flags & send_inline) ? fresh[used++] : wr.mbuf;
			if (likely(build_masked(wr, st, m, pend[np])))
				np++;
			else
				rte_pktmbuf_free(m);
		}
		end_tx(st, sq);
		/* The kernel chosen once per burst: a constant in the loop. */
		crc32_with(crc_, [&](auto k) {
			for (unsigned i = 0; i < np; i++)
				store_icrc<decltype(k)::value>(pend[i]);
		});
		for (unsigned i = 0; i < np; i++) {
			unmask(pend[i]);
			stash_[nstash_++] = pend[i].m;
		}

		push_stash();
		return n;
	}

	/* Receives up to n completions. Every frame read from the port is
	 * either delivered, handed to the control thread, or dropped and
	 * counted. Also sends what the control thread queued for this port
	 * (queue 0 only; one ring-empty test per call otherwise). */
	uint16_t rx_burst(recv_wc *wcs, uint16_t n)
	{
		if (ctl_tx_ != nullptr && unlikely(!rte_ring_empty(ctl_tx_)))
			tx_control();
		if (n > max_burst)
			n = max_burst;
		rte_mbuf *pkts[max_burst];
		burst_guard::enter(guard_);
		uint16_t nb = rte_eth_rx_burst(port_, queue_, pkts, n);
		burst_guard::leave(guard_);
		if (RDGRAM_TSAN)
			for (uint16_t i = 0; i < nb; i++)
				RDGRAM_TSAN_ACQUIRE(pkts[i]);
		uint16_t out = 0;
		for (uint16_t i = 0; i < nb; i++) {
			if (i + 1 < nb)
				rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
			if (likely(parse(pkts[i], wcs[out])))
				out++;
			else if (likely(!to_ctl_))
				rte_pktmbuf_free(pkts[i]);
			else
				to_ctl_ = false; /* the control thread owns it now */
		}
		if (ahn_ != nullptr && out != 0)
			set_ahns(wcs, out);
		return out;
	}

	/* EFA receive semantics (soft_config::report_ahn): wc.slid = our AH
	 * number for the sender's GID, 0xFFFF without one. (Setup.) */
	void report_ahn(const dest_cache *by_gid) { ahn_ = by_gid; }

	/* An mbuf straight from the pool (rte_mempool_get_bulk), made a
	 * one-segment TX packet of len bytes. refcnt 1, nb_segs 1 and next
	 * NULL are the pool's invariants (rte_mbuf_raw_alloc); of what
	 * rte_pktmbuf_reset writes, only the fields a TX path reads are set,
	 * all in the mbuf's first cache line (reset also writes next and
	 * tx_offload in the second; with no offload flag no PMD reads them). */
	static void raw_tx_init(rte_mbuf *m, uint16_t len)
	{
		m->data_off = uint16_t(RTE_MIN(uint16_t(RTE_PKTMBUF_HEADROOM), m->buf_len));
		m->port = RTE_MBUF_PORT_INVALID;
		m->ol_flags &= RTE_MBUF_F_EXTERNAL;
		m->packet_type = 0;
		m->vlan_tci = 0;
		m->vlan_tci_outer = 0;
		m->data_len = len;
		m->pkt_len = len;
		__rte_mbuf_raw_sanity_check(m);
	}
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
		uint64_t pkts, bytes;
	};
	tx_state tx_state_of(const soft_qp &sq) const
	{
		return {ahs_, view_.mtu, sq.psn, sq.qpn, sq.qkey, rte_cpu_to_be_16(view_.pkey), sq.privileged, 0, 0};
	}
	void end_tx(const tx_state &st, soft_qp &sq)
	{
		sq.psn = st.psn;
		ctr_.tx_pkts += st.pkts;
		ctr_.tx_bytes += st.bytes;
	}
	/* Builds one packet (all three passes); for tests. */
	bool build(const send_wr &wr, soft_qp &sq, rte_mbuf *m)
	{
		tx_pending_pkt t;
		tx_state st = tx_state_of(sq);
		const bool ok = build_masked(wr, st, m, t);
		end_tx(st, sq);
		if (!ok)
			return false;
		crc32_with(crc_, [&](auto k) { store_icrc<decltype(k)::value>(t); });
		unmask(t);
		return true;
	}
	bool build_masked(const send_wr &wr, tx_state &st, rte_mbuf *m, tx_pending_pkt &t);
	template <crc32_kernel K> static void store_icrc(const tx_pending_pkt &t)
	{
		/* CRC-32 over [l3 - 8, end of pad), as icrc_of. */
		uint32_t crc = rte_cpu_to_le_32(crc32_ieee_k<K>(t.p + 6, t.icrc_off - 6));
		memcpy(t.p + t.icrc_off, &crc, 4);
	}
	static void unmask(const tx_pending_pkt &t);
	/* true: delivered into wc. false: not delivered; m is the caller's to
	 * free, except when it went to the control thread (ARP/ND on a queue
	 * with a slow-path ring), which handed_to_control() then says once. */
	bool parse(rte_mbuf *m, recv_wc &wc);
	bool handed_to_control()
	{
		bool t = to_ctl_;
		to_ctl_ = false;
		return t;
	}

	/* The RoCEv2 ICRC of a frame whose masked fields are already all ones:
	 * CRC-32 over [l3 - 8, end of pad). Stored little-endian after the pad. */
	static uint32_t icrc_of(crc32_kernel k, const uint8_t *l3_minus8, uint32_t len)
	{
		/* rdgram's PCLMUL/VPCLMULQDQ kernel (k: the queue's, chosen at
		 * attach; inline where the build's -march has it): the same
		 * CRC-32 as rte_net_crc_calc(RTE_NET_CRC32_ETH), about half its
		 * cost at 64..200 bytes and no indirect call
		 * (benchmarks/bench_crc32.cc, docs/PERFORMANCE.md). */
		return crc32_ieee(k, l3_minus8, len);
	}

	/* Verifies the ICRC of a frame in place with kernel k (default: the
	 * process's best, crc32_select); restores every byte. */
	static bool icrc_ok(uint8_t *frame, bool v4, uint32_t l3_off, uint32_t icrc_off,
			    crc32_kernel k = crc32_select());

private:
	/* Hands the stash to the port; what it does not take stays, in order. */
	void push_stash()
	{
		if (RDGRAM_TSAN)
			for (unsigned i = 0; i < nstash_; i++)
				RDGRAM_TSAN_RELEASE(stash_[i]);
		burst_guard::enter(guard_);
		uint16_t sent = rte_eth_tx_burst(port_, queue_, stash_, uint16_t(nstash_));
		burst_guard::leave(guard_);
		if (sent < nstash_) {
			memmove(stash_, stash_ + sent, (nstash_ - sent) * sizeof(stash_[0]));
			ctr_.tx_port_full++;
		}
		nstash_ -= sent;
	}

	/* Neighbour frames: off the RoCE path (only reached from branches that
	 * drop), so kept out of line. */
	__rte_noinline bool to_control(rte_mbuf *m)
	{
		if (ctl_rx_ == nullptr)
			return false;
		RDGRAM_TSAN_RELEASE(m);
		if (unlikely(rte_ring_mp_enqueue(ctl_rx_, m) != 0)) {
			ctr_.rx_control_full++; /* control thread behind: drop, peers retry */
			return false;
		}
		ctr_.rx_to_control++;
		to_ctl_ = true;
		return false;
	}
	__rte_noinline void tx_control()
	{
		rte_mbuf *c[max_burst];
		unsigned n = rte_ring_sc_dequeue_burst(ctl_tx_, reinterpret_cast<void **>(c), max_burst, nullptr);
		if (RDGRAM_TSAN)
			for (unsigned i = 0; i < n; i++) {
				RDGRAM_TSAN_ACQUIRE(c[i]);
				RDGRAM_TSAN_RELEASE(c[i]);
			}
		burst_guard::enter(guard_);
		uint16_t sent = rte_eth_tx_burst(port_, queue_, c, uint16_t(n));
		burst_guard::leave(guard_);
		ctr_.tx_control += sent;
		/* Port full: the control thread retransmits on its own timers, so
		 * these are freed rather than held (never stall the data path). */
		for (unsigned i = sent; i < n; i++)
			rte_pktmbuf_free(c[i]);
		ctr_.tx_control_dropped += n - sent;
	}
	/* ICMPv6 Neighbor Solicitation or Advertisement (RFC 4861), from the
	 * IPv6 header's next header and the ICMPv6 type; the control thread
	 * validates the rest. */
	static bool is_nd(const uint8_t *f, uint32_t flen)
	{
		return flen >= wire::eth_len + wire::ipv6_len + 1 &&
		       f[wire::eth_len + 6] == IPPROTO_ICMPV6 &&
		       (f[wire::eth_len + wire::ipv6_len] == 135 || f[wire::eth_len + wire::ipv6_len] == 136);
	}

	uint16_t port_ = 0, queue_ = 0;
	int guard_ = -1; /* burst_guard slot: net_memif ports only */
	/* One bulk lookup for the burst's senders. */
	__rte_noinline void set_ahns(recv_wc *wcs, uint16_t n)
	{
		ah_key keys[max_burst] = {};
		ah_handle hs[max_burst];
		for (uint16_t i = 0; i < n; i++)
			memcpy(keys[i].dgid, wcs[i].sgid.raw, 16);
		uint64_t hit;
		ahn_->lookup_bulk(keys, n, hs, &hit);
		for (uint16_t i = 0; i < n; i++)
			wcs[i].slid = (hit >> i & 1) ? uint16_t(hs[i].slot) : uint16_t(0xffff);
	}

	const dest_cache *ahn_ = nullptr; /* report_ahn: sender GID -> our AH */
	bool to_ctl_ = false; /* parse handed its mbuf to the control thread */
	crc32_kernel crc_ = crc32_select(); /* the ICRC kernel (attach, set_crc_kernel) */
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
	/* The attached group dst (4 or 16 bytes) names: its QP index, or -1. */
	int mcast_lookup(bool v4, const uint8_t *dst) const
	{
		for (unsigned i = 0; i < nmc_; i++) {
			const wire::gid &g = mc_[i].gid;
			if (v4 ? g.is_v4_mapped() && memcmp(g.raw + 12, dst, 4) == 0 : memcmp(g.raw, dst, 16) == 0)
				return int(mc_[i].qi);
		}
		return -1;
	}
	unsigned nmc_ = 0;
	mcast_member mc_[max_mcast]{};
	soft_port_view view_{};
	soft_counters ctr_{};
	rte_mbuf *stash_[tx_stash_size];
};
static_assert(ud_driver<soft_queue>);

/* Always inlined into the burst loop: as a call per packet it kept its
 * state in memory across the call and cost 5% of the sender's rate. */
__rte_always_inline bool soft_queue::build_masked(const send_wr &wr, tx_state &st, rte_mbuf *m, tx_pending_pkt &t)
{
	const soft_av *av = st.ahs.lookup(wr.ah);
	if (unlikely(av == nullptr)) {
		ctr_.tx_stale_ah++;
		return false;
	}
	/* A controlled Q_Key reaches the wire only from the QP context (the
	 * WR's high bit selects it): refuse it when that context is not
	 * privileged. add_qp already refuses such a context; this catches one
	 * edited afterwards (qp() hands out the struct), before any byte is
	 * written. One predictable branch per packet. */
	if (unlikely((st.qkey & qkey_controlled) && !st.privileged && (wr.remote_qkey & qkey_controlled))) {
		ctr_.tx_bad_qkey++;
		return false;
	}
	const bool inl = (wr.flags & send_inline) != 0;
	const bool imm = (wr.flags & send_imm) != 0;
	const uint32_t paylen = inl ? wr.inline_len : rte_pktmbuf_pkt_len(m);
	if (unlikely(paylen > st.mtu)) {
		ctr_.tx_too_long++;
		return false;
	}
	const bool v4 = av->l3 == 4;
	const uint32_t addr_len = v4 ? wire::addr_len_v4 : wire::addr_len_v6;
	const uint32_t hdr_len = addr_len + wire::bth_len + wire::deth_len + (imm ? wire::immdt_len : 0);
	const unsigned pad = wire::pad_for(paylen);
	const uint32_t tail = pad + wire::icrc_len;

	uint8_t *p;
	if (inl) {
		raw_tx_init(m, uint16_t(hdr_len + paylen + tail));
		p = rte_pktmbuf_mtod(m, uint8_t *);
		rte_memcpy(p + hdr_len, wr.inline_data, paylen);
	} else {
		if (unlikely(m->nb_segs != 1 || rte_pktmbuf_headroom(m) < hdr_len ||
			     rte_pktmbuf_tailroom(m) < tail)) {
			ctr_.tx_bad_mbuf++;
			return false;
		}
		p = reinterpret_cast<uint8_t *>(rte_pktmbuf_prepend(m, uint16_t(hdr_len)));
		rte_pktmbuf_append(m, uint16_t(tail));
	}

	/* Address part from the AV, with the ICRC-masked fields all ones. The
	 * first 8 bytes (destination MAC + 2 bytes of the source MAC) are one
	 * atomic word: neighbour re-resolution swaps the MAC of a live AV in
	 * place (av_mac_word). */
	if (v4)
		memcpy(p + 8, av->hdr + 8, wire::addr_len_v4 - 8);
	else
		memcpy(p + 8, av->hdr + 8, av_hdr_len - 8);
	const uint64_t w0 = av_mac_word(*av);
	memcpy(p, &w0, 8);
	memcpy(p + 6, &icrc_ones64, 8);
	const uint32_t l4_len = wire::udp_len + hdr_len - addr_len + paylen + tail;
	uint8_t *udp = p + addr_len - wire::udp_len;
	if (v4) {
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(p + wire::eth_len);
		ip->total_length = rte_cpu_to_be_16(uint16_t(wire::ipv4_len + l4_len));
		ip->type_of_service = 0xff;
		ip->time_to_live = 0xff;
		ip->hdr_checksum = 0xffff;
	} else {
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(p + wire::eth_len);
		ip->payload_len = rte_cpu_to_be_16(uint16_t(l4_len));
		ip->vtc_flow = rte_cpu_to_be_32(0x6fffffffu);
		ip->hop_limits = 0xff;
	}
	reinterpret_cast<rte_udp_hdr *>(udp)->dgram_len = rte_cpu_to_be_16(uint16_t(l4_len));
	reinterpret_cast<rte_udp_hdr *>(udp)->dgram_cksum = 0xffff;

	auto *bth = reinterpret_cast<wire::bth *>(udp + wire::udp_len);
	bth->opcode = imm ? wire::op_ud_send_only_imm : wire::op_ud_send_only;
	bth->flags = uint8_t(((wr.flags & send_solicited) ? wire::bth_se : 0) |
			     pad << wire::bth_padcnt_shift);
	bth->pkey = st.pkey_be;
	bth->resv8a = 0xff;
	wire::put24(bth->dqpn, wr.remote_qpn);
	bth->ack_resv = 0;
	wire::put24(bth->psn, st.psn);
	st.psn = (st.psn + 1) & 0xffffff;
	auto *deth = reinterpret_cast<wire::deth *>(bth + 1);
	/* IBA 10.2.5: a WR Q_Key with the high bit set means the QP's own. */
	uint32_t qkey = (wr.remote_qkey & qkey_controlled) ? st.qkey : wr.remote_qkey;
	deth->qkey = rte_cpu_to_be_32(qkey);
	deth->resv8 = 0;
	wire::put24(deth->sqpn, st.qpn);
	if (imm)
		memcpy(deth + 1, &wr.imm_data, 4);
	uint8_t *end = p + hdr_len + paylen;
	/* Pad bytes are zero; a fixed 4-byte store beats a variable memset
	 * (the ICRC overwrites what lies past the pad). */
	const uint32_t zero = 0;
	memcpy(end, &zero, 4);

	t.m = m;
	t.p = p;
	t.av = av;
	t.icrc_off = uint32_t(end + pad - p);
	/* No l2_len/l3_len: no offload is requested, and writing them would
	 * pull the mbuf's second cache line in (it was 19% of the TX cost). */
	st.pkts++;
	st.bytes += paylen;
	return true;
}

inline void soft_queue::unmask(const tx_pending_pkt &t)
{
	uint8_t *p = t.p;
	const soft_av *av = t.av;
	/* Source MAC and ethertype: bytes 6..7 live in the atomic MAC word
	 * (never changed by a swap), bytes 8..13 are plain. */
	const uint64_t w0 = av_mac_word(*av);
	memcpy(p + 6, reinterpret_cast<const uint8_t *>(&w0) + 6, 2);
	memcpy(p + 8, av->hdr + 8, 6);
	const bool v4 = av->l3 == 4;
	const uint32_t addr_len = v4 ? wire::addr_len_v4 : wire::addr_len_v6;
	uint8_t *udp = p + addr_len - wire::udp_len;
	reinterpret_cast<rte_udp_hdr *>(udp)->dgram_cksum = 0; /* Annex A17.4.5.1 */
	reinterpret_cast<wire::bth *>(udp + wire::udp_len)->resv8a = 0;
	if (v4) {
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(p + wire::eth_len);
		const auto *tip = reinterpret_cast<const rte_ipv4_hdr *>(av->hdr + wire::eth_len);
		ip->type_of_service = tip->type_of_service;
		ip->time_to_live = tip->time_to_live;
		uint32_t partial;
		memcpy(&partial, av->hdr + av_v4_csum_off, 4);
		ip->hdr_checksum = fold_csum(partial + ip->total_length);
	} else {
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(p + wire::eth_len);
		const auto *tip = reinterpret_cast<const rte_ipv6_hdr *>(av->hdr + wire::eth_len);
		ip->vtc_flow = tip->vtc_flow;
		ip->hop_limits = tip->hop_limits;
	}
}

inline bool soft_queue::icrc_ok(uint8_t *f, bool v4, uint32_t l3_off, uint32_t icrc_off, crc32_kernel k)
{
	uint8_t save_lrh[8];
	uint8_t *lrh = f + l3_off - 8;
	memcpy(save_lrh, lrh, 8);
	memcpy(lrh, &icrc_ones64, 8);
	uint32_t l4_off = l3_off + (v4 ? wire::ipv4_len : wire::ipv6_len);
	auto *udp = reinterpret_cast<rte_udp_hdr *>(f + l4_off);
	auto *bth = reinterpret_cast<wire::bth *>(udp + 1);
	uint16_t save_ucs = udp->dgram_cksum;
	uint8_t save_b4 = bth->resv8a;
	udp->dgram_cksum = 0xffff;
	bth->resv8a = 0xff;
	uint32_t save_ip0 = 0, save_ip1 = 0;
	if (v4) {
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(f + l3_off);
		save_ip0 = ip->type_of_service;
		save_ip1 = uint32_t(ip->time_to_live) << 16 | ip->hdr_checksum;
		ip->type_of_service = 0xff;
		ip->time_to_live = 0xff;
		ip->hdr_checksum = 0xffff;
	} else {
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(f + l3_off);
		save_ip0 = ip->vtc_flow;
		save_ip1 = ip->hop_limits;
		/* Keep the version nibble; mask traffic class and flow label. */
		ip->vtc_flow = ip->vtc_flow | rte_cpu_to_be_32(0x0fffffffu);
		ip->hop_limits = 0xff;
	}
	uint32_t crc = rte_cpu_to_le_32(icrc_of(k, lrh, icrc_off - (l3_off - 8)));
	uint32_t got;
	memcpy(&got, f + icrc_off, 4);

	memcpy(lrh, save_lrh, 8);
	udp->dgram_cksum = save_ucs;
	bth->resv8a = save_b4;
	if (v4) {
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(f + l3_off);
		ip->type_of_service = uint8_t(save_ip0);
		ip->time_to_live = uint8_t(save_ip1 >> 16);
		ip->hdr_checksum = uint16_t(save_ip1);
	} else {
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(f + l3_off);
		ip->vtc_flow = save_ip0;
		ip->hop_limits = uint8_t(save_ip1);
	}
	return crc == got;
}

inline bool soft_queue::parse(rte_mbuf *m, recv_wc &wc)
{
	if (unlikely(m->nb_segs != 1) && rte_pktmbuf_linearize(m) != 0) {
		ctr_.rx_chained_mbuf++;
		return false;
	}
	uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
	const uint32_t flen = rte_pktmbuf_data_len(m);
	if (unlikely(flen < wire::eth_len)) {
		ctr_.rx_truncated++;
		return false;
	}
	const uint16_t et = reinterpret_cast<rte_ether_hdr *>(f)->ether_type;
	bool v4;
	if (et == RTE_BE16(RTE_ETHER_TYPE_IPV4))
		v4 = true;
	else if (et == RTE_BE16(RTE_ETHER_TYPE_IPV6))
		v4 = false;
	else {
		if (et == RTE_BE16(RTE_ETHER_TYPE_ARP) && ctl_rx_ != nullptr)
			return to_control(m);
		ctr_.rx_not_ip++;
		return false;
	}
	const uint32_t l3 = wire::eth_len;
	const uint32_t l3_len = v4 ? wire::ipv4_len : wire::ipv6_len;
	if (unlikely(flen < l3 + l3_len + wire::udp_len + wire::bth_len + wire::deth_len + wire::icrc_len)) {
		/* ND messages without options (78 bytes) are shorter than any
		 * RoCEv2 packet. */
		if (!v4 && ctl_rx_ != nullptr && is_nd(f, flen))
			return to_control(m);
		/* A whole IP packet of another protocol that is merely short
		 * (a TCP ACK, an ICMPv6 router solicitation: what a real link
		 * carries besides RoCE) is not truncated: it is not UDP. */
		if (flen >= l3 + l3_len) {
			const uint32_t ip_len = v4 ? rte_be_to_cpu_16(reinterpret_cast<rte_ipv4_hdr *>(f + l3)->total_length)
						   : l3_len + rte_be_to_cpu_16(reinterpret_cast<rte_ipv6_hdr *>(f + l3)->payload_len);
			if (ip_len >= l3_len && l3 + ip_len <= flen && f[l3 + (v4 ? 9 : 6)] != IPPROTO_UDP) {
				ctr_.rx_not_udp++;
				return false;
			}
		}
		ctr_.rx_truncated++;
		return false;
	}
	uint32_t l4_len; /* UDP header + its payload, from the IP header */
	const uint8_t *dst;
	if (v4) {
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(f + l3);
		uint32_t tot = rte_be_to_cpu_16(ip->total_length);
		if (unlikely(ip->version_ihl != 0x45 || tot < l3_len + wire::udp_len)) {
			ctr_.rx_bad_ip_header++;
			return false;
		}
		if (unlikely(l3 + tot > flen)) {
			ctr_.rx_truncated++;
			return false;
		}
		if (unlikely(rte_ipv4_cksum(ip) != 0)) {
			ctr_.rx_bad_ip_checksum++;
			return false;
		}
		if (unlikely(ip->fragment_offset & RTE_BE16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK))) {
			ctr_.rx_ip_fragment++;
			return false;
		}
		if (unlikely(ip->next_proto_id != IPPROTO_UDP)) {
			ctr_.rx_not_udp++;
			return false;
		}
		l4_len = tot - l3_len;
		dst = reinterpret_cast<const uint8_t *>(&ip->dst_addr);
	} else {
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(f + l3);
		uint32_t pl = rte_be_to_cpu_16(ip->payload_len);
		if (unlikely((f[l3] >> 4) != 6 || pl < wire::udp_len)) {
			ctr_.rx_bad_ip_header++;
			return false;
		}
		if (unlikely(l3 + l3_len + pl > flen)) {
			ctr_.rx_truncated++;
			return false;
		}
		if (unlikely(ip->proto != IPPROTO_UDP)) {
			if (ctl_rx_ != nullptr && is_nd(f, flen))
				return to_control(m);
			ctr_.rx_not_udp++;
			return false;
		}
		l4_len = pl;
		dst = ip->dst_addr;
	}
	const uint32_t l4 = l3 + l3_len;
	auto *udp = reinterpret_cast<rte_udp_hdr *>(f + l4);
	if (unlikely(udp->dst_port != RTE_BE16(wire::roce_v2_udp_port))) {
		ctr_.rx_not_roce++;
		return false;
	}
	if (unlikely(rte_be_to_cpu_16(udp->dgram_len) != l4_len)) {
		ctr_.rx_bad_udp_length++;
		return false;
	}
	bool mine = false;
	if (v4) {
		rte_be32_t d;
		memcpy(&d, dst, 4);
		for (unsigned i = 0; i < view_.n_v4; i++)
			mine |= view_.v4[i] == d;
	} else {
		for (unsigned i = 0; i < view_.n_v6; i++)
			mine |= memcmp(view_.v6[i], dst, 16) == 0;
	}
	/* Not one of our addresses: a multicast group a QP here attached to
	 * (the unicast path pays nothing for it), else a mismatch. */
	int mq = -1;
	if (unlikely(!mine) && (nmc_ == 0 || (mq = mcast_lookup(v4, dst)) < 0)) {
		ctr_.rx_dgid_mismatch++;
		return false;
	}
	auto *bth = reinterpret_cast<wire::bth *>(udp + 1);
	if (unlikely((bth->flags & wire::bth_tver_mask) != 0)) {
		ctr_.rx_bad_bth_version++;
		return false;
	}
	const bool imm = bth->opcode == wire::op_ud_send_only_imm;
	if (unlikely(bth->opcode != wire::op_ud_send_only && !imm)) {
		ctr_.rx_bad_opcode++;
		return false;
	}
	if (unlikely(!pkey_match(rte_be_to_cpu_16(bth->pkey), view_.pkey))) {
		ctr_.rx_bad_pkey++;
		return false;
	}
	const uint32_t dqpn = wire::get24(bth->dqpn);
	unsigned qi = 0;
	if (unlikely(mq >= 0)) {
		/* To a group: IBA 10.5.2.1 wants the multicast DQPN. */
		if (dqpn != mcast_qpn) {
			ctr_.rx_unknown_qpn++;
			return false;
		}
		qi = unsigned(mq);
	} else {
		while (qi < nqp_ && qps_[qi].qpn != dqpn)
			qi++;
		if (unlikely(qi == nqp_)) {
			ctr_.rx_unknown_qpn++;
			return false;
		}
	}
	/* Lengths: headers, pad and ICRC must fit inside the UDP length. */
	const uint32_t after_udp = wire::bth_len + wire::deth_len + (imm ? wire::immdt_len : 0);
	const unsigned pad = (bth->flags & wire::bth_padcnt_mask) >> wire::bth_padcnt_shift;
	if (unlikely(l4_len < wire::udp_len + after_udp + pad + wire::icrc_len)) {
		ctr_.rx_bad_length++;
		return false;
	}
	const uint32_t paylen = l4_len - wire::udp_len - after_udp - pad - wire::icrc_len;
	if (unlikely(paylen > view_.mtu)) {
		ctr_.rx_bad_length++;
		return false;
	}
	auto *deth = reinterpret_cast<wire::deth *>(bth + 1);
	if (unlikely(rte_be_to_cpu_32(deth->qkey) != qps_[qi].qkey)) {
		ctr_.rx_bad_qkey++;
		return false;
	}
	const uint32_t icrc_off = l4 + l4_len - wire::icrc_len;
	if (unlikely(!icrc_ok(f, v4, l3, icrc_off, crc_))) {
		ctr_.rx_bad_icrc++;
		return false;
	}

	/* Deliver: fill the completion, then rearrange into verbs' layout. */
	wc.qp_num = qps_[qi].qpn; /* dqpn, or the attached QP for a group */
	wc.src_qp = wire::get24(deth->sqpn);
	wc.wc_flags = uint8_t(wc_grh | (imm ? wc_with_imm : 0) |
			      ((bth->flags & wire::bth_se) ? wc_solicited : 0));
	wc.imm_data = 0;
	if (imm)
		memcpy(&wc.imm_data, deth + 1, 4);
	wc.slid = 0;
	wc.sl = 0;
	wc.pkey_index = 0;
	wc.dlid_path_bits = 0;
	const uint32_t pay_off = l4 + wire::udp_len + after_udp;
	uint8_t *grh = f + pay_off - wire::grh_len;
	if (v4) {
		auto *ip = reinterpret_cast<rte_ipv4_hdr *>(f + l3);
		wc.l3 = l3_type::ipv4;
		wc.sgid = wire::gid::from_v4(ip->src_addr);
		wc.dgid = wire::gid::from_v4(ip->dst_addr);
		/* IPv4 header into the last 20 bytes of the GRH area (the copy
		 * cannot overlap: the area starts past the IP header's end). */
		memcpy(grh + 20, f + l3, wire::ipv4_len);
		memset(grh, 0, 20);
	} else {
		auto *ip = reinterpret_cast<rte_ipv6_hdr *>(f + l3);
		wc.l3 = l3_type::ipv6;
		memcpy(wc.sgid.raw, ip->src_addr, 16);
		memcpy(wc.dgid.raw, ip->dst_addr, 16);
		memmove(grh, f + l3, wire::ipv6_len);
	}
	rte_pktmbuf_adj(m, uint16_t(pay_off - wire::grh_len));
	rte_pktmbuf_trim(m, uint16_t(rte_pktmbuf_pkt_len(m) - wire::grh_len - paylen));
	wc.mbuf = m;
	wc.byte_len = wire::grh_len + paylen;
	ctr_.rx_pkts++;
	ctr_.rx_bytes += paylen;
	return true;
}

} // namespace rdgram::soft

#endif
