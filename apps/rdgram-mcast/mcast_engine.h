/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast's data path: the publisher (paced, sequence-numbered,
 * TSC-stamped messages to every group), the subscribers (sequence checks
 * and the one-way latency histogram) and the poll loop that runs them, in
 * turn, on one poll thread, with the in-process switch between them in
 * --mode both. Everything is a template over the driver's queue type
 * (rdgram/ud.h's ud_driver: soft::soft_queue or verbs::verbs_queue): the
 * driver is chosen once, in main(), and no call here branches on it or
 * goes through a virtual table. Per message: no heap, no syscall, no lock.
 */
#ifndef RDGRAM_MCAST_ENGINE_H
#define RDGRAM_MCAST_ENGINE_H

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "latency_hist.h"
#include "mcast.h"
#include "mcast_switch.h"
#include "rdgram/runtime.h"
#include "rdgram/ud.h"

namespace rdgram::mcast {

/* Work requests per burst; every driver's queue takes at least this many. */
inline constexpr unsigned burst = 32;
/* The destination QPN of a send to a group (IBA 9.8.1). */
inline constexpr uint32_t group_qpn = 0xFFFFFF;

/* The publisher: what it sends to, and how far it got. */
struct pub_state {
	std::vector<ah_handle> ahs;  /* one per group */
	std::vector<uint32_t> qkeys; /* per group: the Q_Key to send with */
	pacer pace;
	uint64_t next_seq = 1;         /* sequence numbers start at 1 */
	uint64_t last_seq = 0;         /* the highest number handed to the driver */
	std::atomic<uint64_t> sent{0}; /* messages (per group) handed over; the status line reads it */
	std::unique_ptr<uint8_t[]> bufs; /* burst payloads */
	bool done = false;
	uint64_t refused = 0; /* WRs the port queue never took */
};

/* One subscriber's view of the streams. The counters are relaxed atomics
 * written by the poll thread alone, so the status line can read them. */
struct sub_state {
	std::unique_ptr<seq_tracker[]> trk; /* per group index */
	apps::latency_hist hist;
	std::atomic<uint64_t> received{0}, malformed{0}, foreign{0}, max_ns{0};
	uint64_t last_rx = 0; /* TSC of the last message */
};

/* One run: the publisher's queue (if any), the subscribers' queues, the
 * switch (--mode both on the soft driver), and when to stop. Built on the
 * main thread before the poll thread starts; the poll thread then owns
 * everything but the atomics. */
template <ud_driver Q> struct session {
	static_assert(Q::max_burst >= burst);

	const mcast_config *c = nullptr;
	runtime *rt = nullptr;
	const volatile sig_atomic_t *signalled = nullptr; /* SIGINT/SIGTERM seen */
	Q *pub_q = nullptr;
	std::unique_ptr<pub_state> pub; /* with pub_q */
	std::vector<Q *> sub_q;
	std::vector<std::unique_ptr<sub_state>> subs; /* subs[k] reads sub_q[k] */
	flood_switch *sw = nullptr;
	uint64_t hz = 0, start = 0, end_tsc = 0;
	uint64_t idle_ticks = 0;  /* sub: stop after this long without data */
	uint64_t drain_until = 0; /* publisher done, wires draining */
	std::atomic<bool> running{false}, finished{false};
	std::atomic<bool> stop{false};
};

inline bool is_listed(const std::vector<uint64_t> &v, uint64_t s)
{
	for (uint64_t x : v)
		if (x == s)
			return true;
	return false;
}

inline void bump(std::atomic<uint64_t> &a)
{
	a.store(a.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

/* The publisher's share of one loop turn: as many messages as the pacer
 * allows, each to every group. (NOT multi-thread safe: the poll thread.) */
template <ud_driver Q> void publish_some(session<Q> &r, uint64_t now)
{
	const mcast_config &c = *r.c;
	pub_state &p = *r.pub;
	const uint32_t ng = uint32_t(p.ahs.size());
	if (p.done)
		return;
	if ((c.count != 0 && p.next_seq > c.count) || (r.end_tsc != 0 && now >= r.end_tsc) || *r.signalled) {
		p.done = true;
		return;
	}
	const uint32_t max_msgs = burst / ng;
	uint32_t want = max_msgs;
	if (c.count != 0 && c.count - p.next_seq + 1 < want)
		want = uint32_t(c.count - p.next_seq + 1);
	const uint32_t n = p.pace.take(now, want);
	if (n == 0)
		return;
	send_wr wrs[burst];
	uint32_t nw = 0;
	const uint64_t tsc = rte_rdtsc();
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t s = p.next_seq++;
		/* Fault injection: a skipped number is never sent (a gap), a
		 * duplicated one goes twice. Lists are a few entries long. */
		if (!c.skip_seq.empty() && is_listed(c.skip_seq, s))
			continue;
		const unsigned copies = (!c.dup_seq.empty() && is_listed(c.dup_seq, s)) ? 2 : 1;
		for (unsigned k = 0; k < copies && nw + ng <= burst; k++)
			for (uint32_t g = 0; g < ng; g++) {
				uint8_t *b = p.bufs.get() + size_t(nw) * c.size;
				msg_hdr h{msg_magic, c.publisher_id, s, tsc, g, c.size};
				memcpy(b, &h, sizeof(h));
				wrs[nw++] = send_wr{p.ahs[g], group_qpn, p.qkeys[g], nullptr, b, c.size, 0, send_inline};
			}
		p.last_seq = s;
	}
	uint32_t off = 0;
	/* The port queue takes everything unless it is full: retry on this
	 * turn, the switch drains the ring on the next one. */
	for (unsigned tries = 0; off < nw && tries < 64; tries++)
		off += r.pub_q->tx_burst(wrs + off, uint16_t(nw - off));
	p.refused += nw - off; /* inline payloads: nothing to free */
	r.pub_q->tx_flush();
	p.sent.store(p.last_seq, std::memory_order_relaxed);
}

/* Subscriber k's share: every completion checked and recorded; true when
 * there was one. (NOT multi-thread safe: the poll thread.) */
template <ud_driver Q> bool receive_some(session<Q> &r, size_t k, uint64_t now)
{
	sub_state &s = *r.subs[k];
	recv_wc wcs[burst];
	const uint16_t n = r.sub_q[k]->rx_burst(wcs, burst);
	const uint32_t ng = uint32_t(r.c->groups.size());
	for (uint16_t i = 0; i < n; i++) {
		rte_mbuf *m = wcs[i].mbuf;
		const uint32_t plen = wcs[i].byte_len - wire::grh_len;
		msg_hdr h;
		if (plen < sizeof(h)) {
			bump(s.malformed);
			rte_pktmbuf_free(m);
			continue;
		}
		memcpy(&h, rte_pktmbuf_mtod_offset(m, const uint8_t *, wire::grh_len), sizeof(h));
		rte_pktmbuf_free(m);
		if (h.magic != msg_magic || h.len != plen || h.group >= ng) {
			bump(s.malformed);
			continue;
		}
		if (h.publisher != r.c->publisher_id) {
			bump(s.foreign);
			continue;
		}
		bump(s.received);
		if (s.trk[h.group].on_seq(h.seq) && now > h.tsc) {
			const uint64_t ns = (now - h.tsc) * 1000000000ull / r.hz;
			s.hist.record(ns);
			if (ns > s.max_ns.load(std::memory_order_relaxed))
				s.max_ns.store(ns, std::memory_order_relaxed);
		}
		s.last_rx = now;
	}
	return n != 0;
}

/* Receives on q and frees what came. */
template <ud_driver Q> void discard_rx(Q &q)
{
	recv_wc wcs[burst];
	const uint16_t n = q.rx_burst(wcs, burst);
	for (uint16_t i = 0; i < n; i++)
		rte_pktmbuf_free(wcs[i].mbuf);
}

/* The poll thread (launch_on_lcore's f; arg: the session). Runs until the
 * publisher is done and the wires drained, every subscriber was idle for
 * idle_timeout after its last message, --duration is over, a signal came,
 * or stop is set. */
template <ud_driver Q> int poll_loop(void *arg)
{
	auto &r = *static_cast<session<Q> *>(arg);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(r.rt->qsbr(), tid);
	r.running.store(true, std::memory_order_release);
	for (;;) {
		const uint64_t now = rte_rdtsc();
		if (r.pub != nullptr) {
			publish_some(r, now);
			/* --mode pub: the port's own receive side still hands
			 * ARP/ND to the control thread (and sends its answers);
			 * datagrams to the publisher are not expected. */
			if (r.sw == nullptr)
				discard_rx(*r.pub_q);
		}
		if (r.sw != nullptr)
			r.sw->forward();
		for (size_t k = 0; k < r.subs.size(); k++)
			while (receive_some(r, k, rte_rdtsc()))
				;
		rte_rcu_qsbr_quiescent(r.rt->qsbr(), tid);
		if (r.stop.load(std::memory_order_relaxed))
			break;
		/* Done: publisher finished and (both) the wires drained, or a
		 * subscriber idle for idle_timeout after its last message. */
		if (r.pub != nullptr && r.pub->done && r.drain_until == 0)
			r.drain_until = now + r.hz / 5; /* 200 ms for the last frames */
		if (r.pub != nullptr && r.pub->done && (r.subs.empty() || now > r.drain_until))
			break;
		if (r.pub == nullptr) {
			/* A fresh clock: receive_some stamped last_rx after now
			 * was read, and now - last_rx would wrap around. */
			const uint64_t t = rte_rdtsc();
			bool idle = true;
			for (auto &s : r.subs)
				idle &= s->last_rx != 0 && t > s->last_rx && t - s->last_rx > r.idle_ticks;
			if (idle || (r.end_tsc != 0 && now >= r.end_tsc) || *r.signalled)
				break;
		}
	}
	poll_thread_offline(r.rt->qsbr(), tid);
	r.finished.store(true, std::memory_order_release);
	return 0;
}

/* After the groups were left (poll thread stopped): ticks of polling so
 * the leave frames go out and what still arrives is freed. (Main thread,
 * with no poll thread running.) */
template <ud_driver Q> void drain(session<Q> &r, uint64_t ticks)
{
	const uint64_t until = rte_rdtsc() + ticks;
	while (rte_rdtsc() < until) {
		for (Q *q : r.sub_q)
			discard_rx(*q);
		if (r.sw != nullptr)
			r.sw->forward();
	}
}

} // namespace rdgram::mcast

#endif
