/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd's run: the workers (apps/common/workers.h: one poll lcore
 * each, the main lcore possibly among them) and the watch over them, which
 * handles signals, the clock and the reports from snapshots each worker's
 * poll thread takes when asked (fwd_loop.h).
 */
#ifndef RDGRAM_FWD_RUN_H
#define RDGRAM_FWD_RUN_H

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include "fwd_config.h"
#include "fwd_report.h"
#include "fwd_setup.h"
#include "rdgram/runtime.h"
#include "workers.h"

namespace rdgram::fwd {

/* Installs the signal handlers: SIGINT/SIGTERM stop, SIGUSR1 prints the
 * counters. (Main thread.) */
void install_signals();
/* Whether SIGINT or SIGTERM ended the run. */
bool stopped_by_signal();
/* Whether SIGUSR1 came since the last call (clears it). */
bool take_dump_request();
void sleep_ms(long ms);

/* Port-level counters, read on a control-path thread: ethdev statistics
 * (soft), and the AH service's and the neighbour table's, which live on
 * the control thread and are copied there. */
template <class Dev>
std::vector<port_report> port_reports(runtime &rt, const fwd_config &c, const fwd_app<Dev> &a)
{
	std::vector<port_report> out;
	for (size_t p = 0; p < a.ports.size(); p++) {
		port_rt<Dev> &pr = *a.ports[p];
		port_report r{&c.ports[p], pr.port_id(), c.ports[p].devargs, false, {}, {}, false, {}};
		if constexpr (apps::is_soft<Dev>) {
			r.have_eth = soft::port_stats(pr.port_id(), &r.eth) == 0;
			r.have_neigh = true;
			rt.ctl().call([&] { r.neigh = pr.dev().neigh_stats(); });
		} else {
			r.device = std::string(pr.dev().driver_name()) + " " +
				   (c.rdma.device.empty() ? std::string("(first usable)") : c.rdma.device) + " port " +
				   std::to_string(c.rdma.port);
		}
		if (pr.svc_up)
			r.ahs = pr.svc.stats();
		out.push_back(r);
	}
	return out;
}

template <class Dev> std::vector<worker_view> worker_views(const fwd_app<Dev> &a)
{
	std::vector<worker_view> v;
	for (size_t w = 0; w < a.ctx.size(); w++)
		v.push_back({a.workers[w].lcore, a.workers[w].cpu, a.ctx[w]->why, &a.ctx[w]->snap});
	return v;
}

namespace detail {

template <class Q> struct poll_arg {
	runtime *rt;
	loop_ctx<Q> *ctx;
	unsigned cpu;
};

template <class Q> int poll_main(void *p)
{
	auto *x = static_cast<poll_arg<Q> *>(p);
	x->rt->bind_this_thread(x->cpu);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(x->rt->qsbr(), tid);
	x->ctx->run(tid);
	poll_thread_offline(x->rt->qsbr(), tid);
	return 0;
}

} // namespace detail

/* Prints the start-up lines, runs every worker and watches them until all
 * are done: reports on SIGUSR1 and every c.stats_interval_s. A worker that
 * stops (idle, its share of the budget, an error) leaves the others
 * running. false when a worker could not be launched (printed; the others
 * were stopped). *status |= 1 when a report could not be written. */
template <class Dev> bool run(runtime &rt, const fwd_config &c, fwd_app<Dev> &a, int *status)
{
	using Q = typename Dev::queue_type;
	const double hz = double(rte_get_tsc_hz());
	install_signals();

	printf(" rdgram-fwd: %s mode, driver %s, %zu worker(s) on poll lcore", c.mode.c_str(), c.driver.c_str(),
	       a.workers.size());
	for (size_t w = 0; w < a.workers.size(); w++)
		printf("%s %u (cpu %u)", w ? "," : "", a.workers[w].lcore, a.workers[w].cpu);
	printf(", %zu port(s)", a.ports.size());
	for (size_t p = 0; p < a.ports.size(); p++)
		printf("%s %s=%s", p ? "," : ":", c.ports[p].name.c_str(), c.ports[p].devargs.c_str());
	printf("\n");
	/* Who serves what: the QPs a peer sends to, by worker. */
	for (size_t p = 0; p < a.ports.size(); p++) {
		const port_rt<Dev> &pr = *a.ports[p];
		for (size_t w = 0; w < pr.st.size(); w++) {
			printf(" rdgram-fwd: port %s queue %zu (worker %zu):", c.ports[p].name.c_str(), w, w);
			for (unsigned i = 0; i < pr.st[w]->nqp; i++)
				printf(" qpn 0x%06x qkey 0x%08x", pr.st[w]->qpn[i], pr.st[w]->qkey[i]);
			printf("\n");
		}
	}
	fflush(stdout);

	std::vector<detail::poll_arg<Q>> args(a.ctx.size());
	std::vector<void *> argp;
	for (size_t w = 0; w < a.ctx.size(); w++) {
		args[w] = {&rt, a.ctx[w].get(), a.workers[w].cpu};
		argp.push_back(&args[w]);
	}
	auto stop_all = [&] {
		for (auto &x : a.ctx)
			x->stop.store(true, std::memory_order_relaxed);
	};
	auto watch = [&](const std::atomic<unsigned> &running) {
		const uint64_t interval_cyc = uint64_t(c.stats_interval_s * hz);
		uint64_t next_print = interval_cyc != 0 ? rte_get_tsc_cycles() + interval_cyc : UINT64_MAX;
		while (running.load(std::memory_order_acquire) != 0) {
			sleep_ms(10);
			if (stopped_by_signal())
				stop_all();
			const bool timed = rte_get_tsc_cycles() >= next_print;
			const bool dump = take_dump_request();
			if (!dump && !timed)
				continue;
			if (timed)
				next_print += interval_cyc;
			/* Ask every worker for a copy; each answers within one
			 * loop, and one that has stopped left its last. */
			std::vector<uint32_t> req(a.ctx.size());
			for (size_t w = 0; w < a.ctx.size(); w++) {
				req[w] = a.ctx[w]->snap_req.load(std::memory_order_relaxed) + 1;
				a.ctx[w]->snap_req.store(req[w], std::memory_order_release);
			}
			bool all = true;
			for (size_t w = 0; w < a.ctx.size(); w++) {
				auto &x = *a.ctx[w];
				while (x.snap_ack.load(std::memory_order_acquire) != req[w] &&
				       !x.done.load(std::memory_order_acquire))
					sleep_ms(1);
				all &= x.snap_ack.load(std::memory_order_acquire) == req[w] ||
				       x.done.load(std::memory_order_acquire);
			}
			if (all)
				*status |= report(c, worker_views(a), port_reports(rt, c, a), "running");
		}
	};
	const int rc = apps::run_workers(a.workers, detail::poll_main<Q>, argp, watch);
	if (rc < 0) {
		fprintf(stderr, "rdgram-fwd: cannot launch a worker: %s\n", strerror(-rc));
		return false;
	}
	return true;
}

} // namespace rdgram::fwd

#endif
