/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf on the soft driver: the in-process loopback (two poll lcores
 * joined by a net_ring pair) or one side, server or client, on a DPDK
 * port. Set up (perf_setup.h), run (perf_run.h's thread bodies), report
 * (perf_report.h).
 */
#ifndef RDGRAM_PERF_SOFT_H
#define RDGRAM_PERF_SOFT_H

#include <cstdint>

#include "perf_cli.h"
#include "rdgram/runtime.h"

namespace rdgram::perf {

/* Runs o.c.test in o.c.mode on the soft driver after the runtime is up.
 * Returns the exit status: 0; 1 (a port or the test failed, or timed
 * out; stderr says which); 2 (a setting it cannot run); 130
 * (interrupted; the completed tests are reported). */
int run_soft(runtime &rt, const perf_options &o, uint64_t deadline);

} // namespace rdgram::perf

#endif
