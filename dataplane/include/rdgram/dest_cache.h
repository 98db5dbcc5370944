/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The destination cache: destination key (ah_key) -> ah_handle for poll
 * threads, with no syscall, lock or heap allocation on the read side, while
 * one writer thread (normally the control thread) inserts and erases.
 *
 * Layout: open addressing with linear probing over 64-byte buckets, one
 * entry per bucket, the table a power of two >= 2x capacity, allocated with
 * rte_zmalloc_socket on the poll threads' NUMA node. A bucket holds the full
 * 32-byte key inline with its handle and a 32-bit tag/state word, so a hit
 * at the home bucket costs ONE cache line (rte_hash keeps its keys in a
 * separate key store: a signature bucket line, then the key line).
 *
 * Neighbourhood hints (hopscotch-style, but over plain linear probing: the
 * hints never constrain where a key goes). The bucket's other 20 bytes
 * describe it as a home: a 16-bit mask of which of the next 15 buckets hold
 * a live key homed here, those keys' 8-bit fingerprints, and a bit set
 * once a key homed here was placed 16 or more buckets away. lookup_bulk
 * reads them from the home line it fetched anyway, so a key displaced by
 * collisions (a quarter of them at 1/2 load) costs exactly one more line,
 * and a missing key its home line only. The writer keeps them up to date
 * on insert, erase and rebuild; readers only take them as hints, confirmed
 * by the bucket's tag and key, and fall back to the plain probe.
 *
 * Tag/state word: 0 empty (ends a probe), 1 tombstone waiting for a grace
 * period, 2 tombstone the writer may reuse, otherwise a live entry whose tag
 * is the high 32 bits of the key's hash with bit 31 set (so never 0..2).
 * The low bits of the same hash give the home bucket, so tag and index are
 * independent bits of one 64-bit hash.
 *
 * Hash (ah_key_hash64, ah_key.h): three 64x64->128 multiplies folded hi^lo ("mum", the wyhash core)
 * over the key's four 64-bit words. It yields 64 well-mixed bits (index
 * from the low ones, tag from the high ones, independent even at 2^31
 * buckets), costs ~3 multiplies, two of them independent, and needs no
 * SSE4.2; rte_hash_crc gives only 32 bits over four dependent crc32q.
 *
 * Publication (writer): write key and handle, then the tag with a release
 * store; readers load the tag with an acquire load before they read the
 * key. Erase writes the tombstone tag (release): new lookups miss at once.
 * A tombstoned bucket's key memory is reused only after an rte_rcu_qsbr
 * grace period (every registered poll thread has reported a quiescent
 * state since the erase), so a reader that matched a tag never sees the key
 * or handle change under it. The grace period is tracked here with
 * rte_rcu_qsbr_start/rte_rcu_qsbr_check (inline, so ThreadSanitizer sees
 * the release/acquire pair) rather than an rte_rcu_qsbr_dq.
 *
 * Tombstones (waiting or reusable) still lengthen probes; when live entries
 * plus tombstones would exceed 3/4 of the buckets the writer rebuilds the
 * live entries into a fresh table, publishes its pointer with a release
 * store and frees the old table after a grace period. At most two old
 * tables wait at a time; beyond that the writer blocks for a grace period
 * (poll threads never block).
 *
 * A handle a lookup returns may be stale by the time it is used (erased
 * and its AH destroyed just after the lookup): that is fine, because
 * ah_table::lookup validates the generation and a stale handle is dropped,
 * never dereferenced.
 *
 * Threads: exactly one writer thread (any one, normally the control
 * thread; it must not be online on the QSBR variable, since a rebuild may
 * wait for a grace period); any number of reader (poll) threads, which
 * report quiescent states on the QSBR variable given to init between
 * lookups, as they do for the AH table. The read side touches only the
 * table: no syscall, lock, heap allocation or shared write. The writer
 * side allocates (the table with rte_zmalloc_socket, its bookkeeping on
 * the heap) and may block for a grace period.
 *
 * lookup_bulk is the fast path: see its comment for the pipelining.
 */
#ifndef RDGRAM_DEST_CACHE_H
#define RDGRAM_DEST_CACHE_H

#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>

#include <rte_branch_prediction.h>
#include <rte_common.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>
#include <rte_rcu_qsbr.h>
#include <rte_vect.h>

#include "rdgram/ah_registry.h"
#include "rdgram/tsan.h"
#include "rdgram/ud.h"

namespace rdgram {

class dest_cache {
public:
	static constexpr unsigned max_bulk = 64;
	static constexpr uint32_t max_capacity = 1u << 30;

	dest_cache() = default;
	dest_cache(const dest_cache &) = delete;
	dest_cache &operator=(const dest_cache &) = delete;
	~dest_cache() { fini(); }

	/* 64-bit hash of a key: low bits pick the home bucket, high bits the
	 * tag. Exposed for callers that want to hash ahead of time. */
	static inline uint64_t hash(const ah_key &k) { return ah_key_hash64(k); }
	/* The home bucket of a key in a table of nb buckets (a power of two),
	 * and its 8-bit fingerprint in the neighbourhood hints: exposed for
	 * tests that need keys with the same home or the same fingerprint. */
	static inline uint32_t home_of(uint64_t hv, uint32_t nb) { return uint32_t(hv) & (nb - 1); }
	static inline uint8_t fingerprint(uint64_t hv) { return fp_of(hv); }

	/* Allocates the table (NOT multi-writer safe: writer thread only), for
	 * capacity entries on NUMA node socket. qs is the QSBR variable the
	 * poll threads that call lookup report to (nullptr: only the writer
	 * thread reads, and buckets are reused at once). The writer thread
	 * must not itself be online on qs. 0, EINVAL or ENOMEM. */
	int init(uint32_t capacity, int socket, rte_rcu_qsbr *qs)
	{
		fini();
		if (capacity == 0 || capacity > max_capacity)
			return EINVAL;
		/* >= 4 buckets, so that limit_ leaves at least one empty. */
		const uint32_t nb = RTE_MAX(rte_align32pow2(2 * capacity), 4u);
		table *t = alloc_table(nb, socket);
		if (t == nullptr)
			return ENOMEM;
		cap_ = capacity;
		socket_ = socket;
		qs_ = qs;
		limit_ = nb - nb / 4;
		live_ = tombs_ = 0;
		rebuilds_ = 0;
		__atomic_store_n(&tab_, t, __ATOMIC_RELEASE);
		return 0;
	}

	/* Frees every table (NOT multi-writer safe: writer thread only), and
	 * only when no poll thread can still be in lookup on this cache: after
	 * they stopped using it and reported a quiescent state, or went
	 * offline. Lookups afterwards miss. */
	void fini()
	{
		table *t = tab_;
		__atomic_store_n(&tab_, const_cast<table *>(&empty_.hdr), __ATOMIC_RELEASE);
		if (t != &empty_.hdr)
			rte_free(t);
		for (retired &r : retired_)
			rte_free(r.t);
		retired_.clear();
		pending_.clear();
		cap_ = live_ = tombs_ = limit_ = 0;
	}

	/* Adds key -> h (NOT multi-writer safe: writer thread only).
	 * 0; EEXIST if key is present (its handle is left as it is); ENOSPC
	 * when capacity entries are live; ENOMEM if a needed rebuild could not
	 * allocate its table; EINVAL before init. */
	int insert(const ah_key &key, ah_handle h)
	{
		if (cap_ == 0)
			return EINVAL;
		reclaim_tombstones();
		const uint64_t hv = hash(key);
		const uint32_t tag = tag_of(hv);
		uint64_t kw[4];
		memcpy(kw, &key, sizeof(kw));
		for (;;) {
			table *t = tab_;
			bucket *b = buckets(t);
			const uint32_t mask = t->mask;
			uint32_t slot = UINT32_MAX;
			for (uint32_t i = uint32_t(hv) & mask;; i = (i + 1) & mask) {
				const uint32_t s = b[i].tag; /* only this thread writes it */
				if (s == st_empty) {
					if (slot == UINT32_MAX)
						slot = i;
					break;
				}
				if (s == st_free) {
					if (slot == UINT32_MAX)
						slot = i;
				} else if (s == tag && key_eq(b[i], kw)) {
					return EEXIST;
				}
			}
			if (live_ >= cap_)
				return ENOSPC;
			if (b[slot].tag == st_empty) {
				if (live_ + tombs_ + 1 > limit_) {
					int rc = rebuild();
					if (rc != 0)
						return rc;
					continue; /* probe the new table */
				}
			} else {
				tombs_--; /* a reusable tombstone becomes live */
			}
			/* Key and handle first (see store_word), then the tag with a
			 * release store that publishes them. */
			for (int w = 0; w < 4; w++)
				store_word(&b[slot].kw[w], kw[w]);
			store_word(&b[slot].hw, pack(h));
			__atomic_store_n(&b[slot].tag, tag, __ATOMIC_RELEASE);
			set_hop(b, mask, uint32_t(hv) & mask, slot, fp_of(hv));
			live_++;
			return 0;
		}
	}

	/* Removes key (NOT multi-writer safe: writer thread only): lookups
	 * miss from now on; its bucket is reused after a grace period.
	 * 0 or ENOENT. */
	int erase(const ah_key &key)
	{
		if (cap_ == 0)
			return ENOENT;
		const uint64_t hv = hash(key);
		const uint32_t tag = tag_of(hv);
		uint64_t kw[4];
		memcpy(kw, &key, sizeof(kw));
		table *t = tab_;
		bucket *b = buckets(t);
		const uint32_t mask = t->mask;
		for (uint32_t i = uint32_t(hv) & mask, n = 0; n <= mask; i = (i + 1) & mask, n++) {
			const uint32_t s = b[i].tag;
			if (s == st_empty)
				break;
			if (s != tag || !key_eq(b[i], kw))
				continue;
			live_--;
			tombs_++;
			clear_hop(b, mask, uint32_t(hv) & mask, i);
			if (qs_ == nullptr) {
				__atomic_store_n(&b[i].tag, st_free, __ATOMIC_RELEASE);
			} else {
				__atomic_store_n(&b[i].tag, st_wait, __ATOMIC_RELEASE);
				/* The token is taken after the tombstone store: a reader
				 * that reports it has seen the tombstone. */
				pending_.push_back(pending{i, rte_rcu_qsbr_start(qs_)});
			}
			reclaim_tombstones();
			return 0;
		}
		return ENOENT;
	}

	/* Reclaims (NOT multi-writer safe: writer thread only) tombstones and
	 * old tables whose grace period has ended: reusable/freed. Never
	 * blocks. insert and erase call it too; call it when the writer is
	 * otherwise idle, so old tables do not wait for the next rebuild. */
	void reclaim()
	{
		reclaim_tombstones();
		reclaim_tables();
	}

	/* Data path (any thread registered on qs, lock-free, wait-free but for
	 * probe length): the handle for key in *out, or ah_null and false. The
	 * handle may be stale by the time it is used; ah_table::lookup checks
	 * its generation. */
	bool lookup(const ah_key &key, ah_handle *out) const
	{
		return probe(__atomic_load_n(&tab_, __ATOMIC_ACQUIRE), key, out);
	}

	/* Data path: looks up n <= 64 keys (more are ignored). out[i] is the
	 * handle or ah_null; bit i of *hit_mask is set on a hit. Returns the
	 * number of hits. If probed is given, bit i of *probed is set if key i
	 * took the plain probe loop (diagnostics and tests).
	 *
	 * Pipelined: all hashes are computed and all home buckets prefetched
	 * before the first check, so the n cache misses overlap. Then each key
	 * checks its home bucket without a branch on the outcome (tag and key
	 * compared unconditionally). A key not at home reads, from the same
	 * line, its home's neighbourhood hints (hop, hfw: which of the next 15
	 * buckets hold keys homed here, and their 8-bit fingerprints) and
	 * prefetches the first neighbour with its fingerprint. At 1/2 load ~24%
	 * of keys are displaced, so a burst of 32 nearly always has some; they
	 * then cost one line each and one miss latency between them, instead
	 * of a linear probe of up to several rounds. A key that is not at home
	 * and not in the hinted neighbour (another key with the same
	 * fingerprint, 1/256 per displaced neighbour; a key homed here lies 16
	 * or more buckets away; or the bucket changed under the reader) takes
	 * the plain probe. A missing key costs its home line only, unless a
	 * neighbour shares its fingerprint. */
	unsigned lookup_bulk(const ah_key *keys, unsigned n, ah_handle *out, uint64_t *hit_mask,
			     uint64_t *probed = nullptr) const
	{
		if (unlikely(n > max_bulk))
			n = max_bulk;
		const table *t = __atomic_load_n(&tab_, __ATOMIC_ACQUIRE);
		const bucket *b = buckets(t);
		const uint32_t mask = t->mask;
		uint32_t pos[max_bulk], tag[max_bulk];
		uint8_t fp[max_bulk];
		for (unsigned i = 0; i < n; i++) {
			const uint64_t hv = hash(keys[i]);
			pos[i] = uint32_t(hv) & mask;
			tag[i] = tag_of(hv);
			fp[i] = fp_of(hv);
			rte_prefetch0(&b[pos[i]]);
		}
		/* One check of key i at bucket pos[i], without a branch on the
		 * outcome; true on a hit. */
		uint64_t hits = 0;
		auto check = [&](unsigned i) -> bool {
			const bucket &e = b[pos[i]];
			const uint32_t s = __atomic_load_n(&e.tag, __ATOMIC_ACQUIRE);
			uint64_t kw[4];
			memcpy(kw, &keys[i], sizeof(kw));
			bool hit;
			uint64_t hw;
			if constexpr (speculative_reads) {
				hw = load_word(&e.hw);
				hit = (s == tag[i]) & key_eq(e, kw);
			} else {
				hit = s == tag[i] && key_eq(e, kw);
				hw = hit ? load_word(&e.hw) : null_word;
			}
			const uint64_t sel = uint64_t(0) - uint64_t(hit); /* all ones on a hit */
			out[i] = unpack((hw & sel) | (null_word & ~sel));
			hits |= uint64_t(hit) << i;
			return hit;
		};
		/* Home buckets. A key not at home takes its neighbourhood hint
		 * from the same line: the first neighbour with its fingerprint,
		 * prefetched at once (one more line, not a probe). */
		uint64_t away = 0, slow = 0;
		for (unsigned i = 0; i < n; i++) {
			const bucket &e = b[pos[i]];
			const uint32_t miss = !check(i);
			const uint32_t m = hop_match(e, fp[i]);
			const uint32_t near = m & ~1u;
			away |= uint64_t(miss & (near != 0)) << i;
			slow |= uint64_t(miss & m) << i; /* bit 0: keys beyond */
			const uint32_t d = (uint32_t(__builtin_ctz(near | 1u << hop_span)) & (hop_span - 1)) & (0u - miss);
			pos[i] = (pos[i] + d) & mask;
			rte_prefetch0(&b[pos[i]]);
		}
		/* The displaced keys, one bucket each. A wrong guess (another key
		 * with the same fingerprint, or a bucket changing under us) and
		 * homes with keys beyond the neighbourhood take the plain probe. */
		for (uint64_t w = away; w != 0; w &= w - 1) {
			const unsigned i = unsigned(__builtin_ctzll(w));
			slow |= uint64_t(!check(i)) << i;
		}
		slow &= ~hits;
		for (uint64_t w = slow; w != 0; w &= w - 1) {
			const unsigned i = unsigned(__builtin_ctzll(w));
			hits |= uint64_t(probe(t, keys[i], &out[i])) << i;
		}
		if (probed != nullptr)
			*probed = slow;
		*hit_mask = hits;
		return unsigned(__builtin_popcountll(hits));
	}

	/* Writer-side figures. (Writer thread only.) */
	uint32_t capacity() const { return cap_; }
	uint32_t size() const { return live_; }
	uint32_t buckets() const { return cap_ == 0 ? 0 : tab_->mask + 1; }
	uint32_t tombstones() const { return tombs_; }       /* waiting + reusable */
	size_t waiting() const { return pending_.size(); }   /* tombstones in a grace period */
	size_t retired_tables() const { return retired_.size(); }
	uint64_t rebuilds() const { return rebuilds_; }

private:
	static constexpr uint32_t st_empty = 0, st_wait = 1, st_free = 2;
	static constexpr uint32_t hop_span = 16;   /* neighbourhood: home + 1..15 */

	/* The key as four words and the handle as one, so that readers load
	 * them a word at a time: see load_word. */
	struct alignas(64) bucket {
		uint64_t kw[4]; /* the ah_key */
		uint64_t hw;    /* the ah_handle (pack) */
		uint32_t tag;
		/* The neighbourhood of this bucket as a home (a hint, see
		 * set_hop): bit d (1..15) of hop is set while bucket i + d holds
		 * a live key whose home is i, and hfp[d] is that key's
		 * fingerprint; bit 0 is set (until a rebuild) once a key homed
		 * here was placed 16 or more buckets away. The fingerprints are
		 * kept in two words so that readers load them with relaxed atomic
		 * loads (plain moves) while the writer updates them. */
		uint16_t hop;
		uint16_t pad;
		uint64_t hfw[2]; /* hfp[d] is byte d (little-endian) of hfw[d / 8] */
	};
	static_assert(sizeof(ah_key) == 4 * sizeof(uint64_t));
	static_assert(sizeof(ah_handle) == sizeof(uint64_t));
	static_assert(sizeof(bucket) == 64);

	/* Header of one allocation; the buckets follow it. */
	struct alignas(64) table {
		uint32_t mask;
	};
	static_assert(sizeof(table) == 64);

	struct pending {
		uint32_t idx;
		uint64_t token;
	};
	struct retired {
		table *t;
		uint64_t token;
	};

	static inline uint32_t tag_of(uint64_t hv) { return uint32_t(hv >> 32) | 0x80000000u; }
	/* Bits 40..47 of the hash: above the index bits of any table (at most
	 * 2^31 buckets). They are also tag bits, which costs nothing: a
	 * fingerprint only picks the bucket whose tag and key are compared. */
	static inline uint8_t fp_of(uint64_t hv) { return uint8_t(hv >> 40); }

	/* The neighbourhood hint (writer): a key homed at home now lives at
	 * slot (set) or no longer does (clear). Relaxed stores: a reader
	 * takes the hint only as far as the bucket it points to confirms it
	 * (tag with an acquire load, then the key), and falls back to the
	 * plain probe when it does not. */
	static inline void set_hop(bucket *b, uint32_t mask, uint32_t home, uint32_t slot, uint8_t fp)
	{
		const uint32_t d = (slot - home) & mask;
		bucket &h = b[home];
		if (d == 0)
			return;
		if (d < hop_span) {
			const unsigned sh = 8 * (d % 8);
			const uint64_t w = (h.hfw[d / 8] & ~(uint64_t(0xff) << sh)) | uint64_t(fp) << sh;
			__atomic_store_n(&h.hfw[d / 8], w, __ATOMIC_RELAXED);
			__atomic_store_n(&h.hop, uint16_t(h.hop | 1u << d), __ATOMIC_RELEASE);
		} else {
			__atomic_store_n(&h.hop, uint16_t(h.hop | 1u), __ATOMIC_RELEASE);
		}
	}
	static inline void clear_hop(bucket *b, uint32_t mask, uint32_t home, uint32_t slot)
	{
		const uint32_t d = (slot - home) & mask;
		bucket &h = b[home];
		if (d != 0 && d < hop_span)
			__atomic_store_n(&h.hop, uint16_t(h.hop & ~(1u << d)), __ATOMIC_RELEASE);
	}
	/* Bit d (1..15) set if e's neighbour d holds a key homed at e with
	 * fingerprint fp; bit 0 if a key homed at e may lie beyond. */
	static inline uint32_t hop_match(const bucket &e, uint8_t fp)
	{
		const uint32_t hop = __atomic_load_n(&e.hop, __ATOMIC_ACQUIRE);
		const uint64_t w0 = __atomic_load_n(&e.hfw[0], __ATOMIC_RELAXED);
		const uint64_t w1 = __atomic_load_n(&e.hfw[1], __ATOMIC_RELAXED);
#if defined(__SSE2__)
		const __m128i v = _mm_set_epi64x(int64_t(w1), int64_t(w0));
		const uint32_t m = uint32_t(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(char(fp)))));
#else
		uint32_t m = 0;
		for (uint32_t d = 0; d < hop_span; d++)
			m |= uint32_t(uint8_t((d < 8 ? w0 : w1) >> (8 * (d % 8))) == fp) << d;
#endif
		return hop & (m | 1u);
	}
	/* The handle as one word, in its own memory layout. */
	static inline uint64_t pack(ah_handle h) { return std::bit_cast<uint64_t>(h); }
	static inline ah_handle unpack(uint64_t v) { return std::bit_cast<ah_handle>(v); }
	static constexpr uint64_t null_word = std::bit_cast<uint64_t>(ah_null);
	/* Key and handle words. The pipelined lookup_bulk reads a bucket's
	 * words before it knows whether the tag matched (and then ignores
	 * them), possibly while the writer fills that bucket: so they are
	 * written and read with relaxed atomic accesses (plain moves on x86).
	 * In a ThreadSanitizer build they are plain accesses instead, read only
	 * after a matching tag, so that TSan checks the grace-period protocol:
	 * a bucket rewritten while a reader may still read it is reported. */
#if defined(RDGRAM_TSAN_BUILD)
	static constexpr bool speculative_reads = false;
	static inline uint64_t load_word(const uint64_t *p) { return *p; }
	static inline void store_word(uint64_t *p, uint64_t v) { *p = v; }
#else
	static constexpr bool speculative_reads = true;
	static inline uint64_t load_word(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
	static inline void store_word(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
#endif
	/* Compares a bucket's key words with kw, without a branch. */
	static inline bool key_eq(const bucket &e, const uint64_t *kw)
	{
		return ((load_word(&e.kw[0]) ^ kw[0]) | (load_word(&e.kw[1]) ^ kw[1]) |
			(load_word(&e.kw[2]) ^ kw[2]) | (load_word(&e.kw[3]) ^ kw[3])) == 0;
	}
	static inline bucket *buckets(table *t) { return reinterpret_cast<bucket *>(t + 1); }
	static inline const bucket *buckets(const table *t) { return reinterpret_cast<const bucket *>(t + 1); }

	static inline bool probe(const table *t, const ah_key &key, ah_handle *out)
	{
		const bucket *b = buckets(t);
		const uint32_t mask = t->mask;
		const uint64_t hv = hash(key);
		const uint32_t tag = tag_of(hv);
		uint64_t kw[4];
		memcpy(kw, &key, sizeof(kw));
		/* A published table always has >= 1/4 of its buckets empty, and a
		 * bucket never becomes empty again, so the probe ends; the bound
		 * is only a guard. */
		for (uint32_t i = uint32_t(hv) & mask, n = 0; n <= mask; i = (i + 1) & mask, n++) {
			const uint32_t s = __atomic_load_n(&b[i].tag, __ATOMIC_ACQUIRE);
			if (s == tag) {
				if (likely(key_eq(b[i], kw))) {
					*out = unpack(load_word(&b[i].hw));
					return true;
				}
			} else if (s == st_empty) {
				break;
			}
		}
		*out = ah_null;
		return false;
	}

	static table *alloc_table(uint32_t nb, int socket)
	{
		void *p = rte_zmalloc_socket("rdgram_dest_cache", sizeof(table) + size_t(nb) * sizeof(bucket),
					     RTE_CACHE_LINE_SIZE, socket);
		if (p == nullptr)
			return nullptr;
		table *t = static_cast<table *>(p);
		t->mask = nb - 1;
		return t;
	}

	void reclaim_tombstones()
	{
		if (pending_.empty())
			return;
		bucket *b = buckets(tab_);
		while (!pending_.empty() && rte_rcu_qsbr_check(qs_, pending_.front().token, false) == 1) {
			__atomic_store_n(&b[pending_.front().idx].tag, st_free, __ATOMIC_RELEASE);
			pending_.pop_front();
		}
	}

	void reclaim_tables()
	{
		while (!retired_.empty() && rte_rcu_qsbr_check(qs_, retired_.front().token, false) == 1) {
			rte_free(retired_.front().t);
			retired_.pop_front();
		}
	}

	/* Copies the live entries into a fresh table of the same size and
	 * publishes it; the old one is freed after a grace period. */
	int rebuild()
	{
		reclaim_tables();
		if (retired_.size() >= 2) {
			/* Poll threads are slow to report: wait for the oldest table's
			 * grace period here (the writer may block, never a reader). The
			 * writer thread must not itself be online on qs. */
			rte_rcu_qsbr_check(qs_, retired_.front().token, true);
			reclaim_tables();
		}
		table *old = tab_;
		const uint32_t mask = old->mask;
		table *n = alloc_table(mask + 1, socket_);
		if (n == nullptr)
			return ENOMEM;
		const bucket *ob = buckets(old);
		bucket *nb = buckets(n);
		for (uint32_t i = 0; i <= mask; i++) {
			const uint32_t s = ob[i].tag;
			if (s <= st_free)
				continue;
			ah_key k;
			memcpy(&k, ob[i].kw, sizeof(k));
			const uint64_t hv = hash(k);
			uint32_t j = uint32_t(hv) & mask;
			while (nb[j].tag != st_empty)
				j = (j + 1) & mask;
			memcpy(nb[j].kw, ob[i].kw, sizeof(nb[j].kw));
			nb[j].hw = ob[i].hw;
			nb[j].tag = s;
			set_hop(nb, mask, uint32_t(hv) & mask, j, fp_of(hv));
		}
		__atomic_store_n(&tab_, n, __ATOMIC_RELEASE);
		pending_.clear(); /* the old table's tombstones go with it */
		tombs_ = 0;
		rebuilds_++;
		if (qs_ == nullptr)
			rte_free(old);
		else
			retired_.push_back(retired{old, rte_rcu_qsbr_start(qs_)});
		return 0;
	}

	/* What tab_ points to before init and after fini: one empty bucket, so
	 * a lookup simply misses. */
	struct empty_table {
		table hdr;
		bucket b[1];
	};
	static inline const empty_table empty_{{0}, {}};

	table *tab_ = const_cast<table *>(&empty_.hdr); /* readers: acquire load */
	uint32_t cap_ = 0;
	uint32_t live_ = 0;
	uint32_t tombs_ = 0;
	uint32_t limit_ = 0; /* live_ + tombs_ never exceeds it: >= 1/4 empty */
	int socket_ = SOCKET_ID_ANY;
	rte_rcu_qsbr *qs_ = nullptr;
	uint64_t rebuilds_ = 0;
	std::deque<pending> pending_;
	std::deque<retired> retired_;
};

} // namespace rdgram

#endif
