/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Receive attribution with EFA semantics, end to end: which peer sent each
 * datagram, from what the completion reports (wc.slid = the receiver's AH
 * number "ahn" for the sender's address, 0xFFFF when it has none; wc.sgid;
 * wc.src_qp) plus the connection id the application's protocol carries (a
 * random Q_Key per endpoint, as libfabric's EFA provider uses).
 *
 *   poll thread (ahn_attrib_client)             control thread (ahn_attrib)
 *   -------------------------------             ---------------------------
 *   attribute(wc, connid):
 *     slid != 0xFFFF: ahn_map (ahn, qpn, connid) ── hit: peer (by_ahn)
 *     miss or 0xFFFF: SGID fallback: by_gid[sgid]
 *       -> our ahn -> ahn_map ─────────────── hit: peer (by_gid)
 *     else: unknown (the caller still has the
 *       datagram and its SGID), and at most once
 *       per reask_us per (sgid, qpn, connid):
 *       {sgid, dgid, qpn, connid} ── ring ──────▶  already bound? duplicate, done
 *                                                 (one AH per sender address)
 *                                                 device.prepare_ah: EINPROGRESS
 *                                                   -> dropped, the next unknown
 *                                                      datagram asks again
 *                                                 registry.acquire + release
 *                                                   (cached, unreferenced: LRU;
 *                                                    full device: evict, retry once)
 *                                                 ahn_map.bind(slot, qpn, connid)
 *                                                 by_gid.insert(sgid -> slot)
 *                                               registry eviction hook:
 *                                                 unbind the address's peers,
 *                                                 by_gid.erase (before the
 *                                                 driver destroys the AH)
 *
 * Why the SGID fallback: a datagram can carry 0xFFFF although its sender's
 * AH exists (received before the AH was created and read afterwards, or the
 * device's report lagging creation: libfabric issues #7856 and #11831), or
 * carry an ahn that is not ours (another user of the device created an AH
 * to that address first). by_gid maps the sender's address to the ahn this
 * component bound, so such a datagram is attributed in O(1) like the
 * others, and the mapping is never created twice (the control thread keeps
 * one record per (sgid, qpn, connid) and answers repeats as duplicates).
 *
 * Why no mis-attribution: ahn_map only ever holds (ahn, qpn, connid) for an
 * ahn that is a live AH of this component to the peer's own address; the
 * binding goes before the AH is destroyed (the eviction hook runs first),
 * and the driver reuses the slot only after a QSBR grace period. A poll
 * thread attributes the datagrams of a burst before it reports a quiescent
 * state, so a slid it read cannot have been reused for another address in
 * between. Connection ids keep a reused QPN apart (ahn_map's previous
 * incarnations, forgotten forget_after_us after the new one was bound).
 *
 * Threads: one ahn_attrib_client per poll thread (its methods: that thread
 * only; no syscall, no lock, no heap allocation, no virtual call);
 * ahn_attrib's methods on the control thread (poll() as a control_thread
 * poller), add_client/start/stop as documented.
 *
 * The registry given to init may be shared (ah_service's, for one AH per
 * destination in the whole process): init adds an eviction hook to its
 * list, beside ah_service's for its dest_cache. Other AHs to the same
 * addresses on the same device are harmless: their ahn is not bound here,
 * and the SGID fallback attributes.
 */
#ifndef RDGRAM_AHN_ATTRIB_H
#define RDGRAM_AHN_ATTRIB_H

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include <rte_branch_prediction.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>

#include "rdgram/ah_from_wc.h"
#include "rdgram/ah_registry.h"
#include "rdgram/ahn_map.h"
#include "rdgram/control.h"
#include "rdgram/dest_cache.h"
#include "rdgram/device.h"
#include "rdgram/ud.h"

/* The requests travel in DPDK's generic rte_ring, whose element copies
 * TSan sees as races (tests/tsan.supp suppresses them, but every suppressed
 * report costs TSan a stack unwind and symbolization: 100x slower control
 * thread under churn). The element is plain values copied out on both
 * sides, so its ring accesses are hidden from TSan instead. */
#if defined(RDGRAM_TSAN_BUILD)
extern "C" void AnnotateIgnoreReadsBegin(const char *f, int l);
extern "C" void AnnotateIgnoreReadsEnd(const char *f, int l);
extern "C" void AnnotateIgnoreWritesBegin(const char *f, int l);
extern "C" void AnnotateIgnoreWritesEnd(const char *f, int l);
#define RDGRAM_AHN_RING_BEGIN()                                     \
	(AnnotateIgnoreReadsBegin(__FILE__, __LINE__),               \
	 AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define RDGRAM_AHN_RING_END()                                       \
	(AnnotateIgnoreWritesEnd(__FILE__, __LINE__),                \
	 AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#else
#define RDGRAM_AHN_RING_BEGIN() ((void)0)
#define RDGRAM_AHN_RING_END() ((void)0)
#endif

namespace rdgram {

/* How a receive was attributed (poll-thread counters, one per outcome). */
#define RDGRAM_AHN_ATTRIB_COUNTERS(X)                                                  \
	X(by_ahn, "attributed by (ahn, source QPN, connection id)")                  \
	X(by_gid, "attributed by SGID fallback (0xFFFF or an ahn not bound here)")   \
	X(previous, "attributed to an earlier incarnation (its QPN reused since)")   \
	X(unknown, "not attributed: delivered with its SGID")                        \
	X(asked, "unknown senders handed to the control thread")                     \
	X(ask_ring_full, "unknown sender not handed over: request ring full")

struct ahn_attrib_counters {
#define X(name, desc) uint64_t name;
	RDGRAM_AHN_ATTRIB_COUNTERS(X)
#undef X
};

/* The control thread's side of it. */
struct ahn_attrib_stats {
	uint64_t requests;    /* unknown-sender requests taken from the rings */
	uint64_t duplicates;  /* requests for a peer bound already (no second mapping) */
	uint64_t ahs_created; /* sender addresses given an AH (registry acquire) */
	uint64_t bound;       /* peers bound (ahn_map.bind) */
	uint64_t neigh_wait;  /* prepare_ah said EINPROGRESS: asked again later */
	uint64_t busy;        /* AH creation ENOMEM: every AH referenced, or freed
			       * slots still in their grace period (transient:
			       * the sender's next unknown datagram asks again) */
	uint64_t failed;      /* bad address, another creation error, bind failed */
	uint64_t evicted;     /* sender addresses whose AH the registry destroyed */
	uint64_t unbound;     /* peers unbound by those evictions */
	uint64_t forgotten;   /* previous incarnations forgotten */
};

/* One unknown sender as a poll thread reports it. */
struct ahn_sender {
	wire::gid sgid;  /* the sender's address */
	wire::gid dgid;  /* where it sent to (picks our sgid_index) */
	uint32_t qpn;    /* its source QPN */
	uint32_t connid; /* its connection id (ahn_map::any_connid: none) */
};
static_assert(sizeof(ahn_sender) % 4 == 0, "rte_ring element size");

struct ahn_attrib_config {
	uint32_t max_peers = 65536;     /* ahn_map records (current + previous) */
	uint32_t max_senders = 65536;   /* distinct sender addresses (by_gid) */
	uint64_t forget_after_us = 1000000; /* previous incarnations kept this long */
	int socket = SOCKET_ID_ANY;     /* the poll threads' NUMA node */
	rte_rcu_qsbr *qsbr = nullptr;   /* the poll threads' QSBR variable */
	/* The cookie ahn_map stores for a new peer (nullptr: a sequence
	 * number from 1). (Control thread.) */
	uint64_t (*cookie_of)(void *arg, const ahn_sender &s) = nullptr;
	void *cookie_arg = nullptr;
};

struct ahn_attrib_client_config {
	uint32_t ring_size = 1024;  /* unknown-sender requests in flight */
	uint64_t reask_us = 1000;   /* one request per sender per this long */
	int socket = SOCKET_ID_ANY;
};

/* What attribute() found. */
struct ahn_attribution {
	uint32_t peer;   /* ahn_map peer index, ahn_map::nil when unknown */
	uint64_t cookie; /* its cookie (0 when unknown) */
	bool previous;   /* an earlier incarnation */
};

class ahn_attrib;

/* One poll thread's side: O(1) attribution, unknown senders to the control
 * thread. (Methods: the owning poll thread only.) */
class ahn_attrib_client {
public:
	ahn_attrib_client() = default;
	ahn_attrib_client(const ahn_attrib_client &) = delete;
	ahn_attrib_client &operator=(const ahn_attrib_client &) = delete;
	~ahn_attrib_client() { fini(); }

	/* Attributes one receive. connid: the sender's connection id as the
	 * application's protocol carries it (ahn_map::any_connid: none). now:
	 * rte_get_tsc_cycles(). Must run before the thread's next quiescent
	 * state after the rx_burst that produced wc. */
	ahn_attribution attribute(const recv_wc &wc, uint32_t connid, uint64_t now)
	{
		const uint32_t q = wc.src_qp & 0xffffff;
		if (likely(wc.slid != ahn_map::ahn_unknown)) {
			const ahn_map::result r = map_->lookup(wc.slid, q, connid);
			if (likely(r.peer != ahn_map::nil))
				return found(r, ctr_.by_ahn);
		}
		/* 0xFFFF, or an ahn not bound here: our ahn for the address. */
		ah_key k;
		gid_key(wc.sgid, &k);
		ah_handle h;
		if (by_gid_->lookup(k, &h) && h.slot != wc.slid) {
			const ahn_map::result r = map_->lookup(uint16_t(h.slot), q, connid);
			if (r.peer != ahn_map::nil)
				return found(r, ctr_.by_gid);
		}
		ctr_.unknown++;
		ask(wc, q, connid, now);
		return {ahn_map::nil, 0, false};
	}

	/* attribute() for n receives (connids may be nullptr: none carried). */
	void attribute_burst(const recv_wc *wcs, const uint32_t *connids, unsigned n, ahn_attribution *out,
			     uint64_t now)
	{
		for (unsigned i = 0; i < n; i++)
			out[i] = attribute(wcs[i], connids != nullptr ? connids[i] : ahn_map::any_connid, now);
	}

	const ahn_attrib_counters &counters() const { return ctr_; }

	/* The key by_gid is indexed with: the address alone. */
	static void gid_key(const wire::gid &g, ah_key *k)
	{
		memset(k, 0, sizeof(*k));
		memcpy(k->dgid, g.raw, 16);
	}

	/* Frees the ring. (After the poll thread stopped and the control side
	 * removed this client.) */
	void fini()
	{
		rte_ring_free(req_);
		req_ = nullptr;
	}

private:
	friend class ahn_attrib;
	static constexpr unsigned recent_n = 1024; /* 16 KiB, touched only by unknown senders */
	struct recent {
		uint64_t hv;
		uint64_t until;
	};

	ahn_attribution found(const ahn_map::result &r, uint64_t &ctr)
	{
		if (r.previous)
			ctr_.previous++;
		else
			ctr++;
		return {r.peer, map_->cookie(r.peer), r.previous};
	}

	/* At most one request per (sgid, qpn, connid) per reask interval: a
	 * burst from an unknown sender costs the control thread one request,
	 * and a lost one (ring full, neighbour not resolved yet) is repeated. */
	void ask(const recv_wc &wc, uint32_t q, uint32_t connid, uint64_t now)
	{
		uint64_t w[2];
		memcpy(w, wc.sgid.raw, 16);
		const uint64_t hv = ah_key_mum(w[0] ^ 0xa0761d6478bd642full, w[1] ^ (uint64_t(q) << 32 | connid)) | 1;
		recent &r = recent_[hv % recent_n];
		if (r.hv == hv && now < r.until)
			return;
		ahn_sender s;
		s.sgid = wc.sgid;
		s.dgid = wc.dgid;
		s.qpn = q;
		s.connid = connid;
		RDGRAM_AHN_RING_BEGIN();
		const int rc = rte_ring_sp_enqueue_elem(req_, &s, sizeof(s));
		RDGRAM_AHN_RING_END();
		if (unlikely(rc != 0)) {
			ctr_.ask_ring_full++;
			return;
		}
		r.hv = hv;
		r.until = now + reask_cyc_;
		ctr_.asked++;
	}

	const ahn_map *map_ = nullptr;
	const dest_cache *by_gid_ = nullptr;
	rte_ring *req_ = nullptr; /* SP/SC: this thread -> control */
	uint64_t reask_cyc_ = 0;
	recent recent_[recent_n]{};
	ahn_attrib_counters ctr_{};
};

/*
 * The control-thread side: owns the ahn_map and the SGID index poll threads
 * read, answers unknown senders, follows the registry's evictions. Its
 * state and code are the control path's (dataplane/src/ahn_attrib.cc).
 */
class ahn_attrib {
public:
	static constexpr unsigned max_clients = 64;

	ahn_attrib();
	ahn_attrib(const ahn_attrib &) = delete;
	ahn_attrib &operator=(const ahn_attrib &) = delete;
	~ahn_attrib();

	/* (Control thread, or any thread before poll threads and the control
	 * thread use it.) reg must be over dev; init adds an eviction hook to
	 * it (so reg may be an ah_service's: ah_service::registry()). 0,
	 * EINVAL (the device's max_ah over 65535: an ahn is 16 bits), ENOSPC
	 * (the registry's hook list is full) or ENOMEM. */
	int init(device &dev, ah_registry &reg, const ahn_attrib_config &cfg);
	/* Removes its hook from the registry (its AHs stay there) and frees
	 * the maps. (No poll thread may attribute any more; not a poller any
	 * more.) */
	void fini();

	/* Registers poll() as a control_thread poller. (Main thread, after
	 * init.) stop() removes it. */
	int start(control_thread &ctl);
	void stop();

	/* Sets c up for one poll thread. (Control thread, or before the
	 * control thread runs poll(): e.g. inside control_thread::call.) 0,
	 * ENOSPC (max_clients) or the ring's rte_errno. */
	int add_client(ahn_attrib_client &c, const ahn_attrib_client_config &cc);
	/* (Control thread.) Requests still in its ring are dropped. */
	void remove_client(ahn_attrib_client &c);

	/* Answers the clients' unknown senders, forgets old incarnations,
	 * reclaims. (Control thread.) true when it did work. */
	bool poll(uint64_t now);
	static bool poll_cb(void *arg, uint64_t now) { return static_cast<ahn_attrib *>(arg)->poll(now); }

	/* Handles one unknown sender now. (Control thread.) */
	void handle(const ahn_sender &s);

	const ahn_map &map() const;
	const dest_cache &by_gid() const;
	/* (Control thread.) */
	const ahn_attrib_stats &stats() const;
	size_t senders() const;
	/* The AH this component holds for an address (ah_null if none).
	 * (Control thread.) */
	ah_handle sender_ah(const wire::gid &g) const;

private:
	struct impl;
	std::unique_ptr<impl> p_;
};

} // namespace rdgram

#endif
