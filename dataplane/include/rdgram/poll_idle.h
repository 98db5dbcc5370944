/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * What a poll loop does when an iteration found nothing to do.
 *
 * A poll thread spins by default (DPDK's model: lowest latency, one core
 * burnt per thread). When more poll threads than cores share a machine (an
 * HPC test job of 32 ranks on a 2-core CI node, a laptop), spinning
 * threads preempt each other and the one with work waits for a time slice.
 * poll_idle lets such a loop give the core away once it has been idle for
 * a while:
 *
 *   busy   never leave the core (rte_pause per empty iteration).
 *   yield  after `spins` consecutive empty iterations, sched_yield(2) on
 *          each further empty one: another runnable thread gets the core,
 *          this one stays runnable (no wake-up latency when alone).
 *   sleep  after `spins` consecutive empty iterations, nanosleep(2) for
 *          1 us, doubling per further empty iteration up to sleep_us: the
 *          core is free until the nap ends. The thread's timer slack is
 *          set to 1 us at the first nap (prctl PR_SET_TIMERSLACK; Linux's
 *          default of 50 us would round every short nap up to ~50 us), so
 *          a nap overshoots its length by the scheduler's wake-up latency
 *          only. The worst added latency of a message that arrives while
 *          the thread sleeps is one nap (<= sleep_us plus that latency).
 *
 * The loop calls work() after an iteration that did something (received,
 * sent, advanced a timer) and idle() after one that did not. work() is a
 * store; idle() makes no syscall before `spins` empty iterations in a row,
 * so a loaded loop never enters the kernel here.
 *
 * A sleeping poll thread is still online for QSBR (rte_rcu_qsbr): it
 * reports its quiescent state once per iteration as before, so a grace
 * period waits at most one nap longer. The control thread never waits for
 * a poll thread synchronously, so nothing else is delayed.
 *
 * Threads: one poll_idle per poll loop, used only by the thread running
 * that loop (NOT thread safe); stats() may be read once the loop stopped.
 */
#ifndef RDGRAM_POLL_IDLE_H
#define RDGRAM_POLL_IDLE_H

#include <cstdint>
#include <cstring>
#include <ctime>
#include <initializer_list>

#include <sched.h>
#include <sys/prctl.h>

#include <rte_common.h>
#include <rte_pause.h>

namespace rdgram {

enum class idle_mode : uint8_t { busy, yield, sleep };

inline const char *idle_mode_name(idle_mode m)
{
	return m == idle_mode::busy ? "busy" : m == idle_mode::yield ? "yield" : "sleep";
}
/* "busy" / "yield" / "sleep" -> mode; false for anything else. */
inline bool parse_idle_mode(const char *s, idle_mode *out)
{
	for (idle_mode m : {idle_mode::busy, idle_mode::yield, idle_mode::sleep})
		if (strcmp(s, idle_mode_name(m)) == 0) {
			*out = m;
			return true;
		}
	return false;
}

struct poll_idle_config {
	idle_mode mode = idle_mode::busy;
	uint32_t spins = 64;     /* empty iterations in a row before yielding or sleeping */
	uint32_t sleep_us = 100; /* sleep: the longest nap (1..1000000) */
};

struct poll_idle_stats {
	uint64_t empty;    /* empty iterations */
	uint64_t yields;   /* sched_yield calls */
	uint64_t sleeps;   /* nanosleep calls */
	uint64_t slept_ns; /* nap lengths asked for, summed */
};

class poll_idle {
public:
	explicit poll_idle(const poll_idle_config &c = {}) : c_(c)
	{
		if (c_.sleep_us == 0)
			c_.sleep_us = 1;
		if (c_.sleep_us > 1000000)
			c_.sleep_us = 1000000;
	}

	/* The iteration did something. (Owning thread; no syscall.) */
	void work() { run_ = 0; }

	/* The iteration found nothing. (Owning thread; a syscall only after
	 * `spins` empty iterations in a row, in yield and sleep modes.) */
	void idle()
	{
		st_.empty++;
		if (c_.mode == idle_mode::busy || run_ < c_.spins) {
			run_++;
			rte_pause();
			return;
		}
		if (run_ != UINT32_MAX)
			run_++;
		give_up_core();
	}

	const poll_idle_config &config() const { return c_; }
	const poll_idle_stats &stats() const { return st_; }

private:
	__rte_noinline void give_up_core()
	{
		if (c_.mode == idle_mode::yield) {
			st_.yields++;
			sched_yield();
			return;
		}
		if (!slack_set_) {
			/* Linux rounds a nap up by the thread's timer slack
			 * (50 us by default): 1 us keeps short naps short. */
			prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
			slack_set_ = true;
		}
		/* Nap n after the spins: 2^(n-1) us, capped at sleep_us. */
		const uint32_t n = run_ - c_.spins;
		const uint64_t us = n >= 21 ? c_.sleep_us : RTE_MIN(uint64_t(1) << (n - 1), uint64_t(c_.sleep_us));
		timespec ts{time_t(us / 1000000), long(us % 1000000) * 1000};
		st_.sleeps++;
		st_.slept_ns += us * 1000;
		nanosleep(&ts, nullptr);
	}

	poll_idle_config c_;
	uint32_t run_ = 0; /* empty iterations in a row */
	bool slack_set_ = false;
	poll_idle_stats st_{};
};

} // namespace rdgram

#endif
