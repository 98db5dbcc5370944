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
 * between them (mcast_switch.h). One poll thread runs all of it
 * (publisher, switch, subscribers, in turn), so the run is deterministic on
 * a shared 2-core machine. --mode pub / sub run one role on an ethdev given
 * with --port (e.g. net_af_packet on a veth), one process each.
 *
 * main() parses (mcast_cli.cc), sets up on the chosen driver
 * (mcast_soft.cc, mcast_verbs.cc), runs the poll loop (mcast_engine.h,
 * templated on that driver's queue) and reports (mcast_report.cc).
 */
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <memory>
#include <vector>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include "mcast.h"
#include "mcast_engine.h"
#include "mcast_report.h"
#include "mcast_soft.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "rdgram/telemetry.h"
#ifdef RDGRAM_MCAST_VERBS
#include "mcast_verbs.h"
#endif

using namespace rdgram;
using namespace rdgram::mcast;

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

/* The state the poll loop needs: the publisher's pacing and buffers,
 * every subscriber's trackers, the times. */
template <class Fabric> void prepare(session<typename Fabric::queue_type> &s, const Fabric &f)
{
	const mcast_config &c = *s.c;
	s.hz = rte_get_tsc_hz();
	s.start = rte_rdtsc();
	s.end_tsc = c.duration > 0 ? s.start + uint64_t(c.duration * double(s.hz)) : 0;
	s.idle_ticks = uint64_t(c.idle_timeout * double(s.hz));
	if ((s.pub_q = f.pub_queue()) != nullptr) {
		s.pub = std::make_unique<pub_state>();
		s.pub->ahs = f.group_ahs();
		s.pub->qkeys = f.group_qkeys();
		s.pub->bufs = std::make_unique<uint8_t[]>(size_t(burst) * c.size); /* zeroed */
		s.pub->pace.init(c.rate, s.hz, s.start);
	}
	for (size_t k = 0; k < f.subscribers(); k++) {
		s.sub_q.push_back(f.sub_queue(k));
		s.subs.push_back(std::make_unique<sub_state>());
		s.subs.back()->trk = std::make_unique<seq_tracker[]>(c.groups.size());
	}
	s.sw = f.switch_ports();
}

/* Runs the poll loop on lcore worker while this thread prints the status
 * line every --status-interval and passes a signal on; with no worker
 * lcore, on this thread (no live status line). */
template <class Q> void run(session<Q> &s, unsigned worker)
{
	if (worker >= RTE_MAX_LCORE) {
		poll_loop<Q>(&s);
		return;
	}
	launch_on_lcore(poll_loop<Q>, &s, worker);
	std::vector<uint64_t> last(s.subs.size(), 0);
	uint64_t last_tsc = s.start;
	const uint64_t every = uint64_t(s.c->status_interval * double(s.hz));
	uint64_t next = s.start + every;
	while (!s.finished.load(std::memory_order_acquire)) {
		rte_delay_us_sleep(10000);
		const uint64_t now = rte_rdtsc();
		if (every != 0 && now >= next) {
			print_status(*s.c, s.pub.get(), s.subs, s.hz, s.start, now, last, last_tsc);
			next += every;
		}
		if (g_stop)
			s.stop.store(true, std::memory_order_relaxed);
	}
	wait_on_lcore(worker);
}

/* Set up on Fabric's driver, run, leave the groups, report. Returns the
 * exit status. */
template <class Fabric> int run_on(const mcast_config &c, runtime &rt)
{
	using Q = typename Fabric::queue_type;
	const unsigned worker = rte_get_next_lcore(-1, 1, 0);
	const int socket = worker < RTE_MAX_LCORE ? int(rte_lcore_to_socket_id(worker)) : SOCKET_ID_ANY;
	Fabric f;
	if (f.open(c, rt, socket) != 0)
		return 1;
	session<Q> s;
	s.c = &c;
	s.rt = &rt;
	s.signalled = &g_stop;
	prepare(s, f);
	printf("rdgram-mcast: mode %s, driver %s, %zu group(s):", c.mode.c_str(), c.driver.c_str(), c.groups.size());
	for (const auto &g : c.groups)
		printf(" %s", format_gid(g).c_str());
	printf(", %zu subscriber(s), rate %.0f msg/s/group, size %u\n", s.subs.size(), c.rate, c.size);
	fflush(stdout);

	run(s, worker);

	f.leave();
	drain(s, s.hz / 20); /* 50 ms: the leave frames go out */
	std::vector<sub_report> subs;
	for (size_t k = 0; k < s.subs.size(); k++)
		subs.push_back({s.subs[k].get(), totals_of(*s.sub_q[k]), f.membership_sent(k),
				s.sw != nullptr ? &s.sw->seen(k) : nullptr});
	return report(c, s.pub.get(), s.pub_q != nullptr ? totals_of(*s.pub_q) : queue_totals{}, subs,
		      s.sw != nullptr ? s.sw->copy_failures() : 0);
}

} // namespace

int main(int argc, char **argv)
{
	const split_args sa = split_command_line(argc, argv);
	mcast_config c;
	if (int rc = parse_command_line(sa, c); rc >= 0)
		return rc;

	runtime rt;
	int init_rc;
	{
		/* The runtime directory and telemetry socket owner-only, as in
		 * rdgram-perf. */
		telemetry::private_umask um;
		init_rc = rt.init(sa.eal_given ? sa.eal : c.eal_args, argv[0]);
	}
	if (init_rc != 0) {
		fprintf(stderr, "rdgram-mcast: %s\n", rt.error().c_str());
		return 1;
	}
	{
		std::string err;
		if (int rc = telemetry::secure_socket(&err); rc != 0 && rc != ENOENT) {
			fprintf(stderr, "rdgram-mcast: %s\n", err.c_str());
			rt.fini();
			return 1;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	/* The driver, chosen once: everything after runs on its queue type. */
#ifdef RDGRAM_MCAST_VERBS
	const int st = c.driver == "verbs" ? run_on<verbs_fabric>(c, rt) : run_on<soft_fabric>(c, rt);
#else
	const int st = run_on<soft_fabric>(c, rt);
#endif
	rt.fini();
	return st;
}
