/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * How much of a test's wall time each poll thread spent on its CPU: the
 * threads' CPU clocks (clock_gettime on CLOCK_THREAD_CPUTIME_ID, or on
 * another thread's clock from pthread_getcpuclockid) read before and after
 * the test. Each read is a syscall: control path only, around a test,
 * never inside a loop.
 *
 * Why: on a shared or small machine a poll thread is preempted by other
 * processes (or by its own process's control thread on the same CPU), and
 * a loopback bandwidth figure is then the share of CPU the slower side got,
 * not the data path's rate. The report says so instead of printing a
 * number that moves fourfold between runs.
 */
#ifndef RDGRAM_PERF_CPU_H
#define RDGRAM_PERF_CPU_H

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <pthread.h>

#include <rte_cycles.h>

namespace rdgram::perf {

/* One thread's CPU clock. (Any thread; a syscall per read.) */
struct thread_clock {
	clockid_t id = CLOCK_THREAD_CPUTIME_ID;
	bool ok = false;

	/* The calling thread's clock. */
	static thread_clock self()
	{
		thread_clock c;
		c.ok = pthread_getcpuclockid(pthread_self(), &c.id) == 0;
		return c;
	}
	/* Seconds of CPU time so far, or -1. */
	double seconds() const
	{
		timespec ts;
		if (!ok || clock_gettime(id, &ts) != 0)
			return -1;
		return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
	}
};

inline double wall_seconds()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

/* CPU shares of up to two threads over one interval. (The thread that
 * calls start and stop; the clocks may be other threads'.) */
struct cpu_meter {
	thread_clock a, b;
	double wall0 = 0, a0 = -1, b0 = -1;
	double wall = 0, share_a = -1, share_b = -1; /* results; -1: unknown */

	void start()
	{
		wall0 = wall_seconds();
		a0 = a.seconds();
		b0 = b.seconds();
	}
	void stop()
	{
		const double a1 = a.seconds(), b1 = b.seconds();
		wall = wall_seconds() - wall0;
		share_a = wall > 0 && a0 >= 0 && a1 >= 0 ? (a1 - a0) / wall : -1;
		share_b = wall > 0 && b0 >= 0 && b1 >= 0 ? (b1 - b0) / wall : -1;
	}
};

/* A cache line's round trip between two poll lcores: the one thing every
 * loopback message pays for, since its mbuf and frame are written on one
 * CPU and read on the other. On a VM it depends on where the host runs
 * the two vCPUs (sharing a last-level cache or not) and can change from
 * one second to the next. run() on one lcore, echo() on the other at the
 * same time; blocks of round trips, the median block's time per round
 * trip. Both give up at the deadline (TSC). Spins without rte_pause: a
 * pause would be part of what it measures. */
struct line_probe {
	static constexpr unsigned blocks = 21, per_block = 500;
	alignas(64) std::atomic<uint64_t> v{0};
	uint64_t deadline = 0;

	static int echo(void *arg)
	{
		auto *p = static_cast<line_probe *>(arg);
		for (uint64_t i = 1; i < 2ull * blocks * per_block; i += 2) {
			while (p->v.load(std::memory_order_acquire) != i)
				if (rte_rdtsc() > p->deadline)
					return 0;
			p->v.store(i + 1, std::memory_order_release);
		}
		return 0;
	}
	/* ns per round trip (median block), or -1 at the deadline. */
	double run()
	{
		double t[blocks];
		uint64_t x = 0;
		for (unsigned b = 0; b < blocks; b++) {
			const uint64_t t0 = rte_rdtsc();
			for (unsigned k = 0; k < per_block; k++, x += 2) {
				v.store(x + 1, std::memory_order_release);
				while (v.load(std::memory_order_acquire) != x + 2)
					if (rte_rdtsc() > deadline)
						return -1;
			}
			t[b] = double(rte_rdtsc() - t0) * 1e9 / double(rte_get_tsc_hz()) / per_block;
		}
		std::sort(t, t + blocks);
		return t[blocks / 2];
	}
};

/* Below this share of the test on its CPU a poll thread's figure says more
 * about the machine than about the data path. */
inline constexpr double busy_share = 0.9;

/* What bounded a loopback bandwidth figure, for the reader of the table:
 * who ran how much of the test, whether the sender found the receiver's
 * ring full (then the rate is the receiver's), and whether the machine
 * was too busy for the figure to mean anything. */
inline void print_bw_limits(FILE *f, const cpu_meter &m, unsigned client_cpu, unsigned server_cpu,
			    unsigned long port_full, double line_ns_before, double line_ns_after)
{
	auto pct = [](double s) { return s < 0 ? -1 : int(s * 100 + 0.5); };
	const int pc = pct(m.share_a), ps = pct(m.share_b);
	fprintf(f, " bandwidth test: %.3f s; on its CPU the client (cpu %u) ran %d%% of it, the server (cpu %u) %d%%.\n",
		m.wall, client_cpu, pc, server_cpu, ps);
	if (port_full != 0)
		fprintf(f,
			" The client found the ring to the server full %lu times and retried (tx_port_full: backpressure,\n"
			" not loss): the server receives slower than the client sends, so MsgRate is the server's rate.\n",
			port_full);
	else
		fprintf(f, " The ring to the server never filled: MsgRate is the client's sending rate.\n");
	if (line_ns_before > 0 && line_ns_after > 0)
		fprintf(f,
			" A cache line's round trip between cpu %u and cpu %u took %.0f ns before the tests, %.0f ns after.\n"
			" Every message's buffer makes that trip, so MsgRate and the latency follow it; on a VM it depends\n"
			" on where the host runs the two vCPUs, which can change from one run to the next.\n",
			client_cpu, server_cpu, line_ns_before, line_ns_after);
	else
		fprintf(f,
			" A cache line's round trip between cpu %u and cpu %u could not be measured within 1 s (a thread\n"
			" was off its CPU): how fast the two CPUs exchange data, which MsgRate follows, is unknown.\n",
			client_cpu, server_cpu);
	const double worst = m.share_a < 0 ? m.share_b : m.share_b < 0 ? m.share_a
						: (m.share_a < m.share_b ? m.share_a : m.share_b);
	if (worst >= 0 && worst < busy_share) {
		double load[1] = {-1};
		if (getloadavg(load, 1) != 1)
			load[0] = -1;
		fprintf(f,
			" A poll thread was off its CPU for %d%% of the test (load average %.1f): other work had the CPU,\n"
			" and MsgRate is that thread's share of it, not the data path's rate. Run it on an idle machine.\n",
			100 - pct(worst), load[0]);
	}
}

} // namespace rdgram::perf

#endif
