/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The DPDK port of a soft-driver endpoint: probe it from devargs, wait for
 * its link. (Main thread, before the poll loops.)
 */
#ifndef RDGRAM_PERF_PORT_H
#define RDGRAM_PERF_PORT_H

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_ethdev.h>

#include "perf_tests.h"

namespace rdgram::perf {

/* Probes a vdev from devargs and returns its port id. */
inline int probe_port(const std::string &devargs, uint16_t *port)
{
	std::string name = devargs.substr(0, devargs.find(','));
	if (rte_eth_dev_get_port_by_name(name.c_str(), port) == 0)
		return 0; /* given with --vdev on the EAL command line */
	int rc = rte_dev_probe(devargs.c_str());
	if (rc < 0) {
		fprintf(stderr, "rdgram-perf: cannot probe '%s': %s\n", devargs.c_str(), strerror(-rc));
		return -rc;
	}
	if (rte_eth_dev_get_port_by_name(name.c_str(), port) != 0) {
		fprintf(stderr, "rdgram-perf: '%s' created no ethdev port\n", devargs.c_str());
		return ENODEV;
	}
	return 0;
}

inline bool wait_link_up(uint16_t port, uint64_t deadline)
{
	rte_eth_link l{};
	while (!past(deadline, rte_rdtsc())) {
		if (rte_eth_link_get_nowait(port, &l) == 0 && l.link_status == RTE_ETH_LINK_UP)
			return true;
		rte_delay_us_sleep(10000);
	}
	return false;
}

} // namespace rdgram::perf

#endif
