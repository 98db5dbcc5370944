/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll: the set-up of one rank's state machine (coll_engine.h),
 * out of the engine's header: every buffer its poll step uses, sized from
 * the job (ranks, block size, iterations) before the poll thread runs it.
 * Included where ranks are set up (coll_run.cc).
 */
#ifndef RDGRAM_COLL_RANK_INIT_H
#define RDGRAM_COLL_RANK_INIT_H

#include <algorithm>
#include <cstdint>
#include <vector>

#include "coll_engine.h"

namespace rdgram::coll {

template <class Q> void coll_rank<Q>::init(const rank_params &p, Q *q, const std::vector<peer_addr> &peers)
{
	p_ = p;
	q_ = q;
	peers_ = peers;
	const unsigned n = p.nranks;
	rounds_ = 0;
	while ((1u << rounds_) < n)
		rounds_++;
	bitmap_len_ = (n + 7) / 8;
	/* Largest payload: a block, or the barrier's set of ranks. */
	maxdata_ = std::max<uint32_t>(p.size, bitmap_len_);
	per_op_ = std::max<unsigned>(n - 1, rounds_);
	if (per_op_ == 0)
		per_op_ = 1;
	for (auto &s : slot_) {
		s.tag = UINT32_MAX;
		s.have.assign(n > rounds_ ? n : rounds_, 0);
		s.buf.assign(size_t(n) * p.size, 0);
		s.sendbuf.assign(size_t(n) * p.size, 0);
		s.bits.assign(size_t(rounds_ + 1) * bitmap_len_, 0);
	}
	tx_.assign(2 * per_op_, tx_ent{});
	txdata_.assign(size_t(2) * per_op_ * maxdata_, 0);
	scratch_.assign(size_t(tx_batch) * (sizeof(msg_hdr) + maxdata_), 0);
	lat_.assign(size_t(p.iters) * nb_ops, 0);
	rng_ = p.seed * 0x9e3779b97f4a7c15ull + p.rank + 1;
	total_ = p.iters * nb_ops;
	cur_ = 0;
	entered_ = false;
}

} // namespace rdgram::coll

#endif
