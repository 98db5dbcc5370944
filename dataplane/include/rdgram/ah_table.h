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
 */
#ifndef RDGRAM_AH_TABLE_H
#define RDGRAM_AH_TABLE_H

#include <cerrno>
#include <cstdint>
#include <vector>

#include <rte_branch_prediction.h>
#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>

#include "rdgram/ud.h"

namespace rdgram {

template <class AV> class ah_table {
public:
	ah_table() = default;
	ah_table(const ah_table &) = delete;
	ah_table &operator=(const ah_table &) = delete;
	~ah_table() { fini(); }

	/* Allocates capacity slots on NUMA node socket; qs is the QSBR variable
	 * the poll threads report to (nullptr: no poll thread reads this table,
	 * slots are reused at once). (Control thread only.) Returns 0 or errno. */
	int init(uint32_t capacity, int socket, rte_rcu_qsbr *qs)
	{
		cap_ = capacity;
		gen_ = static_cast<uint32_t *>(
			rte_zmalloc_socket("rdgram_ah_gen", sizeof(uint32_t) * capacity, 64, socket));
		av_ = static_cast<AV *>(
			rte_zmalloc_socket("rdgram_ah_av", sizeof(AV) * capacity, alignof(AV), socket));
		if (gen_ == nullptr || av_ == nullptr) {
			fini();
			return ENOMEM;
		}
		free_.reserve(capacity);
		for (uint32_t i = capacity; i-- > 0;)
			free_.push_back(i);
		if (qs != nullptr) {
			static unsigned seq;
			char name[RTE_RING_NAMESIZE];
			snprintf(name, sizeof(name), "rdgram_ahdq%u", __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
			rte_rcu_qsbr_dq_parameters p{};
			p.name = name;
			p.size = capacity;
			p.esize = 8;
			p.trigger_reclaim_limit = capacity / 8 + 1;
			p.max_reclaim_size = capacity;
			p.free_fn = &ah_table::reclaim_cb;
			p.p = this;
			p.v = qs;
			dq_ = rte_rcu_qsbr_dq_create(&p);
			if (dq_ == nullptr) {
				int e = rte_errno;
				fini();
				return e;
			}
		}
		return 0;
	}

	void fini()
	{
		if (dq_ != nullptr) {
			rte_rcu_qsbr_dq_delete(dq_); /* frees what is safe; rest stays */
			dq_ = nullptr;
		}
		rte_free(gen_);
		rte_free(av_);
		gen_ = nullptr;
		av_ = nullptr;
		free_.clear();
		cap_ = 0;
	}

	/* Data path (any thread, lock-free): the AV for h, or nullptr if h is
	 * stale or out of range. Valid until the caller's next quiescent state. */
	const AV *lookup(ah_handle h) const
	{
		if (unlikely(h.slot >= cap_))
			return nullptr;
		uint32_t g = __atomic_load_n(&gen_[h.slot], __ATOMIC_ACQUIRE);
		return likely(g == h.gen) ? &av_[h.slot] : nullptr;
	}

	/* Takes a free slot for filling. (Control thread only.) Returns false
	 * when every slot is live or still waiting for its grace period. */
	bool reserve(uint32_t *slot)
	{
		if (free_.empty() && dq_ != nullptr)
			rte_rcu_qsbr_dq_reclaim(dq_, cap_, nullptr, nullptr, nullptr);
		if (free_.empty())
			return false;
		*slot = free_.back();
		free_.pop_back();
		return true;
	}
	AV &av_at(uint32_t slot) { return av_[slot]; }
	/* Applies f to every copy of a slot's AV (one per NUMA replica), e.g.
	 * an in-place atomic swap of part of a live AV. (Control thread.) */
	template <class F> void update(uint32_t slot, F &&f) { f(av_[slot]); }
	const AV &av_at(uint32_t slot) const { return av_[slot]; }

	/* Publishes a reserved, filled slot. (Control thread only.) The release
	 * store orders the AV writes before the generation a reader checks. */
	ah_handle publish(uint32_t slot)
	{
		uint32_t g = gen_[slot] + 1; /* even -> odd */
		__atomic_store_n(&gen_[slot], g, __ATOMIC_RELEASE);
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
		if (h.slot >= cap_ || (h.gen & 1u) == 0 || gen_[h.slot] != h.gen)
			return EINVAL;
		__atomic_store_n(&gen_[h.slot], h.gen + 1, __ATOMIC_RELEASE);
		--live_;
		if (dq_ == nullptr) {
			free_.push_back(h.slot);
			return 0;
		}
		uint64_t e = h.slot;
		if (rte_rcu_qsbr_dq_enqueue(dq_, &e) != 0) {
			/* Queue full: wait for a grace period here (control thread may
			 * block), then retry. Poll threads are never blocked by this. */
			rte_rcu_qsbr_dq_reclaim(dq_, cap_, nullptr, nullptr, nullptr);
			while (rte_rcu_qsbr_dq_enqueue(dq_, &e) != 0)
				rte_rcu_qsbr_dq_reclaim(dq_, cap_, nullptr, nullptr, nullptr);
		}
		return 0;
	}

	/* Moves slots whose grace period has ended back to the free list.
	 * (Control thread only.) */
	void reclaim()
	{
		if (dq_ != nullptr)
			rte_rcu_qsbr_dq_reclaim(dq_, cap_, nullptr, nullptr, nullptr);
	}

	uint32_t capacity() const { return cap_; }
	uint32_t live() const { return live_; }

private:
	static void reclaim_cb(void *p, void *e, unsigned int n)
	{
		auto *t = static_cast<ah_table *>(p);
		auto *slots = static_cast<uint64_t *>(e);
		for (unsigned i = 0; i < n; i++)
			t->free_.push_back(uint32_t(slots[i]));
	}

	uint32_t cap_ = 0;
	uint32_t live_ = 0;
	uint32_t *gen_ = nullptr;
	AV *av_ = nullptr;
	std::vector<uint32_t> free_;
	rte_rcu_qsbr_dq *dq_ = nullptr;
};

} // namespace rdgram

#endif
