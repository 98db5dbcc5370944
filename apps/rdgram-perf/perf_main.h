/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf's one run path, for every driver (perf_main.cc).
 */
#ifndef RDGRAM_PERF_MAIN_H
#define RDGRAM_PERF_MAIN_H

#include <cstdint>

#include "driver.h"
#include "perf_cli.h"
#include "rdgram/runtime.h"

namespace rdgram::perf {

/* Runs o.c.test in o.c.mode on driver k (built: parse_driver said so)
 * after the runtime is up, with o.c.workers poll threads a side. Returns
 * the exit status: 0; 1 (a port, a device or the test failed, or timed
 * out; stderr says which); 2 (a setting it cannot run: one line); 130
 * (interrupted; the completed tests are reported). */
int run_perf_on(apps::driver_kind k, runtime &rt, const perf_options &o, uint64_t deadline);

} // namespace rdgram::perf

#endif
