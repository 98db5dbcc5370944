/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The AH table: slots holding wire-ready address vectors (AVs), each with a
 * generation. The control thread writes an AV, then publishes its generation
 * with a release store; a poll thread loads the generation with an acquire
 * load and uses the AV only when it matches its handle. A destroyed slot's
 * generation moves on at once (new lookups miss), but the slot is reused only
 * after an rte_rcu_qsbr grace period: every poll thread has reported a
 * quiescent state since, so none can still be copying the old AV.
 *
 * Generations: odd = live, even = free. A handle carries the odd value.
 *
 * Layout: one 64-byte cache line per AH per replica, the AV (at most 60
 * bytes: soft header template, mlx5's 48-byte AV) and its generation side
 * by side, so a lookup touches one line (a separate generation array made
 * it two). NUMA: one replica of the whole table per NUMA node that hosts
 * poll threads, allocated on that node; the control thread writes an AV
 * into every replica before it publishes the generation in each, and a
 * poll thread reads only its node's replica (view()).
 */
#ifndef RDGRAM_AH_TABLE_H
#define RDGRAM_AH_TABLE_H

#include <cerrno>
#include <cstdint>
#include <deque>
#include <vector>

#include <rte_branch_prediction.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>

#include "rdgram/ud.h"

namespace rdgram {

template <class AV> class ah_table {
	struct alignas(64) slot_t {
		AV av;
		uint32_t gen;
	};
	static_assert(sizeof(AV) <= 60, "AV and generation must share one cache line");
	static_assert(sizeof(slot_t) == 64);

public:
	static constexpr unsigned max_replicas = 8;
	/* Bytes per AH in each replica (AV + generation + padding). */
	static constexpr size_t bytes_per_replica = sizeof(slot_t);

	/* A poll thread's read-only window on one replica: two words, copied
	 * into the queue, so a lookup does not chase the table object. */
	class view {
	public:
		view() = default;
		/* The AV for h, or nullptr if h is stale or out of range. Valid
		 * until the caller's next quiescent state. (Any thread.) */
		const AV *lookup(ah_handle h) const
		{
			if (unlikely(h.slot >= cap_))
				return nullptr;
			const slot_t &s = slots_[h.slot];
			uint32_t g = __atomic_load_n(&s.gen, __ATOMIC_ACQUIRE);
			return likely(g == h.gen) ? &s.av : nullptr;
		}
		/* Starts loading h's slot (AV and generation share its one line)
		 * so a burst's lookups overlap their cache and TLB misses instead
		 * of taking them one after another: with many destinations in a
		 * random order each lookup misses. (Any thread.) */
		void prefetch(ah_handle h) const
		{
			if (likely(h.slot < cap_))
				rte_prefetch0(&slots_[h.slot]);
		}
		int socket() const { return socket_; }

	private:
		friend class ah_table;
		const slot_t *slots_ = nullptr;
		uint32_t cap_ = 0;
		int socket_ = SOCKET_ID_ANY;
	};

	ah_table() = default;
	ah_table(const ah_table &) = delete;
	ah_table &operator=(const ah_table &) = delete;
	~ah_table() { fini(); }

	/* Allocates capacity slots in one replica on NUMA node socket (see the
	 * vector form). */
	int init(uint32_t capacity, int socket, rte_rcu_qsbr *qs)
	{
		const int s[1] = {socket};
		return init(capacity, s, 1, qs);
	}
	/* Allocates one replica of capacity slots on each of the n NUMA nodes
	 * in sockets (the nodes hosting poll threads; duplicates are one
	 * replica). qs is the QSBR variable the poll threads report to
	 * (nullptr: no poll thread reads this table, slots are reused at once).
	 * (Control thread only.) Returns 0 or errno. */
	int init(uint32_t capacity, const int *sockets, unsigned n, rte_rcu_qsbr *qs)
	{
		fini();
		if (capacity == 0 || n == 0)
			return EINVAL;
		cap_ = capacity;
		for (unsigned i = 0; i < n; i++) {
			bool dup = false;
			for (unsigned j = 0; j < nrep_; j++)
				dup |= rep_[j].socket_ == sockets[i];
			if (dup)
				continue;
			if (nrep_ == max_replicas) {
				fini();
				return E2BIG;
			}
			auto *sl = static_cast<slot_t *>(
				rte_zmalloc_socket("rdgram_ah", sizeof(slot_t) * capacity, 64, sockets[i]));
			if (sl == nullptr) {
				fini();
				return ENOMEM;
			}
			rep_[nrep_].slots_ = sl;
			rep_[nrep_].cap_ = capacity;
			rep_[nrep_].socket_ = sockets[i];
			nrep_++;
		}
		free_.reserve(capacity);
		for (uint32_t i = capacity; i-- > 0;)
			free_.push_back(i);
		qs_ = qs;
		return 0;
	}

	void fini()
	{
		waiting_.clear();
		qs_ = nullptr;
		for (unsigned i = 0; i < nrep_; i++) {
			rte_free(const_cast<slot_t *>(rep_[i].slots_));
			rep_[i] = view{};
		}
		nrep_ = 0;
		free_.clear();
		cap_ = 0;
		live_ = 0;
	}

	unsigned replicas() const { return nrep_; }
	/* Replica i's view (i < replicas()). */
	view replica(unsigned i) const { return rep_[i]; }
	/* The replica on NUMA node socket, or replica 0 when none is there
	 * (a poll thread on a node without one reads remote memory). */
	view for_socket(int socket) const
	{
		for (unsigned i = 0; i < nrep_; i++)
			if (rep_[i].socket_ == socket)
				return rep_[i];
		return rep_[0];
	}

	/* Data path: lookup in replica 0 (tests, single-node set-ups). */
	const AV *lookup(ah_handle h) const { return rep_[0].lookup(h); }

	/* Takes a free slot for filling. (Control thread only.) Returns false
	 * when every slot is live or still waiting for its grace period. */
	bool reserve(uint32_t *slot)
	{
		if (free_.empty())
			reclaim();
		if (free_.empty())
			return false;
		*slot = free_.back();
		free_.pop_back();
		return true;
	}
	/* The AV of a reserved (unpublished) slot, to fill; publish copies it
	 * to every replica. (Control thread only.) */
	AV &av_at(uint32_t slot) { return mut(0)[slot].av; }
	const AV &av_at(uint32_t slot) const { return rep_[0].slots_[slot].av; }
	/* Applies f to every copy of a live slot's AV (one per NUMA replica),
	 * e.g. an in-place atomic swap of part of the AV. (Control thread.) */
	template <class F> void update(uint32_t slot, F &&f)
	{
		for (unsigned i = 0; i < nrep_; i++)
			f(mut(i)[slot].av);
	}

	/* Publishes a reserved, filled slot. (Control thread only.) The AV is
	 * copied to every replica first; the release store of each replica's
	 * generation orders the AV writes before the generation a reader
	 * checks. */
	ah_handle publish(uint32_t slot)
	{
		for (unsigned i = 1; i < nrep_; i++)
			mut(i)[slot].av = rep_[0].slots_[slot].av;
		const uint32_t g = rep_[0].slots_[slot].gen + 1; /* even -> odd */
		for (unsigned i = 0; i < nrep_; i++)
			__atomic_store_n(&mut(i)[slot].gen, g, __ATOMIC_RELEASE);
		++live_;
		return ah_handle{slot, g};
	}

	/* Returns a reserved slot that was never published. (Control thread.) */
	void unreserve(uint32_t slot) { free_.push_back(slot); }

	/* Retires a live handle: lookups miss from now on; the slot is reused
	 * after a grace period. (Control thread only.) 0 or EINVAL (stale,
	 * double-destroyed or out-of-range handle, as ibv_destroy_ah(3) may
	 * report for an invalid AH). */
	int retire(ah_handle h)
	{
		if (h.slot >= cap_ || (h.gen & 1u) == 0 || rep_[0].slots_[h.slot].gen != h.gen)
			return EINVAL;
		for (unsigned i = 0; i < nrep_; i++)
			__atomic_store_n(&mut(i)[h.slot].gen, h.gen + 1, __ATOMIC_RELEASE);
		--live_;
		if (qs_ == nullptr) {
			free_.push_back(h.slot);
			return 0;
		}
		/* Inline start/check (not rte_rcu_qsbr_dq, whose check runs in
		 * librte_rcu where ThreadSanitizer cannot see its acquire). */
		waiting_.push_back(waiting{h.slot, rte_rcu_qsbr_start(qs_)});
		return 0;
	}

	/* Moves slots whose grace period has ended back to the free list.
	 * (Control thread only.) */
	void reclaim()
	{
		while (!waiting_.empty() && rte_rcu_qsbr_check(qs_, waiting_.front().token, false) == 1) {
			free_.push_back(waiting_.front().slot);
			waiting_.pop_front();
		}
	}

	uint32_t capacity() const { return cap_; }
	uint32_t live() const { return live_; }
	/* Retired slots still waiting for their grace period. */
	uint32_t retired_waiting() const { return uint32_t(waiting_.size()); }

private:
	slot_t *mut(unsigned i) { return const_cast<slot_t *>(rep_[i].slots_); }
	struct waiting {
		uint32_t slot;
		uint64_t token;
	};

	uint32_t cap_ = 0;
	uint32_t live_ = 0;
	view rep_[max_replicas];
	unsigned nrep_ = 0;
	std::vector<uint32_t> free_;
	rte_rcu_qsbr *qs_ = nullptr;
	std::deque<waiting> waiting_;
};

} // namespace rdgram

#endif
