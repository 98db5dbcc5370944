/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf's command line: the options, the config file they
 * override, and the checks of the combination, before anything starts.
 */
#ifndef RDGRAM_PERF_CLI_H
#define RDGRAM_PERF_CLI_H

#include <string>

#include "cli.h"
#include "driver.h"
#include "rdgram/runtime.h"
#include "perf_config.h"

namespace rdgram::perf {

/* What a run is told: the config with the options applied, and what
 * lives on the command line only. */
struct perf_options {
	perf_config c;
	apps::driver_kind driver = apps::driver_kind::soft; /* c.driver, checked built */
	split_args sa;          /* the EAL's arguments and the app's */
	bool verbose = false;   /* DPDK's start-up messages too */
	double status_interval = 1.0; /* seconds between status lines; 0: none */
	std::string hist_csv, hist_plot; /* latency histogram outputs, or "" */
};

/* Parses argc/argv (EAL arguments before "--"), loads -c's config and
 * applies the options over it, and checks what cannot run together.
 * Returns -1 when the run goes on, otherwise the exit status: 0 after
 * --help, 2 after one line on stderr saying what is wrong (a config
 * error as file:line:column and key). (Main thread, before the EAL.) */
int parse_perf_options(int argc, char **argv, perf_options *o);

} // namespace rdgram::perf

#endif
