/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf: perftest-style UD latency (ping-pong, RTT/2) and bandwidth
 * (streaming) tests over rdgram drivers.
 *
 *   rdgram-perf [EAL args --] [options]
 *
 * With no arguments: an in-process loopback, two poll lcores joined by a
 * net_ring pair, through the software RoCEv2 driver, both tests.
 *
 * main() parses (perf_cli.cc; the driver named once: apps/common/driver.h),
 * starts the runtime and runs the one path every driver takes
 * (perf_main.cc): set up its devices, one queue per worker, run
 * perf_run.h's poll threads, report. As the peer of perftest or
 * ibv_ud_pingpong the exchange is peer/'s.
 */
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <string>

#include <rte_cycles.h>

#include "app_start.h"
#include "rdgram/crc32_choose.h"
#include "perf_cli.h"
#include "perf_main.h"
#include "perf_tests.h"
#include "rdgram/runtime.h"
#include "rdgram/telemetry.h"

using namespace rdgram;
using namespace rdgram::perf;

namespace {

/* SIGINT, SIGTERM: perf_tests.h's loops end as at their deadline. */
void on_stop_signal(int) { perf_stop.store(true, std::memory_order_relaxed); }

/* The EAL, the control thread and the telemetry socket. 0, or the exit
 * status after one line on stderr. */
int start_runtime(runtime &rt, const perf_options &o, const char *argv0)
{
	const perf_config &c = o.c;
	const std::string &lc = c.mode == "server" ? c.server.lcores : c.mode == "client" ? c.client.lcores : "";
	return apps::start_runtime(rt, {.app = "rdgram-perf",
					.eal = o.sa.eal_given ? o.sa.eal : c.eal_args,
					.argv0 = argv0,
					.default_lcores = lc,
					.verbose = o.verbose,
					/* range checked by the parsers */
					.ctl_max_nap_ns = long(c.ctl_max_nap_us) * 1000,
					.capture = apps::capture_of(c.capture)});
}

} // namespace

int main(int argc, char **argv)
{
	perf_options o;
	if (int rc = parse_perf_options(argc, argv, &o); rc >= 0)
		return rc;
	const perf_config &c = o.c;

	runtime rt;
	if (int rc = start_runtime(rt, o, argv[0]); rc != 0)
		return rc;
	/* -v: which ICRC kernel the soft driver's queues run at each frame
	 * size, and why (crc32_choose.h; also /rdgram/icrc). */
	if (o.verbose && c.driver == "soft")
		fprintf(stderr, "rdgram-perf: ICRC kernel: %s\n", crc32_plan_describe(crc32_chosen()).c_str());
	const uint64_t deadline = rte_rdtsc() + uint64_t(c.timeout_s * double(rte_get_tsc_hz()));
	/* Ctrl-C (or a script's kill) ends every loop as the deadline does; the
	 * tests that completed are still reported. */
	std::signal(SIGINT, on_stop_signal);
	std::signal(SIGTERM, on_stop_signal);

	/* Runs the tests and reports them; the status is the exit's. */
	const int status = run_perf_on(o.driver, rt, o, deadline);
	rt.fini();
	return status;
}
