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
	capture_mode capture = capture_mode::automatic; /* --capture, [eal] capture */
};

/* 0, or the exit status (1) after one line on stderr: "<app>: <why>".
 * When the app's ports can be captured live, capture on (or -v) has one
 * line on stderr say how ("<app>: capture: dpdk-dumpcap
 * --file-prefix=rdgram-<pid> -i PORT"); auto says nothing. When they
 * cannot, capture auto and off print nothing, and capture on is the exit
 * status 1 after "<app>: capture on: <why>". */
int start_runtime(runtime &rt, const app_start &s);

/* The --capture option's help text and the [eal] capture key's choices,
 * the same in every app. */
inline constexpr const char *capture_help =
	"live capture with dpdk-dumpcap (config [eal] capture): auto takes hugepages and a shared EAL "
	"configuration when no EAL arguments are given and hugepages are free, on insists, off never "
	"(docs/APPS.md, Live capture) [auto]";
/* The value of --capture or [eal] capture ("off", "auto", "on"). */
inline capture_mode capture_of(const std::string &name)
{
	capture_mode m = capture_mode::automatic;
	parse_capture_mode(name, &m);
	return m;
}

} // namespace rdgram::apps

#endif
