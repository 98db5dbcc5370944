/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Every app's start-up, written once: the EAL and the runtime (control
 * thread, hwloc, QSBR) under a private umask, rdgram's log types in DPDK's
 * telemetry, and the telemetry socket made owner-only (docs/SECURITY.md).
 * (Main thread, once.)
 */
#ifndef RDGRAM_APPS_APP_START_H
#define RDGRAM_APPS_APP_START_H

#include <string>
#include <vector>

#include "rdgram/runtime.h"

namespace rdgram::apps {

struct app_start {
	const char *app;                    /* "rdgram-fwd": the error lines' prefix */
	std::vector<std::string> eal;       /* empty: the runtime's defaults */
	const char *argv0;
	std::string default_lcores;         /* runtime::init's, when eal is empty */
	bool verbose = false;               /* runtime::set_verbose */
	long ctl_max_nap_ns = -1;           /* control_thread::set_max_nap; -1: its default */
};

/* 0, or the exit status (1) after one line on stderr: "<app>: <why>". */
int start_runtime(runtime &rt, const app_start &s);

} // namespace rdgram::apps

#endif
