/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "app_start.h"

#include <cerrno>
#include <cstdio>

#include "rdgram/telemetry.h"

namespace rdgram::apps {

int start_runtime(runtime &rt, const app_start &s)
{
	rt.set_verbose(s.verbose);
	rt.set_capture(s.capture);
	int rc;
	{
		/* The runtime directory and the telemetry socket are born
		 * owner-only, then chmod-ed to be sure. */
		telemetry::private_umask um;
		rc = rt.init(s.eal, s.argv0, s.default_lcores);
	}
	if (rc != 0) {
		fprintf(stderr, "%s: %s\n", s.app, rt.error().c_str());
		return 1;
	}
	telemetry::register_log_types();
	/* Said when asked for (capture on, or -v): auto stays quiet either
	 * way, so that an app's output starts with its own banner. Where
	 * capture cannot be had, on has already refused in rt.init:
	 * "capture on: <why>". */
	if (rt.capture_ready() && (s.capture == capture_mode::on || s.verbose))
		fprintf(stderr, "%s: capture: dpdk-dumpcap --file-prefix=%s -i PORT (hugepages, shared EAL configuration)\n",
			s.app, rt.file_prefix().c_str());
	if (s.ctl_max_nap_ns >= 0)
		rt.ctl().set_max_nap(s.ctl_max_nap_ns);
	std::string err;
	if (int e = telemetry::secure_socket(&err); e != 0 && e != ENOENT) {
		fprintf(stderr, "%s: %s\n", s.app, err.c_str());
		rt.fini();
		return 1;
	}
	return 0;
}

} // namespace rdgram::apps
