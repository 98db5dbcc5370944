/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd's run (main thread): the poll lcore runs the loop
 * (fwd_loop.h); the main thread watches signals and the clock, and prints
 * counters from snapshots the poll thread takes when asked.
 */
#include "fwd_run.h"

#include <csignal>
#include <cstdio>
#include <ctime>

#include <rte_cycles.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "fwd_report.h"

namespace rdgram::fwd {

namespace {

/* Set by signal handlers, read by the main thread: nothing is printed or
 * allocated in a handler. */
volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_dump = 0;

void on_stop(int) { g_stop = 1; }
void on_dump(int) { g_dump = 1; }

struct poll_arg {
	runtime *rt;
	loop_ctx *ctx;
	unsigned cpu;
};

int poll_main(void *a)
{
	auto *x = static_cast<poll_arg *>(a);
	x->rt->bind_this_thread(x->cpu);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(x->rt->qsbr(), tid);
	x->ctx->run(tid);
	poll_thread_offline(x->rt->qsbr(), tid);
	return 0;
}

void sleep_ms(long ms)
{
	timespec ts{ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, nullptr);
}

} // namespace

bool stopped_by_signal()
{
	return g_stop != 0;
}

bool run(runtime &rt, const fwd_config &c, fwd_app &a, int *status)
{
	loop_ctx *ctx = a.ctx.get();
	const double hz = double(rte_get_tsc_hz());
	std::signal(SIGINT, on_stop);
	std::signal(SIGTERM, on_stop);
	std::signal(SIGUSR1, on_dump);

	printf(" rdgram-fwd: %s mode, %zu port(s), poll lcore %u (cpu %u)", c.mode.c_str(), a.ports.size(),
	       a.worker.lcore, a.worker.cpu);
	for (size_t p = 0; p < a.ports.size(); p++)
		printf("%s %s=%s", p ? "," : ":", c.ports[p].name.c_str(), c.ports[p].device.c_str());
	printf("\n");
	fflush(stdout);

	poll_arg pa{&rt, ctx, a.worker.cpu};
	if (launch_on_lcore(poll_main, &pa, a.worker.lcore) != 0) {
		fprintf(stderr, "rdgram-fwd: cannot launch the poll lcore\n");
		return false;
	}
	const uint64_t interval_cyc = uint64_t(c.stats_interval_s * hz);
	uint64_t next_print = interval_cyc != 0 ? rte_get_tsc_cycles() + interval_cyc : UINT64_MAX;
	while (!ctx->done.load(std::memory_order_acquire)) {
		sleep_ms(10);
		if (g_stop)
			ctx->stop.store(true, std::memory_order_relaxed);
		const bool timed = rte_get_tsc_cycles() >= next_print;
		if (g_dump || timed) {
			g_dump = 0;
			if (timed)
				next_print += interval_cyc;
			/* Ask the poll thread for a copy; it answers within one loop. */
			const uint32_t req = ctx->snap_req.load(std::memory_order_relaxed) + 1;
			ctx->snap_req.store(req, std::memory_order_release);
			while (ctx->snap_ack.load(std::memory_order_acquire) != req &&
			       !ctx->done.load(std::memory_order_acquire))
				sleep_ms(1);
			if (ctx->snap_ack.load(std::memory_order_acquire) == req)
				*status |= report(c, ctx->snap, port_reports(rt, c, a.ports), "running");
		}
	}
	wait_on_lcore(a.worker.lcore);
	return true;
}

} // namespace rdgram::fwd
