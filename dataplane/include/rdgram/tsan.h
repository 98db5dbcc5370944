/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * ThreadSanitizer annotations for hand-offs it cannot see. DPDK's rings
 * (and so net_ring and the control ring) live in uninstrumented libraries:
 * the release/acquire inside rte_ring enqueue/dequeue is invisible to TSan,
 * so the object handed over looks raced. rdgram states the hand-off itself,
 * on the object's address, at the points where it passes an object to such
 * a ring and takes one from it. Compiled out unless built with TSan.
 */
#ifndef RDGRAM_TSAN_H
#define RDGRAM_TSAN_H

/* GCC says -fsanitize=thread with __SANITIZE_THREAD__, clang only through
 * __has_feature (without this, a clang TSan build ran with every
 * annotation off and reported each ring hand-off as a race). */
#if defined(__SANITIZE_THREAD__)
#define RDGRAM_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RDGRAM_TSAN_BUILD 1
#endif
#endif

#if defined(RDGRAM_TSAN_BUILD)
extern "C" void __tsan_acquire(void *addr);
extern "C" void __tsan_release(void *addr);
#define RDGRAM_TSAN_RELEASE(p) __tsan_release((void *)(p))
#define RDGRAM_TSAN_ACQUIRE(p) __tsan_acquire((void *)(p))
#define RDGRAM_TSAN 1
/* Mempool ops name for pools rdgram creates (src/tsan_mempool.cc). */
#define RDGRAM_MEMPOOL_OPS "rdgram_tsan"
#else
#define RDGRAM_MEMPOOL_OPS nullptr /* the platform default */
#define RDGRAM_TSAN_RELEASE(p) ((void)0)
#define RDGRAM_TSAN_ACQUIRE(p) ((void)0)
#define RDGRAM_TSAN 0
#endif

#endif
