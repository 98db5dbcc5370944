/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-mcast: market-data style UD multicast over the soft RoCEv2 driver
 * or, with --driver verbs, an RDMA device. A publisher sends
 * sequence-numbered, TSC-stamped messages to multicast groups at a paced
 * rate; subscribers join the groups (IGMPv2/MLDv2 report from the driver,
 * QP attached to the group), check sequence numbers for gaps, duplicates
 * and reordering, and keep a one-way latency histogram.
 *
 * --mode both runs one publisher and N subscribers in one process, each on
 * its own soft device and net_ring port, with the process as the L2 switch
 * between them (mcast_switch.h). --mode pub / sub run one role on an
 * ethdev given with --port (e.g. net_af_packet on a veth), one process
 * each.
 *
 * --workers N runs N poll threads (apps/common/workers.h: the main lcore
 * may be one), each with its own queue of every port and its own QPs,
 * running its share in turn: the publisher's groups g % N == w, each
 * subscriber's groups (the same split, or all of them with --worker-groups
 * all), and on worker 0 the switch. With one worker the run is
 * deterministic on a shared 2-core machine.
 *
 * main() parses (mcast_cli.cc), names the driver once (apps/common/
 * driver.h), sets up on it (mcast_soft.cc, mcast_verbs.cc), runs the
 * workers' poll loops (mcast_engine.h, templated on that driver's queue)
 * and reports per worker and summed (mcast_report.cc).
 */
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include "app_start.h"
#include "driver.h"
#include "mcast.h"
#include "mcast_engine.h"
#include "mcast_report.h"
#include "mcast_soft.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "rdgram/telemetry.h"
#include "workers.h"
#ifdef RDGRAM_MCAST_VERBS
#include "mcast_verbs.h"
#endif

using namespace rdgram;
using namespace rdgram::mcast;

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

/* The workers' state: worker w's queues, its publisher's groups and
 * pacing, its subscribers' trackers; worker 0 runs the switch. */
template <class Fabric>
std::vector<std::unique_ptr<worker<typename Fabric::queue_type>>> prepare(run_shared &r, const Fabric &f,
									 const std::vector<lcore_cpu> &lcores)
{
	using Q = typename Fabric::queue_type;
	const mcast_config &c = *r.c;
	const uint32_t nw = uint32_t(lcores.size()), ng = uint32_t(c.groups.size());
	const bool all = c.worker_groups == "all";
	r.hz = rte_get_tsc_hz();
	r.start = rte_rdtsc();
	r.end_tsc = c.duration > 0 ? r.start + uint64_t(c.duration * double(r.hz)) : 0;
	r.idle_ticks = uint64_t(c.idle_timeout * double(r.hz));
	std::vector<std::unique_ptr<worker<Q>>> ws;
	for (uint32_t w = 0; w < nw; w++) {
		auto x = std::make_unique<worker<Q>>();
		x->r = &r;
		x->index = w;
		x->lcore = lcores[w].lcore;
		x->in_both = c.mode == "both";
		if ((x->pub_q = f.pub_queue(w)) != nullptr) {
			x->pub = std::make_unique<pub_state>();
			for (uint32_t g = 0; g < ng; g++)
				if (worker_takes(g, w, nw, false))
					x->pub->groups.push_back(g);
			x->pub->ahs = f.group_ahs(w);
			x->pub->qkeys = f.group_qkeys(w);
			x->pub->accepted = std::make_unique<uint64_t[]>(ng); /* zeroed */
			x->pub->bufs = std::make_unique<uint8_t[]>(size_t(burst) * c.size); /* zeroed */
			x->pub->pace.init(c.rate, r.hz, r.start);
			r.pub_workers++;
		}
		for (size_t k = 0; k < f.subscribers(); k++) {
			x->sub_q.push_back(f.sub_queue(k, w));
			x->subs.push_back(std::make_unique<sub_state>());
			x->subs.back()->trk = std::make_unique<seq_tracker[]>(ng);
		}
		for (uint32_t g = 0; g < ng && f.subscribers() != 0; g++)
			if (worker_takes(g, w, nw, all))
				x->sub_groups.push_back(g);
		x->sw = w == 0 ? f.switch_ports() : nullptr;
		ws.push_back(std::move(x));
	}
	return ws;
}

/* Runs every worker's poll loop on its lcore while the watch prints the
 * status line every --status-interval and passes a signal on. Returns
 * run_workers' status. */
template <class Q>
int run(run_shared &r, std::vector<std::unique_ptr<worker<Q>>> &ws, const std::vector<lcore_cpu> &lcores)
{
	std::vector<void *> args;
	for (auto &w : ws)
		args.push_back(w.get());
	std::vector<const pub_state *> pubs;
	std::vector<std::vector<const sub_state *>> subs(ws.empty() ? 0 : ws[0]->subs.size());
	for (auto &w : ws) {
		if (w->pub != nullptr)
			pubs.push_back(w->pub.get());
		for (size_t k = 0; k < w->subs.size(); k++)
			subs[k].push_back(w->subs[k].get());
	}
	auto watch = [&](const std::atomic<unsigned> &running) {
		std::vector<uint64_t> last(subs.size() * ws.size(), 0);
		uint64_t last_tsc = r.start;
		const uint64_t every = uint64_t(r.c->status_interval * double(r.hz));
		uint64_t next = r.start + every;
		while (running.load(std::memory_order_acquire) != 0) {
			rte_delay_us_sleep(10000);
			const uint64_t now = rte_rdtsc();
			if (every != 0 && now >= next) {
				print_status(*r.c, pubs, subs, r.hz, r.start, now, last, last_tsc);
				next += every;
			}
			if (g_stop)
				r.stop.store(true, std::memory_order_relaxed);
		}
	};
	const int rc = apps::run_workers(lcores, poll_loop<Q>, args, watch);
	if (rc != 0)
		fprintf(stderr, "rdgram-mcast: a worker could not run: %s\n", strerror(rc < 0 ? -rc : rc));
	return rc;
}

/* Set up on Fabric's driver, run the workers, leave the groups, report.
 * Returns the exit status. */
template <class Fabric> int run_on(const mcast_config &c, runtime &rt, const std::vector<lcore_cpu> &lcores)
{
	std::vector<int> sockets;
	for (const lcore_cpu &l : lcores)
		sockets.push_back(int(rte_lcore_to_socket_id(l.lcore)));
	Fabric f;
	if (f.open(c, rt, sockets) != 0)
		return 1;
	run_shared r;
	r.c = &c;
	r.rt = &rt;
	r.signalled = &g_stop;
	auto ws = prepare(r, f, lcores);
	printf("rdgram-mcast: mode %s, driver %s, %zu group(s):", c.mode.c_str(), c.driver.c_str(), c.groups.size());
	for (const auto &g : c.groups)
		printf(" %s", format_gid(g).c_str());
	printf(", %zu subscriber(s), rate %.0f msg/s/group, size %u", f.subscribers(), c.rate, c.size);
	if (lcores.size() > 1) {
		printf(", %zu workers on lcores", lcores.size());
		for (size_t w = 0; w < lcores.size(); w++)
			printf("%s%u", w == 0 ? " " : ",", lcores[w].lcore);
		printf(" (subscriber groups: %s)", c.worker_groups.c_str());
	}
	printf("\n");
	fflush(stdout);

	const int run_rc = run(r, ws, lcores);

	f.leave();
	drain(ws, r.hz / 20); /* 50 ms: the leave frames go out */
	std::vector<pub_report> pubs;
	std::vector<sub_report> subs(f.subscribers());
	for (auto &w : ws) {
		if (w->pub != nullptr)
			pubs.push_back({w->pub.get(), totals_of(*w->pub_q), w->lcore});
		for (size_t k = 0; k < w->subs.size(); k++) {
			sub_worker_report x{w->subs[k].get(), totals_of(*w->sub_q[k]), w->lcore, w->sub_groups};
			if (c.mode == "both") {
				/* What the publisher's queues took for this worker's
				 * groups: group g is published by worker g % N. */
				x.published = 0;
				for (uint32_t g : w->sub_groups)
					x.published += ws[g % ws.size()]->pub->accepted[g];
			}
			subs[k].w.push_back(std::move(x));
		}
	}
	for (size_t k = 0; k < subs.size(); k++) {
		if (const auto *mc = f.membership_sent(k); mc != nullptr) {
			subs[k].has_sent = true;
			subs[k].sent = *mc;
		}
		subs[k].seen = f.switch_ports() != nullptr ? &f.switch_ports()->seen(k) : nullptr;
	}
	f.close(); /* the queues' frames back; the frames handed and never taken counted */
	for (size_t k = 0; k < subs.size(); k++)
		subs[k].handoff_freed = f.handoff_freed(k);
	const int st = report(c, pubs, subs, f.switch_ports() != nullptr ? f.switch_ports()->copy_failures() : 0);
	return run_rc != 0 ? 1 : st;
}

/* Why driver Dev cannot serve rdgram-mcast (one line), or nullptr. */
template <class Dev> const char *cannot_serve()
{
#if RDGRAM_HAVE_DRIVER_MLX5
	if constexpr (std::is_same_v<Dev, mlx5::mlx5_device>)
		return "driver mlx5 cannot serve rdgram-mcast: drivers/mlx5 has no multicast attach or join "
		       "(ibv_attach_mcast, rdma_cm); on a ConnectX use --driver verbs";
#endif
#if RDGRAM_HAVE_DRIVER_EFA
	if constexpr (std::is_same_v<Dev, efa::efa_device>)
		return "driver efa cannot serve rdgram-mcast: EFA carries no multicast (an AH to a multicast GID is "
		       "refused, as on the device)";
#endif
#if RDGRAM_HAVE_DRIVER_VERBS && !defined(RDGRAM_MCAST_VERBS)
	if constexpr (std::is_same_v<Dev, verbs::verbs_device>)
		return "this rdgram-mcast was built without the verbs driver's multicast (librdmacm-dev: "
		       "rdma/rdma_cma.h)";
#endif
	return nullptr;
}

} // namespace

int main(int argc, char **argv)
{
	const split_args sa = split_command_line(argc, argv);
	mcast_config c;
	if (int rc = parse_command_line(sa, c); rc >= 0)
		return rc;
	/* The driver, named once (parse_command_line checked the name). */
	apps::driver_kind kind;
	{
		std::string err;
		if (apps::parse_driver(c.driver, &kind, &err) != 0) {
			fprintf(stderr, "rdgram-mcast: %s\n", err.c_str());
			return 2;
		}
		const char *why = apps::with_driver(kind, [](auto tag) {
			return cannot_serve<typename decltype(tag)::type>();
		});
		if (why != nullptr) {
			fprintf(stderr, "rdgram-mcast: %s\n", why);
			return 2;
		}
	}

	runtime rt;
	if (int rc = apps::start_runtime(rt, {.app = "rdgram-mcast", .eal = sa.eal_given ? sa.eal : c.eal_args,
					      .argv0 = argv[0],
					      .capture = apps::capture_of(c.capture)});
	    rc != 0)
		return rc;
	std::vector<lcore_cpu> lcores;
	{
		std::string err;
		if (apps::pick_workers(rt, SOCKET_ID_ANY, c.workers, &lcores, &err) != 0) {
			fprintf(stderr, "rdgram-mcast: %s\n", err.c_str());
			rt.fini();
			return 2;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	/* Everything after runs on the driver's queue type. */
	const int st = apps::with_driver(kind, [&](auto tag) {
		using Dev = typename decltype(tag)::type;
		if constexpr (apps::is_soft<Dev>)
			return run_on<soft_fabric>(c, rt, lcores);
#ifdef RDGRAM_MCAST_VERBS
		else if constexpr (std::is_same_v<Dev, verbs::verbs_device>)
			return run_on<verbs_fabric>(c, rt, lcores);
#endif
		else
			return 2; /* refused above (cannot_serve) */
	});
	rt.fini();
	return st;
}
