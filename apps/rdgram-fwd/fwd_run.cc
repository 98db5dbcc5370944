/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd's signal handling (the run itself is fwd_run.h's template).
 */
#include "fwd_run.h"

#include <csignal>
#include <ctime>

namespace rdgram::fwd {

namespace {

/* Set by signal handlers, read by the watch: nothing is printed or
 * allocated in a handler. */
volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_dump = 0;

void on_stop(int) { g_stop = 1; }
void on_dump(int) { g_dump = 1; }

} // namespace

void install_signals()
{
	std::signal(SIGINT, on_stop);
	std::signal(SIGTERM, on_stop);
	std::signal(SIGUSR1, on_dump);
}

bool stopped_by_signal()
{
	return g_stop != 0;
}

bool take_dump_request()
{
	if (g_dump == 0)
		return false;
	g_dump = 0;
	return true;
}

void sleep_ms(long ms)
{
	timespec ts{ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, nullptr);
}

} // namespace rdgram::fwd
