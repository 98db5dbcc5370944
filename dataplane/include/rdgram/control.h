/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The control thread: one thread, created with DPDK's control-thread API
 * (rte_ctrl_thread_create: off the poll cores), that owns every slow or
 * blocking operation (AH create/destroy, neighbour resolution, reclamation).
 * Other threads hand it work over an rte_ring, never by taking a lock with
 * it: application threads may wait for the answer (call), poll threads never
 * wait (post, then look at the request's done flag later).
 */
#ifndef RDGRAM_CONTROL_H
#define RDGRAM_CONTROL_H

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <pthread.h>

#include <rte_ring.h>

#include "rdgram/tsan.h"

namespace rdgram {

struct ctl_request {
	/* Runs on the control thread. */
	void (*fn)(ctl_request *) = nullptr;
	void *arg = nullptr;
	int result = 0;
	std::atomic<bool> done{false};
};

class control_thread {
public:
	control_thread() = default;
	control_thread(const control_thread &) = delete;
	control_thread &operator=(const control_thread &) = delete;
	~control_thread() { stop(); }

	/* Creates the ring and the thread. (Main thread.) 0 or an errno value. */
	int start(const char *name = "rdgram-ctl");
	/* Stops and joins the thread after it has run every queued request. */
	void stop();

	/* Queues r without waiting. (Multi-producer safe; poll-thread safe: no
	 * syscall, no lock.) Returns false when the ring is full. An idle
	 * control thread sees it when its nap ends (at most max_nap()). */
	bool post(ctl_request *r)
	{
		r->done.store(false, std::memory_order_relaxed);
		RDGRAM_TSAN_RELEASE(r);
		return rte_ring_mp_enqueue(ring_, r) == 0;
	}

	/* Runs f on the control thread and waits for it; wakes the thread
	 * from its nap. (Any thread but the control thread and the poll
	 * threads.) */
	void call(const std::function<void()> &f);

	/* Registers fn(arg) to run on the control thread at every loop
	 * iteration (device housekeeping, miss queues). fn returns true when it
	 * did work (the thread then does not nap). At most max_pollers. (Any
	 * thread; takes effect at the next iteration.) 0 or ENOSPC. */
	static constexpr unsigned max_pollers = 128;
	using poller_fn = bool (*)(void *arg, uint64_t now);
	int add_poller(poller_fn fn, void *arg);
	/* Removes a poller; when it returns the poller is not running and will
	 * not run again. (Not from the control thread itself.) */
	void remove_poller(poller_fn fn, void *arg);

	bool on_control_thread() const;

	/* The idle nap grows from min_nap_ns by half each idle iteration up to
	 * max_nap() (default_max_nap_ns); any work sets it back. call() and
	 * stop() end a nap at once; requests a poll thread posts (no syscall
	 * there) and pollers' timers wait for its end. The ceiling is what a spinning poll thread
	 * sharing the control thread's CPU pays: each wake-up preempts it.
	 * Measured on the 2-vCPU VM (docs/PERFORMANCE.md): with a 250 us
	 * ceiling, memif ping-pong p99 RTT/2 was 29 us instead of 1.5 us. */
	static constexpr long min_nap_ns = 20000, default_max_nap_ns = 2000000;
	/* Sets the nap's ceiling: less for a control thread with a core of its
	 * own (what poll threads post is seen sooner), more on a crowded one.
	 * min_nap_ns..1 s. (Any thread; taken at the next nap.) 0 or EINVAL. */
	int set_max_nap(long ns)
	{
		if (ns < min_nap_ns || ns > 1000000000L)
			return EINVAL;
		max_nap_.store(ns, std::memory_order_relaxed);
		return 0;
	}
	long max_nap() const { return max_nap_.load(std::memory_order_relaxed); }
	bool running() const { return running_.load(std::memory_order_acquire); }

private:
	static void *main(void *arg);
	bool run_pollers(uint64_t now);
	struct poller {
		poller_fn fn;
		void *arg;
	};
	poller pollers_[max_pollers]{}; /* control thread only (edited via call) */
	unsigned npollers_ = 0;
	rte_ring *ring_ = nullptr;
	pthread_t tid_{};
	std::atomic<bool> running_{false};
	std::atomic<bool> stop_{false};
	/* Ends the nap early (wake()); never touched by poll threads. */
	void wake();
	std::mutex nap_mu_;
	std::condition_variable nap_cv_;
	bool woken_ = false; /* guarded by nap_mu_ */
	std::atomic<long> max_nap_{default_max_nap_ns};
};

} // namespace rdgram

#endif
