/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast's data path: the publisher (paced, sequence-numbered,
 * TSC-stamped messages to its groups), the subscribers (sequence checks
 * and the one-way latency histogram) and the poll loop that runs them, in
 * turn, on each worker's poll thread (its own queue of every port), with
 * the in-process switch between the ports on worker 0 in --mode both.
 * Everything is a template over the driver's queue type
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

/* The publisher's part of one worker: what it sends to, and how far it
 * got. */
struct pub_state {
	std::vector<uint32_t> groups; /* the indices (in the config) of the groups this worker publishes */
	std::vector<ah_handle> ahs;   /* per group index; used for this worker's groups */
	std::vector<uint32_t> qkeys;  /* per group index: the Q_Key to send with */
	pacer pace;
	uint64_t next_seq = 1;         /* sequence numbers start at 1 */
	uint64_t last_seq = 0;         /* the highest number handed to the driver */
	std::atomic<uint64_t> sent{0}; /* messages (per group) handed over; the status line reads it */
	std::unique_ptr<uint64_t[]> accepted; /* per group index: WRs the queue took (duplicates included) */
	std::unique_ptr<uint8_t[]> bufs; /* burst payloads */
	bool done = false;
	uint64_t refused = 0; /* WRs the port queue never took */
};

/* One subscriber's view of the streams, on one worker. The counters are
 * relaxed atomics written by the poll thread alone, so the status line
 * can read them. */
struct sub_state {
	std::unique_ptr<seq_tracker[]> trk; /* per group index */
	apps::latency_hist hist;
	std::atomic<uint64_t> received{0}, malformed{0}, foreign{0}, max_ns{0};
	uint64_t last_rx = 0; /* TSC of the last message */
};

/* What every worker of a run shares: the options, the clock, and how the
 * publishers are getting on. Built on the main thread before the workers
 * start. */
struct run_shared {
	const mcast_config *c = nullptr;
	runtime *rt = nullptr;
	const volatile sig_atomic_t *signalled = nullptr; /* SIGINT/SIGTERM seen */
	uint64_t hz = 0, start = 0, end_tsc = 0;
	uint64_t idle_ticks = 0;        /* sub: stop after this long without data */
	unsigned pub_workers = 0;       /* workers with a publisher part */
	std::atomic<unsigned> pubs_done{0};
	std::atomic<bool> stop{false};
};

/* One worker (poll thread): its queue of the publisher's port (if any),
 * its queue of every subscriber's port, and, on worker 0 of --mode both,
 * the switch. Built on the main thread before the workers start; the
 * worker then owns everything but the atomics. */
template <ud_driver Q> struct worker {
	static_assert(Q::max_burst >= burst);

	run_shared *r = nullptr;
	unsigned index = 0;
	unsigned lcore = 0;
	Q *pub_q = nullptr;
	std::unique_ptr<pub_state> pub; /* with pub_q */
	std::vector<Q *> sub_q;
	std::vector<std::unique_ptr<sub_state>> subs; /* subs[k] reads sub_q[k] */
	std::vector<uint32_t> sub_groups;             /* the group indices its subscriber QPs attached */
	flood_switch *sw = nullptr;                   /* worker 0, --mode both */
	bool in_both = false;                         /* --mode both: the switch feeds the ports */
	uint64_t drain_until = 0;                     /* publishers done, wires draining */
	bool pub_counted = false;
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

/* A worker's publisher share of one loop turn: as many messages as the
 * pacer allows, each to every group the worker publishes. (NOT multi-thread safe: the poll thread.) */
template <ud_driver Q> void publish_some(worker<Q> &w, uint64_t now)
{
	const run_shared &r = *w.r;
	const mcast_config &c = *r.c;
	pub_state &p = *w.pub;
	const uint32_t ng = uint32_t(p.groups.size());
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
	uint8_t grp[burst]; /* the group index of each WR */
	uint32_t nw = 0;
	const uint64_t tsc = rte_rdtsc();
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t s = p.next_seq;
		/* Fault injection: a skipped number is never sent (a gap), a
		 * duplicated one goes twice. Lists are a few entries long. */
		const bool skip = !c.skip_seq.empty() && is_listed(c.skip_seq, s);
		const unsigned copies = (!c.dup_seq.empty() && is_listed(c.dup_seq, s)) ? 2 : 1;
		/* A duplicate's second copy takes room in the burst: a message
		 * that no longer fits waits for the next turn (its token is
		 * spent: it goes a little late) rather than being lost. */
		if (!skip && nw + copies * ng > burst)
			break;
		p.next_seq++;
		if (skip)
			continue;
		for (unsigned k = 0; k < copies; k++)
			for (uint32_t j = 0; j < ng; j++) {
				const uint32_t g = p.groups[j];
				uint8_t *b = p.bufs.get() + size_t(nw) * c.size;
				msg_hdr h{msg_magic, c.publisher_id, s, tsc, g, c.size};
				memcpy(b, &h, sizeof(h));
				grp[nw] = uint8_t(g);
				wrs[nw++] = send_wr{p.ahs[g], group_qpn, p.qkeys[g], nullptr, b, c.size, 0, send_inline};
			}
		p.last_seq = s;
	}
	uint32_t off = 0;
	/* The port queue takes everything unless it is full: retry on this
	 * turn, the switch drains the ring on the next one. */
	for (unsigned tries = 0; off < nw && tries < 64; tries++)
		off += w.pub_q->tx_burst(wrs + off, uint16_t(nw - off));
	p.refused += nw - off; /* inline payloads: nothing to free */
	for (uint32_t i = 0; i < off; i++)
		p.accepted[grp[i]]++;
	w.pub_q->tx_flush();
	p.sent.store(p.last_seq, std::memory_order_relaxed);
}

/* Subscriber k's share: every completion checked and recorded; true when
 * there was one. now: the clock before the burst (read again after it).
 * (NOT multi-thread safe: the poll thread.) */
template <ud_driver Q> bool receive_some(worker<Q> &w, size_t k, uint64_t now)
{
	const run_shared &r = *w.r;
	sub_state &s = *w.subs[k];
	recv_wc wcs[burst];
	const uint16_t n = w.sub_q[k]->rx_burst(wcs, burst);
	const uint32_t ng = uint32_t(r.c->groups.size());
	/* With several workers the sender is another thread: a clock read
	 * before the burst may precede its stamp. One read per burst. */
	if (n != 0)
		now = rte_rdtsc();
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

/* A worker's poll thread (run_workers' fn; arg: the worker). Runs until
 * every publisher worker is done and the wires drained, its subscribers
 * were idle for idle_timeout after their last message (--mode sub),
 * --duration is over, a signal came, or stop is set. */
template <ud_driver Q> int poll_loop(void *arg)
{
	auto &w = *static_cast<worker<Q> *>(arg);
	run_shared &r = *w.r;
	const unsigned tid = rte_lcore_id();
	poll_thread_online(r.rt->qsbr(), tid);
	for (;;) {
		const uint64_t now = rte_rdtsc();
		if (w.pub != nullptr) {
			publish_some(w, now);
			/* --mode pub: the port's own receive side still hands
			 * ARP/ND to the control thread (and sends its answers);
			 * datagrams to the publisher are not expected. */
			if (!w.in_both)
				discard_rx(*w.pub_q);
			if (w.pub->done && !w.pub_counted) {
				w.pub_counted = true;
				r.pubs_done.fetch_add(1, std::memory_order_release);
			}
		}
		if (w.sw != nullptr)
			w.sw->forward();
		for (size_t k = 0; k < w.subs.size(); k++)
			while (receive_some(w, k, rte_rdtsc()))
				;
		rte_rcu_qsbr_quiescent(r.rt->qsbr(), tid);
		if (r.stop.load(std::memory_order_relaxed))
			break;
		if (r.pub_workers != 0) {
			/* A publisher in the process: a worker with nothing but
			 * its publisher part stops with it; one with subscribers
			 * or the switch once every publisher worker is done and
			 * the wires drained (200 ms for the last frames). */
			if (w.subs.empty() && w.sw == nullptr) {
				if (w.pub == nullptr || w.pub->done)
					break;
				continue;
			}
			if (r.pubs_done.load(std::memory_order_acquire) != r.pub_workers)
				continue;
			if (w.drain_until == 0)
				w.drain_until = now + r.hz / 5;
			if (now > w.drain_until)
				break;
			continue;
		}
		/* --mode sub: idle for idle_timeout after its last message. A
		 * fresh clock: receive_some stamped last_rx after now was read,
		 * and now - last_rx would wrap around. */
		const uint64_t t = rte_rdtsc();
		bool idle = true;
		for (auto &s : w.subs)
			idle &= s->last_rx != 0 && t > s->last_rx && t - s->last_rx > r.idle_ticks;
		if (idle || (r.end_tsc != 0 && now >= r.end_tsc) || *r.signalled)
			break;
	}
	poll_thread_offline(r.rt->qsbr(), tid);
	return 0;
}

/* After the groups were left (every worker stopped): ticks of polling so
 * the leave frames go out and what still arrives is freed. (Main thread,
 * with no worker running.) */
template <ud_driver Q> void drain(std::vector<std::unique_ptr<worker<Q>>> &ws, uint64_t ticks)
{
	const uint64_t until = rte_rdtsc() + ticks;
	while (rte_rdtsc() < until)
		for (auto &w : ws) {
			for (Q *q : w->sub_q)
				discard_rx(*q);
			if (w->sw != nullptr)
				w->sw->forward();
		}
}

} // namespace rdgram::mcast

#endif
