/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The one CPU a single-lcore test tool polls on (the tools in
 * tests/integration and tests/lab): the first CPU this process may run
 * on, or the last (two busy pollers on one CPU would take turns by time
 * slice).
 */
#ifndef RDGRAM_TESTS_TOOL_CPU_H
#define RDGRAM_TESTS_TOOL_CPU_H

#include <sched.h>

#include <string>

namespace rdgram::test {

inline std::string allowed_cpu(bool last = false)
{
	cpu_set_t cs;
	CPU_ZERO(&cs);
	std::string cpu = "0";
	if (sched_getaffinity(0, sizeof(cs), &cs) == 0)
		for (int i = 0; i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &cs)) {
				cpu = std::to_string(i);
				if (!last)
					break;
			}
	return cpu;
}

} // namespace rdgram::test

#endif
