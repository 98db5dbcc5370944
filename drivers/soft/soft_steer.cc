/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * drivers/soft steering between queues: set-up and teardown (soft_steer.h).
 */
#include "soft_steer.h"

#include <cerrno>
#include <cstdio>

#include <rte_errno.h>
#include <rte_hash_crc.h>

#include "rdgram/tsan.h"

namespace rdgram::soft {

int soft_steer::init(unsigned nb_queues, unsigned ring_size, unsigned max_qpns, int socket, rte_rcu_qsbr *qs,
		     std::string *err)
{
	if (nb_queues > max_queues) {
		*err = "nb_queues " + std::to_string(nb_queues) + " above the " + std::to_string(max_queues) +
		       " queues the soft driver steers between";
		return EINVAL;
	}
	static std::atomic<unsigned> seq{0};
	const unsigned s = seq.fetch_add(1);
	char name[RTE_RING_NAMESIZE];
	for (unsigned q = 0; q < nb_queues; q++) {
		snprintf(name, sizeof(name), "rdgram_ho%u_%u", s, q);
		/* Any queue hands in; only the owner takes out. */
		rte_ring *r = rte_ring_create(name, ring_size, socket, RING_F_SC_DEQ);
		if (r == nullptr) {
			*err = std::string("hand-off ring: ") + rte_strerror(rte_errno);
			fini();
			return rte_errno ? rte_errno : ENOMEM;
		}
		rings_.push_back(r);
	}
	snprintf(name, sizeof(name), "rdgram_qpn%u", s);
	rte_hash_parameters hp{};
	hp.name = name;
	hp.entries = max_qpns < 64 ? 64 : max_qpns;
	hp.key_len = sizeof(uint32_t);
	hp.hash_func = rte_hash_crc;
	hp.socket_id = socket;
	/* Poll threads read while the set-up path writes (one writer at a
	 * time: mu_). */
	hp.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF;
	qpns_ = rte_hash_create(&hp);
	if (qpns_ == nullptr) {
		*err = std::string("QPN table: ") + rte_strerror(rte_errno);
		fini();
		return rte_errno ? rte_errno : ENOMEM;
	}
	if (qs != nullptr) {
		rte_hash_rcu_config rc{};
		rc.v = qs;
		rc.mode = RTE_HASH_QSBR_MODE_DQ;
		if (rte_hash_rcu_qsbr_add(qpns_, &rc) != 0) {
			*err = std::string("QPN table QSBR: ") + rte_strerror(rte_errno);
			fini();
			return rte_errno ? rte_errno : ENOMEM;
		}
		rcu_ = true;
	}
	return 0;
}

unsigned soft_steer::drain(uint16_t q)
{
	unsigned n = 0;
	void *m;
	while (q < rings_.size() && rte_ring_dequeue(rings_[q], &m) == 0) {
		RDGRAM_TSAN_ACQUIRE(m);
		rte_pktmbuf_free(static_cast<rte_mbuf *>(m));
		n++;
	}
	return n;
}

unsigned soft_steer::fini()
{
	unsigned n = 0;
	for (uint16_t q = 0; q < rings_.size(); q++) {
		n += drain(q);
		rte_ring_free(rings_[q]);
	}
	rings_.clear();
	rte_hash_free(qpns_);
	qpns_ = nullptr;
	rcu_ = false;
	for (auto &g : groups_)
		g.queues.store(0, std::memory_order_relaxed);
	ngroups_.store(0, std::memory_order_relaxed);
	return n;
}

int soft_steer::claim(uint32_t qpn, uint16_t q)
{
	std::lock_guard<std::mutex> l(mu_);
	void *d;
	if (rte_hash_lookup_data(qpns_, &qpn, &d) >= 0)
		return uintptr_t(d) == q ? 0 : EEXIST;
	int rc = rte_hash_add_key_data(qpns_, &qpn, reinterpret_cast<void *>(uintptr_t(q)));
	return rc == 0 ? 0 : rc == -ENOSPC ? ENOSPC : -rc;
}

void soft_steer::release(uint32_t qpn, uint16_t q)
{
	std::lock_guard<std::mutex> l(mu_);
	void *d;
	if (rte_hash_lookup_data(qpns_, &qpn, &d) < 0 || uintptr_t(d) != q)
		return;
	int32_t pos = rte_hash_del_key(qpns_, &qpn);
	/* Lock-free readers: without QSBR, the key's slot is freed at once
	 * (a reader in the middle of a lookup then misses it or finds the
	 * slot's next key: never a wrong owner for its own QPN); with it,
	 * rte_hash frees it once the poll threads went quiescent. */
	if (pos >= 0 && !rcu_)
		rte_hash_free_key_with_position(qpns_, pos);
}

int soft_steer::join(const wire::gid &g, uint16_t q)
{
	std::lock_guard<std::mutex> l(mu_);
	const unsigned n = ngroups_.load(std::memory_order_relaxed);
	int empty = -1;
	for (unsigned i = 0; i < n; i++) {
		const uint64_t m = groups_[i].queues.load(std::memory_order_relaxed);
		if (m != 0 && groups_[i].is(g)) {
			groups_[i].queues.store(m | (1ull << q), std::memory_order_release);
			return 0;
		}
		if (m == 0 && empty < 0)
			empty = int(i);
	}
	if (empty < 0) {
		if (n == max_groups)
			return ENOMEM;
		empty = int(n);
	}
	groups_[empty].set(g);
	groups_[empty].queues.store(1ull << q, std::memory_order_release);
	if (unsigned(empty) == n)
		ngroups_.store(n + 1, std::memory_order_release);
	return 0;
}

void soft_steer::leave(const wire::gid &g, uint16_t q)
{
	std::lock_guard<std::mutex> l(mu_);
	const unsigned n = ngroups_.load(std::memory_order_relaxed);
	for (unsigned i = 0; i < n; i++) {
		const uint64_t m = groups_[i].queues.load(std::memory_order_relaxed);
		if (m != 0 && groups_[i].is(g)) {
			groups_[i].queues.store(m & ~(1ull << q), std::memory_order_release);
			return;
		}
	}
}

} // namespace rdgram::soft
