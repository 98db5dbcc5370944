/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The AH registry: one AH per distinct destination on the host, shared by
 * every QP and poll thread. It lives on the control thread (every method:
 * control thread only, NOT thread safe) above a driver's create/destroy:
 *
 *  - deduplicated by normalized attributes: fields verbs ignores (the GRH
 *    when is_global is 0) do not split entries;
 *  - reference counted: acquire() takes a reference, release() drops it;
 *    an entry without references stays cached for the next acquire until
 *    it is evicted;
 *  - capacity = min(configured capacity, device max_ah); at capacity the
 *    least recently released unreferenced entry is evicted (destroyed in
 *    the driver, which defers slot reuse past an RCU grace period);
 *  - when the device itself says ENOMEM (a full hardware table: EFA, or
 *    other users of the device), one unreferenced entry is evicted and the
 *    creation retried once;
 *  - ENOMEM to the caller only when every entry is referenced.
 *
 * Layout. An HPC job start creates an AH to every peer at once (the "AH
 * storm": 10^5..10^6 creations), so the registry must add little to the
 * driver's own create_ah and stay small per AH. Nothing is allocated per
 * entry; three arrays are allocated at construction, the two large ones
 * advised onto transparent huge pages (THP "madvise" mode: the key index is
 * probed at random, and under nested paging a TLB miss costs as much as the
 * cache miss; pages are still touched only as they are used):
 *
 *  - entries: capacity x 56 bytes, each the 32-byte key, its hash, the
 *    handle, the reference count and the LRU links as 32-bit entry
 *    indices (an intrusive doubly linked list of the unreferenced entries,
 *    least recently released at the head). Entries are handed out from a
 *    high-water mark, then from a free list threaded through the links;
 *  - key index: open addressing, linear probing, a power of two >= 1.5 x
 *    capacity buckets (load <= 2/3) of 8 bytes: the low 32 bits of the
 *    key's 64-bit hash (ah_key_hash64) and the entry index + 1 (0: empty).
 *    A probe compares hashes and reads an entry's key only on a hash match;
 *    a miss usually costs one cache line. Deletion shifts the following
 *    buckets back (no tombstones), so probes never lengthen under churn;
 *  - handle index: a flat array slot -> entry index + 1, indexed by the
 *    handle's AH slot (unique among live AHs; ah_table numbers slots
 *    densely from 0 and reuses freed ones). It starts at capacity rounded
 *    up to a power of two (at most the device's max_ah) and doubles when
 *    the driver hands out a slot beyond it (other users of the device, or
 *    freed slots handed out again in another order), so at most it costs
 *    4 bytes per device slot in use.
 *
 * So an AH costs 56 + 12..24 (key index) + 4..8 (handle index) bytes here:
 * 76..88 when full (more when the registry is much smaller than the
 * device's table and the driver spreads its slots over it), against ~170
 * measured for the previous two std::unordered_map + std::list version
 * (benchmarks/bench_ah.cc).
 *
 * acquire_batch() creates many at once: it hashes each key and prefetches
 * its home bucket 16 elements ahead, so the index misses of a large storm
 * overlap with the creations before it; otherwise each element is exactly
 * acquire().
 *
 * Eviction hooks (add_evict_hook: a list, so that several components share
 * one registry, e.g. ah_service's dest_cache and ahn_attrib's bindings) are
 * called, in the order they were added, for every entry the registry
 * destroys (eviction, trim, clear, the destructor), just before the
 * driver's destroy_ah. A hook must not call back into the registry.
 */
#ifndef RDGRAM_AH_REGISTRY_H
#define RDGRAM_AH_REGISTRY_H

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>

#include <rte_prefetch.h>

#include "rdgram/ah_key.h"
#include "rdgram/device.h"

namespace rdgram {

struct ah_registry_stats {
	uint64_t created, reused, evicted, device_enomem_retries, failed;
};

class ah_registry {
public:
	/* Called for each entry the registry destroys, before destroy_ah. */
	using evict_fn = void (*)(void *arg, const ah_key &k, ah_handle h);
	/* A configured capacity beyond this is taken as this (the tables are
	 * sized by capacity at construction). */
	static constexpr uint32_t max_capacity = 1u << 24;

	/* capacity: configured limit; the device's max_ah caps it. If the
	 * tables cannot be allocated, capacity() is 0 and every miss fails
	 * with ENOMEM. */
	ah_registry(device &dev, uint32_t capacity) : dev_(dev)
	{
		const uint32_t max_ah = dev.port().max_ah;
		cap_ = std::min(max_ah != 0 && max_ah < capacity ? max_ah : capacity, max_capacity);
		uint32_t nb = 8;
		while (nb < cap_ + cap_ / 2)
			nb <<= 1;
		/* The handle index starts at the registry's size (a device used by
		 * the registry alone numbers its live AHs below it) and grows to
		 * the highest slot seen. */
		nslots_ = 64;
		while (nslots_ < cap_)
			nslots_ <<= 1;
		if (max_ah != 0)
			nslots_ = std::min(nslots_, max_ah);
		ent_ = static_cast<entry *>(table_alloc(sizeof(entry) * std::max(cap_, 1u), false));
		idx_ = static_cast<bucket *>(table_alloc(sizeof(bucket) * size_t(nb), true));
		slot_ = static_cast<uint32_t *>(std::calloc(nslots_, sizeof(uint32_t)));
		if (ent_ == nullptr || idx_ == nullptr || slot_ == nullptr) {
			free_tables();
			return;
		}
		mask_ = nb - 1;
	}
	ah_registry(const ah_registry &) = delete;
	ah_registry &operator=(const ah_registry &) = delete;
	~ah_registry()
	{
		clear();
		free_tables();
	}

	/* A referenced handle for attr, creating the AH on a miss. On failure
	 * ah_null with *err set (the driver's errno; ENOMEM when the registry
	 * is full of referenced entries). */
	ah_handle acquire(const ibv_ah_attr &attr, int *err)
	{
		const ah_key k = ah_key::of(attr);
		return acquire_hashed(attr, k, uint32_t(ah_key_hash64(k)), err);
	}

	/* acquire() for attrs[0..n-1] in order (the AH storm at job start):
	 * out[i] is the handle or ah_null, errs[i] (errs may be nullptr) 0 or
	 * the errno acquire() would give. Equal attributes within the batch
	 * share one AH, one reference each. Returns how many succeeded. */
	unsigned acquire_batch(const ibv_ah_attr *attrs, unsigned n, ah_handle *out, int *errs)
	{
		/* A rolling window: element i + ahead is hashed and its home
		 * bucket prefetched while element i is created. */
		constexpr unsigned ahead = 16;
		ah_key k[ahead];
		uint32_t hv[ahead];
		auto prepare = [&](unsigned j) {
			k[j % ahead] = ah_key::of(attrs[j]);
			hv[j % ahead] = uint32_t(ah_key_hash64(k[j % ahead]));
			rte_prefetch0(&idx_[hv[j % ahead] & mask_]);
		};
		for (unsigned j = 0; j < n && j < ahead; j++)
			prepare(j);
		unsigned ok = 0;
		for (unsigned i = 0; i < n; i++) {
			const ah_key key = k[i % ahead];
			const uint32_t h = hv[i % ahead];
			if (i + ahead < n)
				prepare(i + ahead);
			int e;
			out[i] = acquire_hashed(attrs[i], key, h, &e);
			if (errs != nullptr)
				errs[i] = e;
			ok += e == 0;
		}
		return ok;
	}

	/* Drops one reference. 0, or EINVAL for a handle the registry does not
	 * hold or holds no reference to. */
	int release(ah_handle h)
	{
		const uint32_t x = find_handle(h);
		if (x == nil || ent_[x].refs == 0)
			return EINVAL;
		if (--ent_[x].refs == 0)
			lru_push_tail(x);
		return 0;
	}

	/* Evicts every unreferenced entry (e.g. at shutdown, or on demand). */
	unsigned trim()
	{
		unsigned n = 0;
		while (evict_one())
			n++;
		return n;
	}
	/* Destroys everything, referenced or not (shutdown). */
	void clear()
	{
		if (size_ == 0)
			return;
		/* A nearly empty large table: erase bucket by bucket; otherwise
		 * wipe the whole index after the loop. */
		const bool wipe = size_ >= (mask_ + 1) / 16;
		for (uint32_t x = 0; x < used_; x++) {
			entry &e = ent_[x];
			if (e.h == ah_null)
				continue; /* on the free list */
			run_hooks(e.key, e.h);
			dev_.destroy_ah(e.h);
			slot_[e.h.slot] = 0;
			if (!wipe)
				index_erase(x);
		}
		if (wipe)
			memset(idx_, 0, sizeof(bucket) * (size_t(mask_) + 1));
		used_ = 0;
		free_ = lru_head_ = lru_tail_ = nil;
		size_ = nunref_ = 0;
	}

	/* Eviction hooks; see the top of this file. add: 0; EEXIST: (fn,
	 * arg) is there already; ENOSPC: max_hooks. remove: a pair that is
	 * not there is ignored. */
	static constexpr unsigned max_hooks = 4;
	int add_evict_hook(evict_fn fn, void *arg)
	{
		for (unsigned i = 0; i < nhooks_; i++)
			if (hooks_[i].fn == fn && hooks_[i].arg == arg)
				return EEXIST;
		if (nhooks_ == max_hooks)
			return ENOSPC;
		hooks_[nhooks_++] = hook{fn, arg};
		return 0;
	}
	void remove_evict_hook(evict_fn fn, void *arg)
	{
		for (unsigned i = 0; i < nhooks_; i++)
			if (hooks_[i].fn == fn && hooks_[i].arg == arg) {
				std::copy(hooks_ + i + 1, hooks_ + nhooks_, hooks_ + i);
				nhooks_--;
				return;
			}
	}
	unsigned nb_evict_hooks() const { return nhooks_; }

	uint32_t capacity() const { return cap_; }
	size_t size() const { return size_; }
	size_t unreferenced() const { return nunref_; }
	uint32_t refs(ah_handle h) const
	{
		const uint32_t x = find_handle(h);
		return x == nil ? 0 : ent_[x].refs;
	}
	const ah_registry_stats &stats() const { return st_; }
	/* Read-only iteration for operators' tools (rdgram-ah inspect): calls
	 * f(key, handle, refs) for every live entry, in entry-array order.
	 * (Control thread only; f must not call into the registry.) */
	template <class F> void for_each(F &&f) const
	{
		for (uint32_t x = 0; x < used_; x++)
			if (!(ent_[x].h == ah_null))
				f(ent_[x].key, ent_[x].h, ent_[x].refs);
	}

	/* Bytes of one entry in the entry array. */
	static constexpr size_t entry_bytes() { return sizeof(entry); }
	/* Bytes the registry allocated (entries, both indexes, the object);
	 * memory_bytes() / capacity() is the cost per AH when full. */
	size_t memory_bytes() const
	{
		if (mask_ == 0)
			return sizeof(*this);
		return sizeof(*this) + sizeof(entry) * size_t(std::max(cap_, 1u)) +
		       sizeof(bucket) * (size_t(mask_) + 1) + sizeof(uint32_t) * size_t(nslots_);
	}

private:
	static constexpr uint32_t nil = UINT32_MAX;

	/* 56 bytes, 4-byte aligned. Free: h == ah_null, next links the free
	 * list. Live and unreferenced: prev/next link the LRU list. hash: the
	 * key's, as in its bucket (eviction finds the bucket without
	 * rehashing, and can prefetch it before it needs it). */
	struct entry {
		ah_key key;
		ah_handle h;
		uint32_t refs;
		uint32_t prev, next;
		uint32_t hash;
	};
	static_assert(sizeof(entry) == 56);
	/* Key index bucket: idx1 = entry index + 1, 0 = empty. */
	struct bucket {
		uint32_t hash;
		uint32_t idx1;
	};

	ah_handle acquire_hashed(const ibv_ah_attr &attr, const ah_key &k, uint32_t hv, int *err)
	{
		/* Full: a miss will evict the LRU head, whose bucket is most
		 * likely not cached. Fetch it while k's bucket is probed. */
		if (size_ >= cap_ && lru_head_ != nil)
			rte_prefetch0(&idx_[ent_[lru_head_].hash & mask_]);
		uint32_t i = hv & mask_;
		for (;; i = (i + 1) & mask_) {
			const bucket b = idx_[i];
			if (b.idx1 == 0)
				break;
			if (b.hash == hv && ent_[b.idx1 - 1].key == k) {
				entry &e = ent_[b.idx1 - 1];
				if (e.refs++ == 0)
					lru_unlink(b.idx1 - 1);
				st_.reused++;
				*err = 0;
				return e.h;
			}
		}
		/* Miss: i is the first empty bucket of k's probe sequence, where k
		 * goes unless an eviction shifts buckets back. */
		const uint64_t evicted = st_.evicted;
		if (size_ >= cap_ && !evict_one()) {
			st_.failed++;
			*err = ENOMEM;
			return ah_null;
		}
		int e = 0;
		ah_handle h = dev_.create_ah(attr, &e);
		if (e == ENOMEM) {
			/* Evict only if that can make room now. Slots whose grace
			 * period has ended are freed first; if some are still
			 * waiting (a poll thread slow to report quiescence), an
			 * evicted AH's slot would wait too, and every failed create
			 * would empty the cache by one more entry: report ENOMEM
			 * (transient) instead. */
			dev_.reclaim();
			if (dev_.reclaim_pending() == 0 && evict_one()) {
				st_.device_enomem_retries++;
				h = dev_.create_ah(attr, &e);
			}
		}
		if (e == 0 && h.slot >= nslots_ && !grow_slots(h.slot)) {
			dev_.destroy_ah(h);
			e = ENOMEM;
		}
		if (e != 0) {
			st_.failed++;
			*err = e;
			return ah_null;
		}
		if (st_.evicted != evicted)
			for (i = hv & mask_; idx_[i].idx1 != 0; i = (i + 1) & mask_)
				;
		uint32_t x;
		if (free_ != nil) {
			x = free_;
			free_ = ent_[x].next;
		} else {
			x = used_++;
		}
		entry &n = ent_[x];
		n.key = k;
		n.h = h;
		n.refs = 1;
		n.prev = n.next = nil;
		n.hash = hv;
		idx_[i] = bucket{hv, x + 1};
		slot_[h.slot] = x + 1;
		size_++;
		st_.created++;
		*err = 0;
		return h;
	}

	/* The entry holding live handle h, or nil. */
	uint32_t find_handle(ah_handle h) const
	{
		if (h.slot >= nslots_)
			return nil;
		const uint32_t x1 = slot_[h.slot];
		if (x1 == 0 || !(ent_[x1 - 1].h == h))
			return nil;
		return x1 - 1;
	}

	void lru_push_tail(uint32_t x)
	{
		entry &e = ent_[x];
		e.prev = lru_tail_;
		e.next = nil;
		if (lru_tail_ != nil)
			ent_[lru_tail_].next = x;
		else
			lru_head_ = x;
		lru_tail_ = x;
		nunref_++;
	}
	void lru_unlink(uint32_t x)
	{
		entry &e = ent_[x];
		if (e.prev != nil)
			ent_[e.prev].next = e.next;
		else
			lru_head_ = e.next;
		if (e.next != nil)
			ent_[e.next].prev = e.prev;
		else
			lru_tail_ = e.prev;
		nunref_--;
	}

	/* Removes entry x's bucket, shifting the rest of its cluster back so
	 * that every key stays reachable from its home bucket. */
	void index_erase(uint32_t x)
	{
		uint32_t i = ent_[x].hash & mask_;
		while (idx_[i].idx1 != x + 1)
			i = (i + 1) & mask_;
		for (uint32_t j = i;;) {
			j = (j + 1) & mask_;
			if (idx_[j].idx1 == 0)
				break;
			const uint32_t home = idx_[j].hash & mask_;
			/* idx_[j] may move to the hole at i if i lies on its probe
			 * path (cyclically in [home, j)). */
			if (((j - home) & mask_) >= ((j - i) & mask_)) {
				idx_[i] = idx_[j];
				i = j;
			}
		}
		idx_[i] = bucket{0, 0};
	}

	bool evict_one()
	{
		if (lru_head_ == nil)
			return false;
		const uint32_t x = lru_head_;
		entry &e = ent_[x];
		lru_unlink(x);
		run_hooks(e.key, e.h);
		dev_.destroy_ah(e.h);
		index_erase(x);
		slot_[e.h.slot] = 0;
		e.h = ah_null;
		e.next = free_;
		free_ = x;
		size_--;
		st_.evicted++;
		return true;
	}

	/* Grows the handle index to cover slot (a driver numbering its slots
	 * beyond the max_ah it reported, or reporting none). */
	bool grow_slots(uint32_t slot)
	{
		if (slot == UINT32_MAX || nslots_ == 0)
			return false;
		size_t n = nslots_;
		while (n <= slot)
			n *= 2;
		n = std::min<size_t>(n, size_t(UINT32_MAX));
		auto *p = static_cast<uint32_t *>(std::realloc(slot_, n * sizeof(uint32_t)));
		if (p == nullptr)
			return false;
		memset(p + nslots_, 0, (n - nslots_) * sizeof(uint32_t));
		slot_ = p;
		nslots_ = uint32_t(n);
		return true;
	}

	/* A table (zeroed or not), its 2 MiB-aligned interior advised onto
	 * transparent huge pages (see the top of this file). Untouched pages
	 * stay untouched: calloc of a large block maps fresh zero pages. */
	static void *table_alloc(size_t bytes, bool zero)
	{
		void *p = zero ? std::calloc(bytes, 1) : std::malloc(bytes);
		constexpr uintptr_t huge = uintptr_t(2) << 20;
		const uintptr_t b = (uintptr_t(p) + huge - 1) & ~(huge - 1);
		const uintptr_t e = (uintptr_t(p) + bytes) & ~(huge - 1);
		if (p != nullptr && e > b)
			madvise(reinterpret_cast<void *>(b), e - b, MADV_HUGEPAGE); /* advice: may fail */
		return p;
	}

	void free_tables()
	{
		std::free(ent_);
		if (idx_ != &empty_bucket_)
			std::free(idx_);
		std::free(slot_);
		ent_ = nullptr;
		slot_ = nullptr;
		idx_ = const_cast<bucket *>(&empty_bucket_);
		mask_ = 0;
		cap_ = 0;
		nslots_ = 0;
	}

	/* What idx_ points to without tables: one empty bucket, so a probe
	 * simply misses (and capacity 0 refuses the insertion). */
	static inline const bucket empty_bucket_{0, 0};

	device &dev_;
	uint32_t cap_ = 0;
	entry *ent_ = nullptr;       /* cap_ entries */
	bucket *idx_ = const_cast<bucket *>(&empty_bucket_);
	uint32_t mask_ = 0;          /* key index buckets - 1 */
	uint32_t *slot_ = nullptr;   /* AH slot -> entry index + 1 */
	uint32_t nslots_ = 0;
	uint32_t used_ = 0;          /* entries [0, used_) were handed out */
	uint32_t free_ = nil;        /* free list below used_ */
	uint32_t size_ = 0;
	uint32_t nunref_ = 0;
	uint32_t lru_head_ = nil, lru_tail_ = nil; /* least recently released first */
	struct hook {
		evict_fn fn;
		void *arg;
	};
	hook hooks_[max_hooks]{};
	unsigned nhooks_ = 0;
	void run_hooks(const ah_key &k, ah_handle h)
	{
		for (unsigned i = 0; i < nhooks_; i++)
			hooks_[i].fn(hooks_[i].arg, k, h);
	}
	ah_registry_stats st_{};
};

} // namespace rdgram

#endif
