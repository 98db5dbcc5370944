/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Progress of a running rdgram-perf: what the poll threads publish while
 * they run (messages done, a latency histogram, their QP counters through
 * telemetry::qp_publisher), which the control thread prints a status line
 * from every --status-interval.
 *
 * The poll threads only store: single-writer relaxed atomics (a load and a
 * store, no read-modify-write, no syscall), read by the control thread. A
 * status line is therefore approximate by the few samples in flight; the
 * final tables are computed from the poll threads' own data after they
 * stopped.
 */
#ifndef RDGRAM_PERF_STATUS_H
#define RDGRAM_PERF_STATUS_H

#include <atomic>
#include <cstdint>

#include "latency_hist.h"
#include "rdgram/telemetry.h"

namespace rdgram::perf {

/* The histogram is every app's (apps/common/latency_hist.h). */
using apps::latency_hist;
using apps::plot_hist;
using apps::write_hist_csv;

/* What the client poll thread publishes for the status line. */
struct progress {
	enum : int { idle = 0, lat = 1, bw = 2 };
	std::atomic<int> phase{idle};
	std::atomic<uint64_t> done{0}; /* data messages of the current phase */
	latency_hist hist;             /* lat: RTT/2 per measured iteration */
};

/* Hooks the poll loops call (loop_env::hooks; nullptr: none). */
struct loop_hooks {
	progress *prog = nullptr;                 /* client only */
	telemetry::qp_publisher *pub = nullptr;   /* this loop's QP */
};

} // namespace rdgram::perf

#endif
