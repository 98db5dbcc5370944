/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * TSan builds only: a mempool handler that tells ThreadSanitizer about the
 * hand-off of every object. DPDK's own handler (ring_mp_mc) runs in an
 * uninstrumented library, so an mbuf freed on one lcore and allocated on
 * another would be reported as raced. This one is the same MP/MC rte_ring,
 * with a release on each object put and an acquire on each object taken.
 * Pools created by rdgram in a TSan build use it ("rdgram_tsan").
 */
#include "rdgram/tsan.h"

#if RDGRAM_TSAN
#include <cerrno>
#include <cstdio>

#include <rte_errno.h>
#include <rte_mempool.h>
#include <rte_ring.h>

namespace {

int tsan_alloc(rte_mempool *mp)
{
	char name[RTE_RING_NAMESIZE];
	snprintf(name, sizeof(name), "tsan_%.20s", mp->name);
	rte_ring *r = rte_ring_create(name, rte_align32pow2(mp->size + 1), mp->socket_id, 0);
	if (r == nullptr)
		return -rte_errno;
	mp->pool_data = r;
	return 0;
}

void tsan_free(rte_mempool *mp) { rte_ring_free(static_cast<rte_ring *>(mp->pool_data)); }

int tsan_enqueue(rte_mempool *mp, void *const *objs, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		RDGRAM_TSAN_RELEASE(objs[i]);
	return rte_ring_mp_enqueue_bulk(static_cast<rte_ring *>(mp->pool_data), objs, n, nullptr) == n ? 0
													 : -ENOBUFS;
}

int tsan_dequeue(rte_mempool *mp, void **objs, unsigned n)
{
	if (rte_ring_mc_dequeue_bulk(static_cast<rte_ring *>(mp->pool_data), objs, n, nullptr) != n)
		return -ENOENT;
	for (unsigned i = 0; i < n; i++)
		RDGRAM_TSAN_ACQUIRE(objs[i]);
	return 0;
}

unsigned tsan_count(const rte_mempool *mp) { return rte_ring_count(static_cast<rte_ring *>(mp->pool_data)); }

} // namespace

namespace rdgram {
/* Called once by runtime::init (a static library drops constructors). */
void register_tsan_mempool()
{
	static rte_mempool_ops o{};
	snprintf(o.name, sizeof(o.name), "rdgram_tsan");
	o.alloc = tsan_alloc;
	o.free = tsan_free;
	o.enqueue = tsan_enqueue;
	o.dequeue = tsan_dequeue;
	o.get_count = tsan_count;
	rte_mempool_register_ops(&o);
}
} // namespace rdgram
#else
namespace rdgram {
void register_tsan_mempool() {}
} // namespace rdgram
#endif
