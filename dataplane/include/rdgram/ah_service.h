/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The AH service: how a destination key becomes a wire-ready AV without a
 * poll thread ever waiting, and how applications create AHs with verbs
 * semantics without the control thread ever blocking.
 *
 *   poll thread (ah_client)                     control thread (ah_service)
 *   -----------------------                     ---------------------------
 *   send_burst(keys, wrs):
 *     dest_cache.lookup_bulk ── hit ──▶ tx_burst
 *       │ miss
 *       ▼
 *     pending queue (bounded: destinations,
 *     per destination, in total; deadline)
 *     first miss for a key ── req ring ──────▶  dest_cache hit? (another
 *                                                poll thread asked first)
 *                                               device.prepare_ah:
 *                                                 EINPROGRESS: wait (ARP/ND
 *                                                 runs in device.poll), ask
 *                                                 again when it did work
 *                                                 0: registry.acquire ->
 *                                                    dest_cache.insert ->
 *                                                    release (cached, LRU)
 *                                                 error: answer the errno
 *   poll(): ◀──────────────────── resp ring ──  answer {handle | errno}
 *     handle: flush the destination's
 *             messages in order (tx_burst)
 *     errno:  drop them, counted by errno
 *     deadline passed: drop, count pend_timeout
 *
 * Every message handed to send_burst is sent, waits, or is dropped under a
 * named reason (ah_client_counters), and its mbuf is freed exactly once.
 *
 * Threads: one ah_client per poll thread (its methods: that thread only;
 * no syscall, no lock, no heap allocation: the pending queue is arrays
 * allocated at init). ah_service::poll runs on the control thread (a
 * control_thread poller). The application API (create_ah, destroy_ah,
 * create_ah_batch, create_ah_from_wc) runs on any thread that is neither a
 * poll thread nor the control thread: it hands the work to the control
 * thread and sleeps while neighbour resolution runs; the control thread
 * itself never blocks on the network.
 *
 * Every registry entry is in the dest_cache (inserted at creation, erased by
 * the registry's eviction hook), so the poll threads see exactly the AHs the
 * host has. Entries the application holds (create_ah) are referenced and
 * never evicted; entries created for a poll thread's miss are unreferenced
 * from the start: cached until capacity forces them out in LRU order.
 */
#ifndef RDGRAM_AH_SERVICE_H
#define RDGRAM_AH_SERVICE_H

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "rdgram/ah_from_wc.h"
#include "rdgram/ah_registry.h"
#include "rdgram/control.h"
#include "rdgram/dest_cache.h"
#include "rdgram/device.h"
#include "rdgram/tsan.h"
#include "rdgram/ud.h"

namespace rdgram {

/* Why a message handed to ah_client::send_burst did not leave. */
#define RDGRAM_PEND_DROPS(X)                                                   \
	X(pend_no_dest, "pending queue: every destination slot in use")         \
	X(pend_dest_full, "pending queue: per-destination bound reached")       \
	X(pend_total_full, "pending queue: total message bound reached")        \
	X(pend_no_mbuf, "pending queue: no mbuf to hold an inline payload")     \
	X(pend_ring_full, "miss request ring to the control thread full")       \
	X(pend_timeout, "destination not resolved before the deadline")         \
	X(pend_einval, "AH creation failed: EINVAL (bad attributes)")            \
	X(pend_enomem, "AH creation failed: ENOMEM (table full of held AHs)")    \
	X(pend_etimedout, "AH creation failed: ETIMEDOUT (neighbour silent)")    \
	X(pend_ehostunreach, "AH creation failed: EHOSTUNREACH (no neighbour)") \
	X(pend_other_error, "AH creation failed: another errno")

struct ah_client_counters {
	uint64_t hits;      /* messages whose destination was cached */
	uint64_t misses;    /* messages that had to wait */
	uint64_t requests;  /* miss requests sent to the control thread */
	uint64_t flushed;   /* waiting messages sent once their AH was ready */
	uint64_t reply_bad_wc; /* reply_key: completion/GRH unusable (no send) */
#define X(name, desc) uint64_t name;
	RDGRAM_PEND_DROPS(X)
#undef X
	uint64_t drops() const
	{
		return 0
#define X(name, desc) +name
			RDGRAM_PEND_DROPS(X)
#undef X
			;
	}
};

struct ah_client_config {
	uint32_t max_dests = 256;    /* destinations waiting at once */
	uint32_t max_per_dest = 64;  /* messages waiting for one destination */
	uint32_t max_total = 4096;   /* messages waiting in total */
	uint64_t timeout_us = 1000000; /* a waiting message's deadline */
	rte_mempool *mp = nullptr;   /* holds inline payloads that must wait */
	int socket = SOCKET_ID_ANY;  /* the poll thread's NUMA node */
};

class ah_service;

/*
 * One poll thread's view of the AH service: resolution through the
 * dest_cache and the bounded pending queue for misses.
 * (NOT thread safe: owned by one poll thread. init/fini: control path.)
 */
class ah_client {
public:
	ah_client() = default;
	ah_client(const ah_client &) = delete;
	ah_client &operator=(const ah_client &) = delete;
	~ah_client() { fini(); }

	/* Sends wrs[i] to the destination keys[i], i < n. wrs[i].ah is
	 * overwritten. Returns how many WRs it took from the front of the
	 * array: each was accepted by the driver, queued until its AH is ready,
	 * or dropped and counted (ah_client_counters; its mbuf freed). It
	 * stops early only when the driver takes no more: the caller keeps
	 * wrs[ret..n). now is rte_get_tsc_cycles(). */
	template <ud_driver D>
	uint16_t send_burst(D &q, const ah_key *keys, send_wr *wrs, uint16_t n, uint64_t now);

	/* Takes the control thread's answers: flushes the messages of every
	 * destination that became ready (in the order they were queued), drops
	 * those whose AH failed, and expires deadlines. Call once per loop.
	 * Returns the messages sent. */
	template <ud_driver D> unsigned poll(D &q, uint64_t now);

	/* Reply path: the key that answers the sender of wc (whose mbuf data
	 * begins with the 40-byte GRH area), derived as ibv_init_ah_from_wc(3)
	 * does. 0 or the errno value (counted in reply_bad_wc). */
	int reply_key(const recv_wc &wc, ah_key *out)
	{
		ibv_ah_attr a;
		if (unlikely(init_ah_from_wc(*port_, *gids_, 1, wc, rte_pktmbuf_mtod(wc.mbuf, const void *),
					     &a) != 0)) {
			ctr_.reply_bad_wc++;
			return errno;
		}
		*out = ah_key::of(a);
		return 0;
	}

	const ah_client_counters &counters() const { return ctr_; }
	uint32_t waiting_messages() const { return total_; }
	uint32_t waiting_destinations() const { return active_; }

	/* Frees everything, dropping waiting messages (counted as timeouts).
	 * (Control path, after the poll thread stopped and the service removed
	 * this client.) */
	void fini();

private:
	friend class ah_service;
	enum : uint8_t { st_free, st_asked, st_ready, st_abandoned };
	struct pdest {
		ah_key key;
		uint64_t deadline;
		uint32_t head, tail, count; /* message list */
		uint8_t state;
		/* Written by the control thread before it answers. */
		ah_handle result;
		int err;
	};
	struct pmsg {
		send_wr wr;
		uint32_t next;
	};
	static constexpr uint32_t nil = UINT32_MAX;

	int init(const ah_client_config &c, const dest_cache *dc, const port_attr *port,
		 const gid_index *gids, unsigned id);

	uint32_t find(const ah_key &k, uint64_t hv) const
	{
		for (uint32_t i = uint32_t(hv) & imask_;; i = (i + 1) & imask_) {
			uint32_t d = index_[i];
			if (d == nil)
				return nil;
			if (dests_[d].key == k)
				return d;
		}
	}
	void index_insert(uint32_t d, uint64_t hv)
	{
		uint32_t i = uint32_t(hv) & imask_;
		while (index_[i] != nil)
			i = (i + 1) & imask_;
		index_[i] = d;
	}
	/* Backward-shift deletion keeps probes short without tombstones. */
	void index_erase(uint32_t d)
	{
		uint32_t i = uint32_t(dest_cache::hash(dests_[d].key)) & imask_;
		while (index_[i] != d)
			i = (i + 1) & imask_;
		for (uint32_t j = (i + 1) & imask_;; j = (j + 1) & imask_) {
			uint32_t e = index_[j];
			if (e == nil)
				break;
			uint32_t home = uint32_t(dest_cache::hash(dests_[e].key)) & imask_;
			/* Move e into the hole at i if its home is not in (i, j]. */
			if (((j - home) & imask_) >= ((j - i) & imask_)) {
				index_[i] = e;
				i = j;
			}
		}
		index_[i] = nil;
	}

	void drop_wr(send_wr &wr, uint64_t &ctr)
	{
		if (!(wr.flags & send_inline))
			rte_pktmbuf_free(wr.mbuf);
		ctr++;
	}
	void defer(const ah_key &k, send_wr &wr, uint64_t now);
	/* Drops every message waiting for d under ctr. */
	void drop_all(pdest &d, uint64_t &ctr)
	{
		for (uint32_t m = d.head; m != nil;) {
			uint32_t nx = msgs_[m].next;
			drop_wr(msgs_[m].wr, ctr);
			free_msg_[nfree_msg_++] = m;
			m = nx;
		}
		total_ -= d.count;
		d.head = d.tail = nil;
		d.count = 0;
	}
	void release_dest(uint32_t d)
	{
		dests_[d].state = st_free;
		free_dest_[nfree_dest_++] = d;
		active_--;
	}
	uint64_t &err_counter(int e)
	{
		switch (e) {
		case EINVAL: return ctr_.pend_einval;
		case ENOMEM: return ctr_.pend_enomem;
		case ETIMEDOUT: return ctr_.pend_etimedout;
		case EHOSTUNREACH: return ctr_.pend_ehostunreach;
		default: return ctr_.pend_other_error;
		}
	}
	template <ud_driver D> bool flush(D &q, uint32_t d);
	void expire(uint64_t now);

	ah_client_config cfg_{};
	const dest_cache *dc_ = nullptr;
	const port_attr *port_ = nullptr;
	const gid_index *gids_ = nullptr;
	rte_ring *req_ = nullptr;  /* poll thread -> control: dest indices */
	rte_ring *resp_ = nullptr; /* control -> poll thread: dest indices */
	pdest *dests_ = nullptr;
	pmsg *msgs_ = nullptr;
	uint32_t *index_ = nullptr; /* open addressing: key -> dest, nil empty */
	uint32_t imask_ = 0;
	uint32_t *free_dest_ = nullptr, nfree_dest_ = 0;
	uint32_t *free_msg_ = nullptr, nfree_msg_ = 0;
	uint32_t *ready_ = nullptr, nready_ = 0; /* answered, messages left */
	uint32_t active_ = 0; /* destinations not free (asked/ready/abandoned) */
	uint32_t total_ = 0;  /* messages waiting */
	uint64_t timeout_cyc_ = 0;
	uint64_t next_deadline_ = UINT64_MAX;
	ah_client_counters ctr_{};
};

struct ah_service_stats {
	uint64_t requests;       /* poll-thread misses received */
	uint64_t answered_cached; /* another request had created it already */
	uint64_t created, failed; /* through the miss path */
	uint64_t neigh_waits;    /* requests that waited for ARP/ND */
	uint64_t app_creates, app_destroys;
};

struct ah_service_config {
	uint32_t capacity = 65536; /* AHs on the host (the device's max_ah caps it) */
	int socket = SOCKET_ID_ANY; /* where the dest_cache lives (poll threads' node) */
	rte_rcu_qsbr *qsbr = nullptr; /* the poll threads' QSBR variable */
	uint64_t app_timeout_us = 3000000; /* create_ah's wait for neighbours */
};

/*
 * The control-thread side. start() registers a control_thread poller that
 * runs the device's housekeeping and answers the clients' misses.
 */
class ah_service {
public:
	static constexpr unsigned max_clients = 64;

	ah_service() = default;
	ah_service(const ah_service &) = delete;
	ah_service &operator=(const ah_service &) = delete;
	~ah_service() { stop(); }

	/* (Main thread, before poll threads run.) 0 or an errno value. */
	int start(device &dev, control_thread &ctl, const ah_service_config &cfg);
	/* Removes the poller, destroys every AH (main thread, after the poll
	 * threads stopped and their clients were removed). */
	void stop();

	/* Sets c up for one poll thread and attaches it. (Main thread.) */
	int add_client(ah_client &c, const ah_client_config &cfg);
	/* Detaches c (its waiting messages are dropped by c.fini()). */
	void remove_client(ah_client &c);

	/*
	 * Application API, ibv_create_ah(3) semantics: a referenced handle, or
	 * ah_null with *err set: EINVAL (bad port, sgid_index, missing GRH on a
	 * GRH-required port, bad GID), ENOMEM (table full of referenced AHs),
	 * ETIMEDOUT (the neighbour did not answer, or not within
	 * app_timeout_us), EHOSTUNREACH (no way to resolve it). Waits (sleeping)
	 * while the neighbour is resolved. (Any thread but poll threads and the
	 * control thread.)
	 */
	ah_handle create_ah(const ibv_ah_attr &attr, int *err);
	/* ibv_destroy_ah(3): drops the reference create_ah took; 0, or EINVAL
	 * for a handle not held (stale, never created, destroyed twice). The AV
	 * stays cached for poll threads until evicted. */
	int destroy_ah(ah_handle h);
	/* The HPC "AH storm": creates n AHs at once (neighbour resolution for
	 * all of them in parallel). out[i]/errs[i] as create_ah. Returns how
	 * many succeeded. */
	unsigned create_ah_batch(const ibv_ah_attr *attrs, unsigned n, ah_handle *out, int *errs);
	/* ibv_create_ah_from_wc(3): the reply AH for wc (GRH area at grh). */
	ah_handle create_ah_from_wc(const recv_wc &wc, const void *grh, int *err);

	const dest_cache &cache() const { return dc_; }
	const port_attr &port() const { return dev_->port(); }
	const gid_index &gids() const { return gids_; }
	/* Control thread only. */
	ah_registry &registry() { return *reg_; }
	/* A snapshot, taken on the control thread. (Application threads.) */
	ah_service_stats stats()
	{
		ah_service_stats s{};
		ctl_->call([&] { s = st_; });
		return s;
	}
	control_thread &ctl() { return *ctl_; }

private:
	struct waiter {
		ah_client *c;
		uint32_t d; /* dest index in c; nil: an application batch slot */
		int *app_state; /* application waits: EINPROGRESS until answered */
	};
	static bool poll_cb(void *arg, uint64_t now) { return static_cast<ah_service *>(arg)->poll(now); }
	bool poll(uint64_t now);
	/* Creates (or finds) the AH for k, unreferenced and cached; 0 or errno
	 * in *err. prepare must have said 0. */
	ah_handle create_cached(const ah_key &k, int *err);
	void answer(const waiter &w, ah_handle h, int err);
	void handle_request(ah_client *c, uint32_t d);
	void recheck_waiting();
	static void on_evict(void *arg, const ah_key &k, ah_handle h);

	device *dev_ = nullptr;
	control_thread *ctl_ = nullptr;
	ah_service_config cfg_{};
	ah_registry *reg_ = nullptr;
	dest_cache dc_;
	gid_index gids_;
	ah_client *clients_[max_clients]{}; /* control thread only (set via call) */
	unsigned nclients_ = 0;
	std::unordered_map<ah_key, std::vector<waiter>, ah_key_hash> waiting_;
	uint64_t next_recheck_ = 0;
	ah_service_stats st_{};
	bool started_ = false;
};

/* ---- ah_client: poll-thread code ---------------------------------------- */

template <ud_driver D>
uint16_t ah_client::send_burst(D &q, const ah_key *keys, send_wr *wrs, uint16_t n, uint64_t now)
{
	uint16_t done = 0;
	while (done < n) {
		const unsigned chunk = RTE_MIN(unsigned(n - done), dest_cache::max_bulk);
		ah_handle hs[dest_cache::max_bulk];
		uint64_t hit;
		dc_->lookup_bulk(keys + done, chunk, hs, &hit);
		/* Keep a destination's messages in order: while any message waits
		 * for a key, later messages to it wait behind it even if the AH
		 * became ready in between. Costs nothing when nothing waits. */
		if (unlikely(active_ != 0))
			for (unsigned i = 0; i < chunk; i++)
				if ((hit >> i & 1) && find(keys[done + i], dest_cache::hash(keys[done + i])) != nil)
					hit &= ~(1ull << i);
		unsigned i = 0;
		while (i < chunk) {
			unsigned j = i;
			while (j < chunk && (hit >> j & 1)) {
				wrs[done + j].ah = hs[j];
				j++;
			}
			for (unsigned k = i; k < j;) {
				uint16_t s = q.tx_burst(wrs + done + k, uint16_t(j - k));
				ctr_.hits += s;
				k += s;
				if (s == 0)
					return uint16_t(done + k);
			}
			if (j < chunk) {
				defer(keys[done + j], wrs[done + j], now);
				j++;
			}
			i = j;
		}
		done = uint16_t(done + chunk);
	}
	return n;
}

inline void ah_client::defer(const ah_key &k, send_wr &wr, uint64_t now)
{
	ctr_.misses++;
	const uint64_t hv = dest_cache::hash(k);
	uint32_t d = find(k, hv);
	if (d == nil) {
		if (unlikely(nfree_dest_ == 0)) {
			drop_wr(wr, ctr_.pend_no_dest);
			return;
		}
		d = free_dest_[--nfree_dest_];
		pdest &p = dests_[d];
		p.key = k;
		p.deadline = now + timeout_cyc_;
		p.head = p.tail = nil;
		p.count = 0;
		p.state = st_asked;
		p.err = 0;
		RDGRAM_TSAN_RELEASE(&p);
		if (unlikely(rte_ring_sp_enqueue(req_, reinterpret_cast<void *>(uintptr_t(d))) != 0)) {
			p.state = st_free;
			free_dest_[nfree_dest_++] = d;
			drop_wr(wr, ctr_.pend_ring_full);
			return;
		}
		ctr_.requests++;
		active_++;
		index_insert(d, hv);
		if (p.deadline < next_deadline_)
			next_deadline_ = p.deadline;
	}
	pdest &p = dests_[d];
	if (unlikely(p.count >= cfg_.max_per_dest)) {
		drop_wr(wr, ctr_.pend_dest_full);
		return;
	}
	if (unlikely(total_ >= cfg_.max_total || nfree_msg_ == 0)) {
		drop_wr(wr, ctr_.pend_total_full);
		return;
	}
	const uint32_t m = free_msg_[--nfree_msg_];
	pmsg &pm = msgs_[m];
	pm.wr = wr;
	pm.next = nil;
	if (wr.flags & send_inline) {
		/* The caller keeps inline bytes only for the call: copy them. */
		rte_mbuf *mb = cfg_.mp != nullptr ? rte_pktmbuf_alloc(cfg_.mp) : nullptr;
		if (unlikely(mb == nullptr || rte_pktmbuf_append(mb, uint16_t(wr.inline_len)) == nullptr)) {
			if (mb != nullptr)
				rte_pktmbuf_free(mb);
			free_msg_[nfree_msg_++] = m;
			ctr_.pend_no_mbuf++;
			return;
		}
		memcpy(rte_pktmbuf_mtod(mb, void *), wr.inline_data, wr.inline_len);
		pm.wr.mbuf = mb;
		pm.wr.flags = uint16_t(wr.flags & ~send_inline);
		pm.wr.inline_data = nullptr;
		pm.wr.inline_len = 0;
	}
	if (p.tail == nil)
		p.head = m;
	else
		msgs_[p.tail].next = m;
	p.tail = m;
	p.count++;
	total_++;
}

template <ud_driver D> bool ah_client::flush(D &q, uint32_t d)
{
	pdest &p = dests_[d];
	while (p.head != nil) {
		send_wr batch[D::max_burst];
		unsigned nb = 0;
		for (uint32_t m = p.head; m != nil && nb < D::max_burst; m = msgs_[m].next) {
			batch[nb] = msgs_[m].wr;
			batch[nb].ah = p.result;
			nb++;
		}
		const uint16_t s = q.tx_burst(batch, uint16_t(nb));
		for (unsigned i = 0; i < s; i++) {
			const uint32_t m = p.head;
			p.head = msgs_[m].next;
			free_msg_[nfree_msg_++] = m;
		}
		p.count -= s;
		total_ -= s;
		ctr_.flushed += s;
		if (s < nb) {
			if (p.head == nil)
				p.tail = nil;
			return false; /* driver full: the rest waits for the next poll */
		}
	}
	p.tail = nil;
	return true;
}

template <ud_driver D> unsigned ah_client::poll(D &q, uint64_t now)
{
	const uint64_t flushed0 = ctr_.flushed;
	void *ans[32];
	const unsigned n = rte_ring_sc_dequeue_burst(resp_, ans, 32, nullptr);
	for (unsigned i = 0; i < n; i++) {
		const uint32_t d = uint32_t(reinterpret_cast<uintptr_t>(ans[i]));
		pdest &p = dests_[d];
		RDGRAM_TSAN_ACQUIRE(&p);
		if (p.state == st_abandoned) { /* timed out before the answer */
			release_dest(d);
			continue;
		}
		if (p.err != 0) {
			index_erase(d); /* new misses for this key start afresh */
			drop_all(p, err_counter(p.err));
			release_dest(d);
			continue;
		}
		/* Stays in the index until flushed: later messages to the key
		 * queue behind the waiting ones (order kept). */
		p.state = st_ready;
		ready_[nready_++] = d;
	}
	/* Ready destinations: send what waits, oldest destination first. */
	unsigned k = 0;
	for (unsigned i = 0; i < nready_; i++) {
		const uint32_t d = ready_[i];
		if (flush(q, d)) {
			index_erase(d);
			release_dest(d);
		} else
			ready_[k++] = d;
	}
	nready_ = k;
	if (unlikely(now >= next_deadline_))
		expire(now);
	return unsigned(ctr_.flushed - flushed0);
}

inline void ah_client::expire(uint64_t now)
{
	uint64_t next = UINT64_MAX;
	/* Asked and ready destinations are in the index; ready ones also in
	 * ready_. A scan of
	 * the dest array is bounded by max_dests and runs only when a deadline
	 * has passed. */
	for (uint32_t d = 0; d < cfg_.max_dests; d++) {
		pdest &p = dests_[d];
		if (p.state != st_asked && p.state != st_ready)
			continue;
		if (p.deadline > now) {
			next = RTE_MIN(next, p.deadline);
			continue;
		}
		drop_all(p, ctr_.pend_timeout);
		index_erase(d);
		if (p.state == st_asked) {
			/* The answer will still come: keep the slot until then. */
			p.state = st_abandoned;
		} else {
			for (unsigned i = 0; i < nready_; i++)
				if (ready_[i] == d) {
					ready_[i] = ready_[--nready_];
					break;
				}
			release_dest(d);
		}
	}
	next_deadline_ = next;
}

} // namespace rdgram

#endif
