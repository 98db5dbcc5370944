/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/verbs queue set-up and teardown (control path, out of line):
 * attach checks the sizes and allocates the send and receive rings
 * (verbs_logic.h); at teardown drain_once reaps flush completions and
 * release_tx/release_rx give back what the rings still hold.
 */
#include "verbs_datapath.h"

#include <cerrno>

#include <rte_mbuf.h>

namespace rdgram::verbs {

int verbs_queue::attach(const verbs_queue_parts &p)
{
	if (p.sq_depth == 0 || p.rq_depth == 0 || p.recv_batch == 0 || p.recv_batch > max_burst ||
	    p.recv_batch > p.rq_depth || p.tx.signal_every == 0 || p.tx.signal_every > p.sq_depth ||
	    p.rx_pool == nullptr || p.ops == nullptr)
		return EINVAL;
	p_ = p;
	p_.tx.own_qkey = p.qkey;
	if (int e = ring_.init(p.sq_depth); e != 0)
		return e;
	if (int e = rx_.init(p.rq_depth); e != 0)
		return e;
	since_ = 0;
	ctr_ = verbs_counters{};
	return 0;
}

void verbs_queue::detach()
{
	p_ = verbs_queue_parts{};
}

void verbs_queue::release_tx()
{
	ring_.drain([](rte_mbuf *m) { rte_pktmbuf_free(m); });
}

uint32_t verbs_queue::release_rx()
{
	const uint32_t n = rx_.drain([](rte_mbuf *m) { rte_pktmbuf_free(m); });
	ctr_.rx_reclaimed += n;
	return n;
}

unsigned verbs_queue::drain_once()
{
	unsigned seen = reap_tx();
	ibv_wc wc[max_burst];
	int got = p_.ops->poll_cq(p_.recv_cq, max_burst, wc);
	for (int i = 0; i < got; i++) {
		auto *m = reinterpret_cast<rte_mbuf *>(uintptr_t(wc[i].wr_id));
		if (rx_.complete(m))
			rte_pktmbuf_free(m);
		else
			ctr_.rx_unknown_wr++;
	}
	return seen + unsigned(got > 0 ? got : 0);
}

int tx_ring::init(uint32_t depth)
{
	if (depth == 0 || depth > (1u << 20))
		return EINVAL;
	uint32_t cap = 1;
	while (cap < depth)
		cap <<= 1;
	slots_.assign(cap, nullptr);
	mask_ = cap - 1;
	depth_ = depth;
	head_ = tail_ = 0;
	return 0;
}

int rx_ring::init(uint32_t depth)
{
	if (depth == 0 || depth > (1u << 20))
		return EINVAL;
	uint32_t cap = 1;
	while (cap < 2 * depth)
		cap <<= 1;
	slots_.assign(cap, nullptr);
	mask_ = cap - 1;
	head_ = tail_ = 0;
	live_ = 0;
	return 0;
}

} // namespace rdgram::verbs
