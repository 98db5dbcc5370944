/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd's run: the poll lcore and the main thread's watch over it.
 */
#ifndef RDGRAM_FWD_RUN_H
#define RDGRAM_FWD_RUN_H

#include "fwd_config.h"
#include "fwd_setup.h"
#include "rdgram/runtime.h"

namespace rdgram::fwd {

/* Installs the signal handlers (SIGINT/SIGTERM stop, SIGUSR1 prints the
 * counters), prints the start-up line, launches the poll loop on a.worker
 * and watches it until it is done: reports on SIGUSR1 and every
 * c.stats_interval_s. Returns once the poll lcore stopped, or false when
 * it could not be launched (printed). *status |= 1 when a report could not
 * be written. (Main thread.) */
bool run(runtime &rt, const fwd_config &c, fwd_app &a, int *status);

/* Whether SIGINT or SIGTERM ended the run. */
bool stopped_by_signal();

} // namespace rdgram::fwd

#endif
