/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd's poll loop, templated on the driver's queue type (Q:
 * soft_queue, verbs_queue, mlx5_queue, efa_queue; apps/common/driver.h):
 * each worker (poll lcore) runs its own queue of every port to completion,
 * with its own QPs, reply paths, rule hits and counters (loop_ctx<Q>).
 *
 *   rx_burst (soft driver: malformed frames counted by reason, ARP/ND to the
 *             control thread)
 *     reflect: reply_key(wc) (ibv_init_ah_from_wc(3) semantics) -> send the
 *              received mbuf back, GRH area stripped, to wc.src_qp from the
 *              QP that received it, through that QP's ah_client (the reply
 *              AH is created once per sender on the control thread, then
 *              found in the dest_cache)
 *     forward: first rule whose QPN/Q_Key match -> the peer's key (AH held
 *              since start-up when the peer's MAC is configured, resolved on
 *              first use otherwise), optional Q_Key rewrite; no match:
 *              freed and counted as fwd_no_rule
 *   ah_client::poll (answers from the control thread: flush or drop)
 *   tx_flush, rte_rcu_qsbr_quiescent
 *
 * No syscall, lock, heap allocation or virtual call per packet: everything
 * below is arrays sized at start-up, and the driver and the AH client are
 * templates/inline. The main thread reads counters only through a snapshot
 * the poll thread copies when asked (one relaxed load per loop), so no
 * counter is ever read while it is written.
 */
#ifndef RDGRAM_FWD_LOOP_H
#define RDGRAM_FWD_LOOP_H

#include <atomic>
#include <cstdint>
#include <cstring>

#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>

#include "rdgram/ah_service.h"
#include "rdgram/stats.h"
#include "soft_device.h"

namespace rdgram::fwd {

inline constexpr unsigned max_ports = 8;
inline constexpr unsigned max_qps = soft::soft_queue::max_qps; /* per worker and port */
inline constexpr unsigned max_rules = 64;
inline constexpr unsigned max_peers = 64;
inline constexpr unsigned max_workers = 64;
inline constexpr unsigned burst = 32;
inline constexpr unsigned max_drv_counters = 64;
/* Send Q_Key with the high bit set: the sending QP's own (IBA 10.2.5). */
inline constexpr uint32_t qkey_of_qp = 0x80000000u;

/* Application counters of one local QP (the one a packet was addressed to). */
#define RDGRAM_FWD_QP_COUNTERS(X)                                                   \
	X(rx, "completions delivered to this QP")                                   \
	X(rx_bytes, "payload bytes delivered (GRH area not counted)")             \
	X(reflected, "replies handed to the reply path (sent, waiting or dropped there)") \
	X(forwarded, "packets handed to a peer's send path")                      \
	X(fwd_no_rule, "drop: no forwarding rule matched")                        \
	X(reply_bad_wc, "drop: no reply AH can be derived from the completion")   \
	X(tx_full, "drop: the egress queue took no more (port full)")

struct qp_app_counters {
#define X(name, desc) uint64_t name;
	RDGRAM_FWD_QP_COUNTERS(X)
#undef X
};

/* Sends from local QP i of q: the soft queue carries several QPs and sends
 * from the one selected; a hardware queue is one QP. */
template <class Q> inline void select_qp(Q &q, unsigned i)
{
	if constexpr (requires { q.select_send_qp(i); })
		q.select_send_qp(i);
	else
		(void)i;
}

/* One port's queue as its worker owns it. The ah_clients are per local QP:
 * a client's waiting messages are sent later from its poll(), so each QP
 * gets its own and the source QPN of a late reply is still the right one. */
template <class Q> struct port_state {
	static_assert(Q::max_burst >= burst, "the loop's bursts must fit the driver's");
	Q q;
	ah_client cl[max_qps];
	uint32_t qpn[max_qps];
	uint32_t qkey[max_qps];
	unsigned nqp = 0;
	qp_app_counters qc[max_qps]{};

	/* Index of a local QPN (delivered completions always have one). */
	unsigned qp_index(uint32_t qpn_) const
	{
		for (unsigned i = 0; i < nqp; i++)
			if (qpn[i] == qpn_)
				return i;
		return 0;
	}
};

struct peer_state {
	ah_key key;        /* resolved through the egress port's dest_cache */
	unsigned port;     /* egress port index */
	uint32_t qpn;
	uint32_t qkey;     /* qkey_of_qp bit clear: fixed; else keep the packet's */
	bool keep_qkey;
};

struct rule_state {
	bool has_qpn, has_qkey, rewrite;
	uint32_t qpn, qkey, new_qkey;
	unsigned peer;
};

/* A queue's driver counters as the report reads them, whatever the
 * driver: its name table and the values in that order. */
struct drv_snap {
	const xstat_name *names = nullptr;
	unsigned count = 0;
	uint64_t v[max_drv_counters]{};

	template <class C> void take(const C &c)
	{
		static_assert(C::xstat_count <= max_drv_counters, "max_drv_counters");
		names = C::xstat_names;
		count = C::xstat_count;
		c.xstat_values(v);
	}
	/* A counter by name; 0 for one this driver does not have (a verbs
	 * queue hands no frame to a control thread). */
	uint64_t get(const char *name) const
	{
		for (unsigned i = 0; i < count; i++)
			if (strcmp(names[i].name, name) == 0)
				return v[i];
		return 0;
	}
	uint64_t rx_drops() const { return names ? xstat_drops(names, v, count, drop_side::rx) : 0; }
	template <class F> void for_each(F &&f) const
	{
		for (unsigned i = 0; i < count; i++)
			f(names[i], v[i]);
	}
	drv_snap &operator+=(const drv_snap &o)
	{
		if (names == nullptr) {
			*this = o;
			return *this;
		}
		for (unsigned i = 0; i < count && i < o.count; i++)
			v[i] += o.v[i];
		return *this;
	}
};

/* What the main thread reads of one worker: a copy its poll thread took. */
struct snapshot {
	double elapsed_s;
	uint64_t loops;
	struct port_snap {
		drv_snap drv;
		unsigned nqp;
		uint32_t qpn[max_qps];
		uint32_t qkey[max_qps];
		qp_app_counters qc[max_qps];
		ah_client_counters reply[max_qps];
		uint32_t waiting;
	} port[max_ports];
	uint64_t rule_hits[max_rules];
};

/* What the workers share: the run's packet budget (--max-packets), claimed
 * a burst at a time, and what was taken of it. The run ends on what was
 * taken, never on claims in flight: a worker that claimed a burst it did
 * not fill holds part of the budget until it settles, and a worker that
 * stopped on the claims then (lab_fwd_rxe: worker 0 stopped at 48 of 80
 * while worker 1 held a claim of 32) left its QP's datagrams unreceived. */
struct shared_budget {
	uint64_t max = 0; /* 0: none */
	std::atomic<uint64_t> claimed{0};
	std::atomic<uint64_t> used{0};

	/* Up to want of the budget for one rx_burst. (Multi-thread safe.) */
	uint16_t claim(uint16_t want)
	{
		if (max == 0)
			return want;
		uint64_t cur = claimed.load(std::memory_order_relaxed);
		uint16_t take;
		do {
			take = cur >= max ? 0 : uint16_t(max - cur < want ? max - cur : want);
			if (take == 0)
				return 0;
		} while (!claimed.compare_exchange_weak(cur, cur + take, std::memory_order_relaxed));
		return take;
	}
	/* The burst claimed `want` and took n: n is used, the rest goes
	 * back. */
	void settle(uint16_t want, uint16_t n)
	{
		if (max == 0)
			return;
		if (want != n)
			claimed.fetch_sub(want - n, std::memory_order_relaxed);
		if (n != 0)
			used.fetch_add(n, std::memory_order_relaxed);
	}
	bool spent() const { return max != 0 && used.load(std::memory_order_relaxed) >= max; }
};

template <class Q> struct loop_ctx {
	/* Set up by main before launch. */
	unsigned worker = 0;
	port_state<Q> *ports[max_ports]{};
	unsigned nports = 0;
	bool reflect = true;
	peer_state peers[max_peers]{};
	unsigned npeers = 0;
	rule_state rules[max_rules]{};
	unsigned nrules = 0;
	uint64_t rule_hits[max_rules]{};
	rte_rcu_qsbr *qsbr = nullptr;
	shared_budget *budget = nullptr;
	uint64_t duration_cyc = 0;  /* 0: none */
	uint64_t idle_cyc = 0;      /* 0: never */
	uint64_t drain_cyc = 0;     /* after the loop: waiting replies */

	/* Main <-> poll thread. */
	std::atomic<bool> stop{false};
	std::atomic<bool> done{false};
	std::atomic<uint32_t> snap_req{0}, snap_ack{0};
	snapshot snap{};

	/* Poll thread only. */
	uint64_t start = 0, loops = 0;
	uint64_t stopped_at = 0; /* when run() returned; 0 while it runs */
	const char *why = "stopped";

	void take_snapshot(uint64_t now)
	{
		/* A worker that stopped ran until then, not until it is read. */
		snap.elapsed_s = double((stopped_at != 0 ? stopped_at : now) - start) / double(rte_get_tsc_hz());
		snap.loops = loops;
		for (unsigned p = 0; p < nports; p++) {
			const port_state<Q> &ps = *ports[p];
			snap.port[p].drv.take(ps.q.counters());
			snap.port[p].waiting = 0;
			snap.port[p].nqp = ps.nqp;
			for (unsigned i = 0; i < ps.nqp; i++) {
				snap.port[p].qpn[i] = ps.qpn[i];
				snap.port[p].qkey[i] = ps.qkey[i];
				snap.port[p].qc[i] = ps.qc[i];
				snap.port[p].reply[i] = ps.cl[i].counters();
				snap.port[p].waiting += ps.cl[i].waiting_messages();
			}
		}
		memcpy(snap.rule_hits, rule_hits, sizeof(rule_hits));
	}

	/* Frames the port gave the driver: delivered, to the control thread,
	 * or dropped by a named reason. */
	uint64_t frames_seen() const
	{
		uint64_t n = 0;
		for (unsigned p = 0; p < nports; p++) {
			const auto &k = ports[p]->q.counters();
			n += k.rx_pkts + k.rx_drops();
			if constexpr (requires { k.rx_to_control; })
				n += k.rx_to_control;
		}
		return n;
	}
	bool idle_now() const
	{
		for (unsigned p = 0; p < nports; p++) {
			if (ports[p]->q.tx_pending() != 0)
				return false;
			for (unsigned i = 0; i < ports[p]->nqp; i++)
				if (ports[p]->cl[i].waiting_messages() != 0)
					return false;
		}
		return true;
	}

	/* Sends wrs (to keys) from QP sq of egress port e; what the driver
	 * does not take after one flush is freed and counted against the
	 * receiving QP's tx_full. */
	static void send(port_state<Q> &e, unsigned sq, const ah_key *keys, send_wr *wrs, uint16_t n,
			 uint64_t now, qp_app_counters &from)
	{
		select_qp(e.q, sq);
		uint16_t s = e.cl[sq].send_burst(e.q, keys, wrs, n, now);
		if (unlikely(s < n)) {
			e.q.tx_flush();
			s = uint16_t(s + e.cl[sq].send_burst(e.q, keys + s, wrs + s, uint16_t(n - s), now));
			for (uint16_t i = s; i < n; i++)
				rte_pktmbuf_free(wrs[i].mbuf);
			from.tx_full += n - s;
		}
	}

	/* The WR that sends a received payload on: the same mbuf, its GRH area
	 * stripped, the immediate data carried over. */
	static send_wr wr_from(const recv_wc &wc, uint32_t qpn, uint32_t qkey)
	{
		rte_pktmbuf_adj(wc.mbuf, uint16_t(wire::grh_len));
		const bool imm = (wc.wc_flags & wc_with_imm) != 0;
		return send_wr{ah_null, qpn, qkey, wc.mbuf, nullptr, 0, imm ? wc.imm_data : 0,
			       uint16_t(imm ? send_imm : 0)};
	}

	void reflect_burst(port_state<Q> &ps, recv_wc *wcs, const uint8_t *qi, uint16_t n, uint64_t now)
	{
		for (unsigned i = 0; i < ps.nqp; i++) {
			ah_key keys[burst];
			send_wr wrs[burst];
			uint16_t k = 0;
			for (uint16_t j = 0; j < n; j++) {
				if (qi[j] != i)
					continue;
				const recv_wc &wc = wcs[j];
				if (unlikely(ps.cl[i].reply_key(wc, &keys[k]) != 0)) {
					ps.qc[i].reply_bad_wc++;
					rte_pktmbuf_free(wc.mbuf);
					continue;
				}
				wrs[k++] = wr_from(wc, wc.src_qp, qkey_of_qp);
			}
			if (k == 0)
				continue;
			ps.qc[i].reflected += k;
			send(ps, i, keys, wrs, k, now, ps.qc[i]);
		}
	}

	void forward_burst(unsigned pi, recv_wc *wcs, const uint8_t *qi, uint16_t n, uint64_t now)
	{
		port_state<Q> &ps = *ports[pi];
		for (unsigned i = 0; i < ps.nqp; i++) {
			ah_key keys[max_ports][burst];
			send_wr wrs[max_ports][burst];
			uint16_t k[max_ports] = {};
			bool any = false;
			const uint32_t qpn = ps.qpn[i], qkey = ps.qkey[i];
			for (uint16_t j = 0; j < n; j++) {
				if (qi[j] != i)
					continue;
				/* The driver accepted only packets whose Q_Key equals the
				 * QP's (IBA 10.2.5), so the QP's Q_Key is the packet's. */
				unsigned r = 0;
				for (; r < nrules; r++) {
					const rule_state &ru = rules[r];
					if ((!ru.has_qpn || ru.qpn == qpn) && (!ru.has_qkey || ru.qkey == qkey))
						break;
				}
				if (r == nrules) {
					ps.qc[i].fwd_no_rule++;
					rte_pktmbuf_free(wcs[j].mbuf);
					continue;
				}
				rule_hits[r]++;
				const rule_state &ru = rules[r];
				const peer_state &pe = peers[ru.peer];
				const uint32_t out_qkey = ru.rewrite ? ru.new_qkey : pe.keep_qkey ? qkey : pe.qkey;
				const unsigned e = pe.port;
				keys[e][k[e]] = pe.key;
				wrs[e][k[e]++] = wr_from(wcs[j], pe.qpn, out_qkey);
				any = true;
			}
			if (!any)
				continue;
			for (unsigned e = 0; e < nports; e++) {
				if (k[e] == 0)
					continue;
				ps.qc[i].forwarded += k[e];
				/* Same port: from the receiving QP; another port: from
				 * this worker's first QP there. */
				send(*ports[e], e == pi ? i : 0, keys[e], wrs[e], k[e], now, ps.qc[i]);
			}
		}
	}

	/* One pass over every port: answers from the control thread, one
	 * rx_burst, reflect or forward, tx_flush, the quiescent state. Returns
	 * the completions received. (Poll thread; run's body, and a test's
	 * step against a device model.) */
	unsigned poll_once(uint64_t now, unsigned tid)
	{
		unsigned got = 0;
		loops++;
		for (unsigned p = 0; p < nports; p++) {
			port_state<Q> &ps = *ports[p];
			for (unsigned i = 0; i < ps.nqp; i++) {
				select_qp(ps.q, i);
				ps.cl[i].poll(ps.q, now);
			}
			const uint16_t want = budget->claim(uint16_t(burst));
			recv_wc wcs[burst];
			const uint16_t n = want != 0 ? ps.q.rx_burst(wcs, want) : 0;
			budget->settle(want, n);
			if (n != 0) {
				uint8_t qi[burst];
				for (uint16_t j = 0; j < n; j++) {
					const unsigned i = ps.qp_index(wcs[j].qp_num);
					qi[j] = uint8_t(i);
					ps.qc[i].rx++;
					ps.qc[i].rx_bytes += wcs[j].byte_len - wire::grh_len;
				}
				if (reflect)
					reflect_burst(ps, wcs, qi, n, now);
				else
					forward_burst(p, wcs, qi, n, now);
				got += n;
			}
		}
		for (unsigned p = 0; p < nports; p++)
			ports[p]->q.tx_flush();
		rte_rcu_qsbr_quiescent(qsbr, tid);
		return got;
	}

	/* The poll thread's body. */
	void run(unsigned tid)
	{
		start = rte_get_tsc_cycles();
		uint64_t last_active = start, last_seen = 0;
		const uint64_t end = duration_cyc != 0 ? start + duration_cyc : UINT64_MAX;
		uint32_t acked = snap_ack.load(std::memory_order_relaxed);
		for (;;) {
			const uint64_t now = rte_get_tsc_cycles();
			poll_once(now, tid);

			const uint32_t req = snap_req.load(std::memory_order_acquire);
			if (unlikely(req != acked)) {
				take_snapshot(now);
				acked = req;
				snap_ack.store(req, std::memory_order_release);
			}
			if (unlikely(stop.load(std::memory_order_relaxed)))
				break;
			if (unlikely(now >= end)) {
				why = "duration reached";
				break;
			}
			if (budget->spent() && idle_now()) {
				why = "max packets reached";
				break;
			}
			if (idle_cyc != 0) {
				const uint64_t seen = frames_seen();
				if (seen != last_seen || !idle_now()) {
					last_seen = seen;
					last_active = now;
				} else if (now - last_active >= idle_cyc) {
					why = "idle";
					break;
				}
			}
		}
		/* Replies still waiting for their AH get until the drain deadline;
		 * what is left then is dropped (counted) by ah_client::fini. */
		const uint64_t dend = rte_get_tsc_cycles() + drain_cyc;
		while (!idle_now() && rte_get_tsc_cycles() < dend) {
			const uint64_t now = rte_get_tsc_cycles();
			for (unsigned p = 0; p < nports; p++) {
				port_state<Q> &ps = *ports[p];
				for (unsigned i = 0; i < ps.nqp; i++) {
					select_qp(ps.q, i);
					ps.cl[i].poll(ps.q, now);
				}
				ps.q.tx_flush();
			}
			rte_rcu_qsbr_quiescent(qsbr, tid);
		}
		stopped_at = rte_get_tsc_cycles();
		take_snapshot(stopped_at);
		done.store(true, std::memory_order_release);
	}
};

} // namespace rdgram::fwd

#endif
