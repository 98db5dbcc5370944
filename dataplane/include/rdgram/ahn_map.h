/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Receive attribution by device AH number (EFA semantics): a completion
 * names its sender by the receiver's ahn for the sender's address (16 bits,
 * 0xFFFF when the receiver has no AH for it) and the sender's source QPN.
 * Several peers share an ahn (every process on one remote host), and a QPN
 * is reused when a remote process restarts, so a peer is (ahn, qpn) plus a
 * connection id (a random Q_Key per endpoint, as libfabric's EFA provider
 * does) to tell incarnations apart.
 *
 * Layout, chosen so the common lookup is one cache line and no hashing:
 *
 *  - first[ahn]: one 64-bit word per ahn (65,536 x 8 = 512 KiB, indexed
 *    directly): the first peer bound to that ahn: valid bit, QPN (24 bits),
 *    peer index (24 bits). One remote process per host (the usual EFA/HPC
 *    layout of one rank per NIC) never goes further.
 *  - more: an open-addressing table of 64-bit words for the other peers of
 *    an ahn, keyed by (ahn, qpn) packed in 40 bits with the peer index in
 *    the remaining 24: a bucket is ONE word, read with one atomic load, and
 *    a probe walks eight buckets per cache line. Power-of-two size >= 2x
 *    max_peers, multiplicative hash, linear probing.
 *  - peers[i]: the peer records (connection id, ahn, qpn, the caller's
 *    64-bit cookie, the previous incarnation's index).
 *
 * QPN reuse: binding (ahn, qpn) to a new connection id while another peer
 * holds it makes the old peer a previous incarnation, linked from the new
 * record. A lookup that carries a connection id checks it; a mismatch walks
 * the (short) previous chain, so late datagrams of the old process are
 * attributed to it, never to the new one. forget(peer) drops a previous
 * incarnation when it is safe (no more of its datagrams can arrive); its
 * record is reused after an rte_rcu_qsbr grace period.
 *
 * Threads: one writer (the control thread: bind, unbind, forget, reclaim),
 * any number of readers (poll threads: lookup, lookup_bulk), which report
 * quiescent states on the QSBR variable given to init. Readers make no
 * syscall, take no lock, allocate nothing and write nothing shared. Every
 * word a reader loads is written with an atomic store (release for the
 * words that publish), so ThreadSanitizer sees the protocol.
 */
#ifndef RDGRAM_AHN_MAP_H
#define RDGRAM_AHN_MAP_H

#include <cerrno>
#include <cstdint>
#include <deque>
#include <vector>

#include <rte_branch_prediction.h>
#include <rte_common.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>

namespace rdgram {

class ahn_map {
public:
	static constexpr uint32_t nil = 0xffffff;       /* no peer (24 bits) */
	static constexpr uint16_t ahn_unknown = 0xffff; /* EFA: no AH for the sender */
	static constexpr uint32_t max_peers_limit = nil; /* peer indices are 24 bits */
	static constexpr uint32_t any_connid = 0;        /* lookup: do not check */
	static constexpr unsigned max_bulk = 64;

	/* What a lookup found. */
	struct result {
		uint32_t peer;     /* peer index, nil if unknown */
		bool previous;     /* an earlier incarnation (QPN reused since) */
	};

	ahn_map() = default;
	ahn_map(const ahn_map &) = delete;
	ahn_map &operator=(const ahn_map &) = delete;
	~ahn_map() { fini(); }

	/* (Writer.) max_peers peers at most; tables on NUMA node socket; qs:
	 * the readers' QSBR variable (nullptr: no concurrent readers). 0,
	 * EINVAL or ENOMEM. */
	int init(uint32_t max_peers, int socket, rte_rcu_qsbr *qs)
	{
		fini();
		if (max_peers == 0 || max_peers > max_peers_limit)
			return EINVAL;
		nb_ = RTE_MAX(rte_align32pow2(2 * max_peers), 16u);
		first_ = static_cast<uint64_t *>(rte_zmalloc_socket("rdgram_ahn1", sizeof(uint64_t) * 65536, 64, socket));
		more_ = static_cast<uint64_t *>(rte_zmalloc_socket("rdgram_ahn2", sizeof(uint64_t) * nb_, 64, socket));
		peers_ = static_cast<peer_rec *>(rte_zmalloc_socket("rdgram_ahnp", sizeof(peer_rec) * max_peers, 64, socket));
		if (first_ == nullptr || more_ == nullptr || peers_ == nullptr) {
			fini();
			return ENOMEM;
		}
		max_peers_ = max_peers;
		qs_ = qs;
		free_.clear();
		for (uint32_t i = max_peers; i-- > 0;)
			free_.push_back(i);
		return 0;
	}
	void fini()
	{
		rte_free(first_);
		rte_free(more_);
		rte_free(peers_);
		first_ = more_ = nullptr;
		peers_ = nullptr;
		free_.clear();
		waiting_.clear();
		max_peers_ = nb_ = live_ = more_used_ = 0;
	}

	/* ---- readers (poll threads) ---- */

	/* The peer that sent a datagram reported with (ahn, qpn), whose
	 * connection id is connid (any_connid: the caller's protocol carries
	 * none; the current incarnation is taken). */
	result lookup(uint16_t ahn, uint32_t qpn, uint32_t connid = any_connid) const
	{
		uint32_t p = find(ahn, qpn & 0xffffff);
		if (unlikely(p == nil))
			return {nil, false};
		return check_connid(p, connid);
	}

	/* n lookups (n <= max_bulk, more are ignored), pipelined in three
	 * passes so the misses of a burst overlap instead of queueing behind
	 * each other: (1) prefetch every first-level word; (2) read them, and
	 * for each key the first level does not answer but flags has_more,
	 * prefetch its second-level home bucket; for every peer found,
	 * prefetch its record (the connection id check); (3) finish the
	 * second-level probes (their home lines are in flight or cached), then
	 * check connection ids. Without (2) a second-level probe was a
	 * dependent miss per key (bench_ahn, docs/PERFORMANCE.md). connid may be
	 * nullptr (no checks). */
	void lookup_bulk(const uint16_t *ahn, const uint32_t *qpn, const uint32_t *connid, unsigned n,
			 result *out) const
	{
		if (unlikely(n > max_bulk))
			n = max_bulk;
		for (unsigned i = 0; i < n; i++)
			rte_prefetch0(&first_[ahn[i]]);
		uint32_t p[max_bulk];
		uint64_t second = 0; /* bit i: key i goes to the second level */
		const uint32_t mask = nb_ - 1;
		for (unsigned i = 0; i < n; i++) {
			const uint32_t q = qpn[i] & 0xffffff;
			const uint64_t w = __atomic_load_n(&first_[ahn[i]], __ATOMIC_ACQUIRE);
			if (likely((w & valid) && w1_qpn(w) == q)) {
				p[i] = w1_peer(w);
				if (connid != nullptr)
					rte_prefetch0(&peers_[p[i]]);
			} else if (!(w & has_more)) {
				p[i] = nil;
			} else {
				p[i] = nil;
				second |= uint64_t(1) << i;
				rte_prefetch0(&more_[home(key_of(ahn[i], q), mask)]);
			}
		}
		for (uint64_t m = second; m != 0; m &= m - 1) {
			const unsigned i = unsigned(__builtin_ctzll(m));
			p[i] = find_more(ahn[i], qpn[i] & 0xffffff);
			if (p[i] != nil && connid != nullptr)
				rte_prefetch0(&peers_[p[i]]);
		}
		for (unsigned i = 0; i < n; i++)
			out[i] = p[i] == nil ? result{nil, false} : check_connid(p[i], connid ? connid[i] : any_connid);
	}

	/* The caller's cookie for a peer (valid while the peer is bound or
	 * until the reader's next quiescent state after it was forgotten). */
	uint64_t cookie(uint32_t peer) const { return __atomic_load_n(&peers_[peer].cookie, __ATOMIC_RELAXED); }

	/* ---- writer (control thread) ---- */

	/* Binds (ahn, qpn, connid) to a new peer record holding cookie. If
	 * another peer holds (ahn, qpn), the new one replaces it and the old
	 * one becomes its previous incarnation (still attributed by connid
	 * until forget()). 0 with *peer set; EINVAL (ahn 0xFFFF, qpn over 24
	 * bits), EEXIST (same ahn, qpn and connid already bound: *peer is that
	 * peer), ENOSPC (max_peers records in use). */
	int bind(uint16_t ahn, uint32_t qpn, uint32_t connid, uint64_t cookie, uint32_t *peer)
	{
		if (ahn == ahn_unknown || qpn > 0xffffff)
			return EINVAL;
		reclaim();
		const uint32_t old = find(ahn, qpn);
		if (old != nil && peers_[old].connid == connid) {
			*peer = old;
			return EEXIST;
		}
		if (free_.empty())
			return ENOSPC;
		const uint32_t p = free_.back();
		free_.pop_back();
		peer_rec &r = peers_[p];
		__atomic_store_n(&r.connid, connid, __ATOMIC_RELAXED);
		__atomic_store_n(&r.cookie, cookie, __ATOMIC_RELAXED);
		__atomic_store_n(&r.prev, old, __ATOMIC_RELAXED);
		r.newer = nil;
		if (old != nil)
			peers_[old].newer = p;
		r.ahn = ahn;
		r.qpn = qpn;
		r.state = st_current;
		if (old != nil)
			peers_[old].state = st_previous;
		/* Publishing the word (release) makes the record visible. */
		if (old != nil)
			replace(ahn, qpn, p);
		else
			insert(ahn, qpn, p);
		live_++;
		*peer = p;
		return 0;
	}

	/* Removes a current peer (its AH destroyed, the process gone): lookups
	 * stop finding it and its previous incarnations at once; records are
	 * reused after a grace period. 0 or EINVAL (not a current peer). */
	int unbind(uint32_t peer)
	{
		if (peer >= max_peers_ || peers_[peer].state != st_current)
			return EINVAL;
		peer_rec &r = peers_[peer];
		erase(r.ahn, r.qpn);
		for (uint32_t p = peer; p != nil;) {
			const uint32_t nx = peers_[p].prev;
			retire(p);
			p = nx;
		}
		return 0;
	}

	/* Forgets a previous incarnation (and any older ones): its late
	 * datagrams are unknown from now on. 0 or EINVAL (not previous). */
	int forget(uint32_t peer)
	{
		if (peer >= max_peers_ || peers_[peer].state != st_previous)
			return EINVAL;
		/* Unlink it from the record that points at it (its next
		 * incarnation: O(1) through the writer's back link, not a scan of
		 * every record). */
		if (const uint32_t nw = peers_[peer].newer; nw != nil)
			__atomic_store_n(&peers_[nw].prev, nil, __ATOMIC_RELEASE);
		for (uint32_t p = peer; p != nil;) {
			const uint32_t nx = peers_[p].prev;
			retire(p);
			p = nx;
		}
		return 0;
	}

	/* Returns records whose grace period has ended to the free list. */
	void reclaim()
	{
		while (!waiting_.empty() &&
		       (qs_ == nullptr || rte_rcu_qsbr_check(qs_, waiting_.front().token, false) == 1)) {
			peers_[waiting_.front().peer].state = st_free;
			free_.push_back(waiting_.front().peer);
			waiting_.pop_front();
		}
	}

	uint32_t live() const { return live_; }        /* current + previous */
	uint32_t capacity() const { return max_peers_; }
	uint32_t free_records() const { return uint32_t(free_.size()); }
	/* Bytes the reader-side tables take. */
	size_t memory_bytes() const { return sizeof(uint64_t) * (65536 + nb_) + sizeof(peer_rec) * max_peers_; }

private:
	enum : uint8_t { st_free, st_current, st_previous, st_retired };
	struct peer_rec {
		uint32_t connid;
		uint32_t prev; /* previous incarnation, nil if none */
		uint64_t cookie;
		uint32_t ahn, qpn; /* writer only */
		uint8_t state;     /* writer only */
		uint32_t newer;    /* writer only: the record whose prev is this one, nil if none */
	};
	static_assert(sizeof(peer_rec) == 32, "two records per cache line");
	struct wait_rec {
		uint32_t peer;
		uint64_t token;
	};

	/* Word layouts. first[ahn]: valid | has_more | qpn << 24 | peer. */
	static constexpr uint64_t valid = 1ull << 63;
	static constexpr uint64_t has_more = 1ull << 62;
	static uint32_t w1_qpn(uint64_t w) { return uint32_t(w >> 24) & 0xffffff; }
	static uint32_t w1_peer(uint64_t w) { return uint32_t(w) & 0xffffff; }
	/* more[]: key (ahn << 24 | qpn, +1 so 0 means empty) << 24 | peer;
	 * tomb = all ones. */
	static constexpr uint64_t empty = 0;
	static constexpr uint64_t tomb = ~0ull;
	static uint64_t key_of(uint16_t ahn, uint32_t qpn) { return (uint64_t(ahn) << 24 | qpn) + 1; }
	static uint32_t home(uint64_t key, uint32_t mask)
	{
		return uint32_t((key * 0x9e3779b97f4a7c15ull) >> 32) & mask;
	}

	result check_connid(uint32_t p, uint32_t connid) const
	{
		if (connid == any_connid || likely(__atomic_load_n(&peers_[p].connid, __ATOMIC_RELAXED) == connid))
			return {p, false};
		/* QPN reused: find the incarnation this datagram belongs to. */
		for (uint32_t q = __atomic_load_n(&peers_[p].prev, __ATOMIC_ACQUIRE); q != nil;
		     q = __atomic_load_n(&peers_[q].prev, __ATOMIC_ACQUIRE))
			if (__atomic_load_n(&peers_[q].connid, __ATOMIC_RELAXED) == connid)
				return {q, true};
		return {nil, false};
	}

	uint32_t find(uint16_t ahn, uint32_t qpn) const
	{
		const uint64_t w = __atomic_load_n(&first_[ahn], __ATOMIC_ACQUIRE);
		if (likely((w & valid) && w1_qpn(w) == qpn))
			return w1_peer(w);
		if (!(w & has_more))
			return nil;
		return find_more(ahn, qpn);
	}
	uint32_t find_more(uint16_t ahn, uint32_t qpn) const
	{
		const uint64_t k = key_of(ahn, qpn);
		const uint32_t mask = nb_ - 1;
		for (uint32_t i = home(k, mask), n = 0; n < nb_; i = (i + 1) & mask, n++) {
			const uint64_t b = __atomic_load_n(&more_[i], __ATOMIC_ACQUIRE);
			if (b == empty)
				return nil;
			if (b != tomb && (b >> 24) == k)
				return uint32_t(b) & 0xffffff;
		}
		return nil;
	}

	void insert(uint16_t ahn, uint32_t qpn, uint32_t p)
	{
		const uint64_t w = first_[ahn];
		if (!(w & valid)) {
			__atomic_store_n(&first_[ahn], valid | (w & has_more) | uint64_t(qpn) << 24 | p,
					 __ATOMIC_RELEASE);
			return;
		}
		const uint64_t k = key_of(ahn, qpn);
		const uint32_t mask = nb_ - 1;
		uint32_t i = home(k, mask);
		while (more_[i] != empty && more_[i] != tomb)
			i = (i + 1) & mask;
		if (more_[i] == empty)
			more_used_++;
		__atomic_store_n(&more_[i], k << 24 | p, __ATOMIC_RELEASE);
		if (!(w & has_more))
			__atomic_store_n(&first_[ahn], w | has_more, __ATOMIC_RELEASE);
		maybe_rebuild();
	}
	/* Points an existing (ahn, qpn) at peer p (one atomic store). */
	void replace(uint16_t ahn, uint32_t qpn, uint32_t p)
	{
		const uint64_t w = first_[ahn];
		if ((w & valid) && w1_qpn(w) == qpn) {
			__atomic_store_n(&first_[ahn], (w & ~uint64_t(0xffffff)) | p, __ATOMIC_RELEASE);
			return;
		}
		const uint64_t k = key_of(ahn, qpn);
		const uint32_t mask = nb_ - 1;
		for (uint32_t i = home(k, mask);; i = (i + 1) & mask)
			if (more_[i] != tomb && (more_[i] >> 24) == k) {
				__atomic_store_n(&more_[i], k << 24 | p, __ATOMIC_RELEASE);
				return;
			}
	}
	void erase(uint16_t ahn, uint32_t qpn)
	{
		const uint64_t w = first_[ahn];
		if ((w & valid) && w1_qpn(w) == qpn) {
			/* Keep has_more: others of this ahn are still in more[]. */
			__atomic_store_n(&first_[ahn], w & has_more, __ATOMIC_RELEASE);
			return;
		}
		const uint64_t k = key_of(ahn, qpn);
		const uint32_t mask = nb_ - 1;
		for (uint32_t i = home(k, mask);; i = (i + 1) & mask)
			if (more_[i] != tomb && (more_[i] >> 24) == k) {
				/* A tombstone, not empty: later keys of the probe stay
				 * reachable. A bucket is one word, so there is nothing a
				 * reader could see half-written: no grace period needed. */
				__atomic_store_n(&more_[i], tomb, __ATOMIC_RELEASE);
				return;
			}
	}
	/* Too many tombstones: rewrite more[] in place is not reader-safe, so
	 * the writer drops tombstones that end a probe chain (a tombstone
	 * followed by an empty bucket can become empty: no probe passes it). */
	void maybe_rebuild()
	{
		if (more_used_ * 4 < nb_ * 3)
			return;
		const uint32_t mask = nb_ - 1;
		for (uint32_t i = 0; i < nb_; i++) {
			uint32_t j = i;
			if (more_[j] != empty)
				continue;
			/* Walk backwards from an empty bucket over tombstones. */
			for (uint32_t k = (j - 1) & mask; more_[k] == tomb; k = (k - 1) & mask) {
				__atomic_store_n(&more_[k], empty, __ATOMIC_RELEASE);
				more_used_--;
			}
		}
	}
	void retire(uint32_t p)
	{
		peers_[p].state = st_retired;
		live_--;
		waiting_.push_back({p, qs_ != nullptr ? rte_rcu_qsbr_start(qs_) : 0});
	}

	uint64_t *first_ = nullptr;
	uint64_t *more_ = nullptr;
	peer_rec *peers_ = nullptr;
	uint32_t max_peers_ = 0, nb_ = 0, live_ = 0, more_used_ = 0;
	rte_rcu_qsbr *qs_ = nullptr;
	std::vector<uint32_t> free_;
	std::deque<wait_rec> waiting_;
};

} // namespace rdgram

#endif
