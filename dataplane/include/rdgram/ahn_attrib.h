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
 * The registry given to init must be this component's own: init installs
 * its eviction hook (ah_service's registry keeps its own hook for its
 * dest_cache). Other AHs to the same addresses on the same device are
 * harmless: their ahn is not bound here, and the SGID fallback attributes.
 */
#ifndef RDGRAM_AHN_ATTRIB_H
#define RDGRAM_AHN_ATTRIB_H

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <vector>

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
 * read, answers unknown senders, follows the registry's evictions.
 */
class ahn_attrib {
public:
	static constexpr unsigned max_clients = 64;

	ahn_attrib() = default;
	ahn_attrib(const ahn_attrib &) = delete;
	ahn_attrib &operator=(const ahn_attrib &) = delete;
	~ahn_attrib() { fini(); }

	/* (Control thread, or any thread before poll threads and the control
	 * thread use it.) reg must be over dev and used by nothing that needs
	 * its eviction hook: init installs its own. 0, EINVAL (the device's
	 * max_ah over 65535: an ahn is 16 bits) or ENOMEM. */
	int init(device &dev, ah_registry &reg, const ahn_attrib_config &cfg)
	{
		fini();
		if (dev.port().max_ah == 0 || dev.port().max_ah > 65535)
			return EINVAL;
		if (int rc = map_.init(cfg.max_peers, cfg.socket, cfg.qsbr); rc != 0)
			return rc;
		if (int rc = by_gid_.init(cfg.max_senders, cfg.socket, cfg.qsbr); rc != 0) {
			map_.fini();
			return rc;
		}
		dev_ = &dev;
		reg_ = &reg;
		cfg_ = cfg;
		gids_.build(dev.port().gids);
		pc_.assign(cfg.max_peers, peer_ctl{});
		forget_cyc_ = cfg.forget_after_us * rte_get_tsc_hz() / 1000000;
		reg.set_evict_hook(&ahn_attrib::evict_hook, this);
		return 0;
	}
	/* Detaches from the registry (its AHs stay there) and frees the maps.
	 * (No poll thread may attribute any more; not a poller any more.) */
	void fini()
	{
		if (reg_ != nullptr)
			reg_->set_evict_hook(nullptr, nullptr);
		reg_ = nullptr;
		dev_ = nullptr;
		map_.fini();
		by_gid_.fini();
		senders_.clear();
		peer_of_.clear();
		pc_.clear();
		forget_q_.clear();
		nclients_ = 0;
	}

	/* Registers poll() as a control_thread poller. (Main thread, after
	 * init.) stop() removes it. */
	int start(control_thread &ctl)
	{
		ctl_ = &ctl;
		return ctl.add_poller(&ahn_attrib::poll_cb, this);
	}
	void stop()
	{
		if (ctl_ != nullptr)
			ctl_->remove_poller(&ahn_attrib::poll_cb, this);
		ctl_ = nullptr;
	}

	/* Sets c up for one poll thread. (Control thread, or before the
	 * control thread runs poll(): e.g. inside control_thread::call.) 0,
	 * ENOSPC (max_clients) or the ring's rte_errno. */
	int add_client(ahn_attrib_client &c, const ahn_attrib_client_config &cc)
	{
		if (nclients_ == max_clients)
			return ENOSPC;
		static unsigned seq;
		char name[RTE_RING_NAMESIZE];
		snprintf(name, sizeof(name), "rdgram_ahnq%u", seq++);
		c.fini();
		c.req_ = rte_ring_create_elem(name, sizeof(ahn_sender), rte_align32pow2(cc.ring_size), cc.socket,
					      RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (c.req_ == nullptr)
			return rte_errno;
		c.map_ = &map_;
		c.by_gid_ = &by_gid_;
		c.reask_cyc_ = cc.reask_us * rte_get_tsc_hz() / 1000000;
		c.ctr_ = {};
		memset(c.recent_, 0, sizeof(c.recent_));
		clients_[nclients_++] = &c;
		return 0;
	}
	/* (Control thread.) Requests still in its ring are dropped. */
	void remove_client(ahn_attrib_client &c)
	{
		for (unsigned i = 0; i < nclients_; i++)
			if (clients_[i] == &c) {
				clients_[i] = clients_[--nclients_];
				return;
			}
	}

	/* Answers the clients' unknown senders, forgets old incarnations,
	 * reclaims. (Control thread.) true when it did work. */
	bool poll(uint64_t now)
	{
		bool work = false;
		for (unsigned i = 0; i < nclients_; i++) {
			ahn_sender s[32];
			RDGRAM_AHN_RING_BEGIN();
			const unsigned n = rte_ring_sc_dequeue_burst_elem(clients_[i]->req_, s, sizeof(ahn_sender), 32,
									  nullptr);
			RDGRAM_AHN_RING_END();
			for (unsigned j = 0; j < n; j++)
				handle(s[j]);
			work |= n != 0;
		}
		while (!forget_q_.empty() && forget_q_.front().deadline <= now) {
			const forget_rec f = forget_q_.front();
			forget_q_.pop_front();
			peer_ctl &p = pc_[f.peer];
			if (p.epoch != f.epoch || p.state != pc_previous)
				continue; /* gone with its address's AH */
			map_.forget(f.peer);
			drop_peer(f.peer);
			st_.forgotten++;
			work = true;
		}
		map_.reclaim();
		by_gid_.reclaim();
		return work;
	}
	static bool poll_cb(void *arg, uint64_t now) { return static_cast<ahn_attrib *>(arg)->poll(now); }

	/* Handles one unknown sender now. (Control thread.) */
	void handle(const ahn_sender &s)
	{
		st_.requests++;
		const peer_key pk{s.sgid, s.qpn & 0xffffff, s.connid};
		if (peer_of_.count(pk) != 0) {
			st_.duplicates++;
			return;
		}
		auto it = senders_.find(s.sgid);
		if (it == senders_.end()) {
			ibv_ah_attr a;
			if (attr_for(s, &a) != 0) {
				st_.failed++;
				return;
			}
			const int pr = dev_->prepare_ah(a);
			if (pr == EINPROGRESS) {
				st_.neigh_wait++;
				return;
			}
			int err = pr;
			ah_handle h = ah_null;
			if (pr == 0)
				h = reg_->acquire(a, &err);
			if (err != 0) {
				(err == ENOMEM ? st_.busy : st_.failed)++;
				return;
			}
			/* Unreferenced from the start: cached in LRU order, the
			 * first to go when the device table is full. */
			reg_->release(h);
			if (h.slot >= ahn_map::ahn_unknown) {
				st_.failed++;
				return;
			}
			ah_key k;
			ahn_attrib_client::gid_key(s.sgid, &k);
			if (by_gid_.insert(k, h) != 0) {
				st_.failed++;
				return;
			}
			it = senders_.emplace(s.sgid, sender_rec{h, {}}).first;
			st_.ahs_created++;
		}
		sender_rec &sr = it->second;
		const uint64_t cookie = cfg_.cookie_of != nullptr ? cfg_.cookie_of(cfg_.cookie_arg, s) : ++seq_;
		uint32_t peer;
		const int rc = map_.bind(uint16_t(sr.h.slot), pk.qpn, pk.connid, cookie, &peer);
		if (rc != 0) {
			st_.failed++;
			return;
		}
		/* A new incarnation of (address, qpn): the old one is kept for
		 * its late datagrams, then forgotten. */
		for (uint32_t o : sr.peers)
			if (pc_[o].state == pc_current && pc_[o].key.qpn == pk.qpn) {
				pc_[o].state = pc_previous;
				forget_q_.push_back({o, pc_[o].epoch, rte_get_tsc_cycles() + forget_cyc_});
			}
		peer_ctl &p = pc_[peer];
		p.key = pk;
		p.epoch++;
		p.state = pc_current;
		sr.peers.push_back(peer);
		peer_of_.emplace(pk, peer);
		st_.bound++;
	}

	const ahn_map &map() const { return map_; }
	const dest_cache &by_gid() const { return by_gid_; }
	/* (Control thread.) */
	const ahn_attrib_stats &stats() const { return st_; }
	size_t senders() const { return senders_.size(); }
	/* The AH this component holds for an address (ah_null if none).
	 * (Control thread.) */
	ah_handle sender_ah(const wire::gid &g) const
	{
		auto it = senders_.find(g);
		return it == senders_.end() ? ah_null : it->second.h;
	}

private:
	enum : uint8_t { pc_free, pc_current, pc_previous };
	struct peer_key {
		wire::gid sgid;
		uint32_t qpn, connid;
		bool operator==(const peer_key &o) const
		{
			return sgid == o.sgid && qpn == o.qpn && connid == o.connid;
		}
	};
	struct peer_key_hash {
		size_t operator()(const peer_key &k) const
		{
			uint64_t w[2];
			memcpy(w, k.sgid.raw, 16);
			return size_t(ah_key_mum(w[0] ^ 0xe7037ed1a0b428dbull,
						 w[1] ^ (uint64_t(k.qpn) << 32 | k.connid)));
		}
	};
	struct gid_hasher {
		size_t operator()(const wire::gid &g) const
		{
			uint64_t w[2];
			memcpy(w, g.raw, 16);
			return size_t(ah_key_mum(w[0] ^ 0x8ebc6af09c88c6e3ull, w[1] ^ 0x589965cc75374cc3ull));
		}
	};
	struct sender_rec {
		ah_handle h;
		std::vector<uint32_t> peers; /* current and previous */
	};
	struct peer_ctl {
		peer_key key{};
		uint32_t epoch = 0; /* bumped per bind: forget_q entries of an
				     * earlier use of the record are ignored */
		uint8_t state = pc_free;
	};
	struct forget_rec {
		uint32_t peer, epoch;
		uint64_t deadline;
	};

	/* One AH per sender address (EFA: one ahn per address), so the
	 * reply attributes are the address's, not one datagram's: traffic
	 * class and flow label 0, hop limit 0xff as init_ah_from_wc sets it,
	 * our GID the datagram was sent to (the first unicast one of the
	 * family for multicast). 0 or EINVAL. */
	int attr_for(const ahn_sender &s, ibv_ah_attr *a) const
	{
		const bool v4 = s.sgid.is_v4_mapped();
		if (s.sgid.is_zero() || s.sgid.is_multicast() || (v4 && s.sgid.v4() == 0) ||
		    v4 != s.dgid.is_v4_mapped())
			return EINVAL;
		const int idx = s.dgid.is_multicast() ? gids_.first_unicast(v4) : gids_.find(s.dgid);
		if (idx < 0 || idx > UINT8_MAX)
			return EINVAL;
		memset(a, 0, sizeof(*a));
		a->is_global = 1;
		a->port_num = 1;
		memcpy(a->grh.dgid.raw, s.sgid.raw, 16);
		a->grh.sgid_index = uint8_t(idx);
		a->grh.hop_limit = 0xff;
		return 0;
	}

	void drop_peer(uint32_t peer)
	{
		peer_ctl &p = pc_[peer];
		peer_of_.erase(p.key);
		auto it = senders_.find(p.key.sgid);
		if (it != senders_.end()) {
			auto &v = it->second.peers;
			for (size_t i = 0; i < v.size(); i++)
				if (v[i] == peer) {
					v[i] = v.back();
					v.pop_back();
					break;
				}
		}
		p.state = pc_free;
	}

	/* The registry destroys an AH (capacity, device ENOMEM, trim): if it is
	 * an address's AH here, its peers go first (lookups miss at once; the
	 * driver reuses the slot only after a grace period). */
	static void evict_hook(void *arg, const ah_key &k, ah_handle h)
	{
		auto *self = static_cast<ahn_attrib *>(arg);
		wire::gid g;
		memcpy(g.raw, k.dgid, 16);
		auto it = self->senders_.find(g);
		if (it == self->senders_.end() || !(it->second.h == h))
			return;
		for (uint32_t p : it->second.peers) {
			if (self->pc_[p].state == pc_current) {
				self->map_.unbind(p); /* its previous ones too */
				self->st_.unbound++;
			}
			self->peer_of_.erase(self->pc_[p].key);
			self->pc_[p].state = pc_free;
		}
		ah_key gk;
		ahn_attrib_client::gid_key(g, &gk);
		self->by_gid_.erase(gk);
		self->senders_.erase(it);
		self->st_.evicted++;
	}

	device *dev_ = nullptr;
	ah_registry *reg_ = nullptr;
	control_thread *ctl_ = nullptr;
	ahn_attrib_config cfg_{};
	gid_index gids_;
	ahn_map map_;
	dest_cache by_gid_; /* sender address -> our AH (slot = ahn) */
	std::unordered_map<wire::gid, sender_rec, gid_hasher> senders_;
	std::unordered_map<peer_key, uint32_t, peer_key_hash> peer_of_;
	std::vector<peer_ctl> pc_;
	std::deque<forget_rec> forget_q_;
	ahn_attrib_client *clients_[max_clients]{};
	unsigned nclients_ = 0;
	uint64_t forget_cyc_ = 0;
	uint64_t seq_ = 0;
	ahn_attrib_stats st_{};
};

} // namespace rdgram

#endif
