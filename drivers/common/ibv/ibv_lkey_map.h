/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/common/ibv: the lkey of a buffer, from the memory regions a
 * driver registered (register_mempool, ibv_device.h: one ibv_reg_mr per
 * mempool memory chunk). One map for verbs, mlx5 and EFA: sorted by
 * address, overlaps refused, and every bound checked without overflow
 * ([a, a + len) inside [start, end) is tested as a >= start, a <= end,
 * end - a >= len, never as a + len <= end, which wraps for a near the top
 * of the address space).
 */
#ifndef RDGRAM_IBV_LKEY_MAP_H
#define RDGRAM_IBV_LKEY_MAP_H

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <rte_branch_prediction.h>

namespace rdgram::ibv {

/*
 * lkeys of registered memory, one entry per registered range (a mempool
 * chunk: rte_mempool_mem_iter, one ibv_reg_mr each). Sorted by address; the
 * lookup tries the last hit first (a burst's mbufs come from one chunk),
 * then searches: no syscall, no allocation.
 * (NOT multi-thread safe: each queue holds its own copy.)
 */
class lkey_map {
public:
	static constexpr unsigned max_chunks = 64;

	/* Adds [start, start + len) with its lkey. 0; EINVAL (empty range);
	 * EEXIST (overlaps a range already added); ENOSPC (table full). */
	int add(uintptr_t start, size_t len, uint32_t lkey)
	{
		if (len == 0 || start + len < start)
			return EINVAL;
		const uintptr_t end = start + len;
		unsigned pos = 0;
		while (pos < n_ && c_[pos].start < start)
			pos++;
		if ((pos > 0 && c_[pos - 1].end > start) || (pos < n_ && c_[pos].start < end))
			return EEXIST;
		if (n_ == max_chunks)
			return ENOSPC;
		memmove(&c_[pos + 1], &c_[pos], (n_ - pos) * sizeof(c_[0]));
		c_[pos] = chunk{start, end, lkey};
		n_++;
		last_ = 0;
		return 0;
	}
	/* Forgets every range. */
	void clear() { n_ = last_ = 0; }
	/* true and *lkey when [a, a + len) lies inside one registered range.
	 * (Data path.) */
	bool lookup(const void *p, uint32_t len, uint32_t *lkey)
	{
		return lookup(reinterpret_cast<uintptr_t>(p), len, lkey);
	}
	bool lookup(uintptr_t a, uint32_t len, uint32_t *lkey)
	{
		if (likely(last_ < n_ && inside(c_[last_], a, len))) {
			*lkey = c_[last_].lkey;
			return true;
		}
		/* The last range starting at or below a. */
		unsigned lo = 0, hi = n_;
		while (lo < hi) {
			unsigned mid = (lo + hi) / 2;
			if (c_[mid].start <= a)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == 0 || !inside(c_[lo - 1], a, len))
			return false;
		last_ = lo - 1;
		*lkey = c_[last_].lkey;
		return true;
	}
	unsigned size() const { return n_; }
	/* The range of the last successful lookup (false if none yet): a run
	 * of mbufs from one chunk is checked against it alone (mlx5's
	 * mbuf_run). (Data path.) */
	bool last_range(uintptr_t *start, uintptr_t *end, uint32_t *lkey) const
	{
		if (last_ >= n_)
			return false;
		*start = c_[last_].start;
		*end = c_[last_].end;
		*lkey = c_[last_].lkey;
		return true;
	}
	/* [a, a + len) inside [start, end), without overflow. */
	static bool inside(uintptr_t start, uintptr_t end, uintptr_t a, uint32_t len)
	{
		return a >= start && a <= end && end - a >= len;
	}

private:
	struct chunk {
		uintptr_t start, end;
		uint32_t lkey;
	};
	static bool inside(const chunk &c, uintptr_t a, uint32_t len) { return inside(c.start, c.end, a, len); }
	chunk c_[max_chunks]{};
	unsigned n_ = 0;
	unsigned last_ = 0;
};

} // namespace rdgram::ibv

#endif
