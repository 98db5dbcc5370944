/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * N poll threads for an app: which lcores run them, and running them.
 *
 * Every app takes --workers N (and a `workers` key in its TOML table):
 * worker i runs on its own lcore with its own queue (queue i of each port)
 * and its own QPs. The workers are the EAL's lcores in NUMA order for the
 * port (runtime::poll_lcores), the main lcore included but taken last, so
 * that `-l 0,1 -- --workers 2` runs two poll threads on a 2-CPU machine.
 * When the main lcore is a worker, the main thread's own duties (signals,
 * periodic reports: the app's watch) move to a plain thread of the process
 * for the run. It inherits the main thread's CPU set (with -l 0,1 on a
 * 2-CPU machine: CPU 0, with the main lcore's worker and the control
 * thread) and sleeps between reports.
 * (Main thread; NOT thread safe.)
 */
#ifndef RDGRAM_APPS_WORKERS_H
#define RDGRAM_APPS_WORKERS_H

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "rdgram/runtime.h"

namespace rdgram::apps {

/* The lcores for n workers of a port on numa_node: the worker lcores in
 * NUMA order, then the main lcore. 0; EINVAL when n is 0 or above the
 * lcores the EAL was given (err: "--workers 3: only 2 lcores (-l 0,1)"). */
int pick_workers(const runtime &rt, int numa_node, unsigned n, std::vector<lcore_cpu> *out, std::string *err);

/* Runs fn(args[i]) on lcores[i] for every i, one of them possibly the
 * main lcore (then on the calling thread), and watch(running) meanwhile on
 * the calling thread, or on a plain thread when the calling thread is a
 * worker. running counts the workers not yet returned; watch returns once
 * it is 0 (it may ask the workers to stop first, as the app's stop flag
 * does). Returns when every worker and watch returned: 0, or the first
 * non-zero worker return value; -EBUSY/-EINVAL when an lcore could not be
 * launched (the workers already launched still run to their end: the
 * caller's stop flag ends them). */
int run_workers(const std::vector<lcore_cpu> &lcores, int (*fn)(void *), const std::vector<void *> &args,
		const std::function<void(const std::atomic<unsigned> &running)> &watch);

} // namespace rdgram::apps

#endif
