/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The DPDK port of a soft-driver endpoint: probe it from devargs, wait for
 * its link, make the AH to its peer. (Main thread, before the poll loops.)
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
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "soft_device.h"

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

/* The AH to dgid: resolves its MAC first (a static neighbour answers at
 * once), (prepare_ah on the control
 * thread, the queue polled meanwhile: ARP/ND replies come in on it). */
inline int soft_ah(runtime &rt, soft::soft_device &dev, const wire::gid &dgid, const std::function<void()> &pump,
	    uint64_t deadline, ah_handle *out, std::string *err)
{
	ibv_ah_attr a{};
	a.is_global = 1;
	a.port_num = 1;
	a.grh.sgid_index = 0;
	a.grh.hop_limit = 64;
	memcpy(a.grh.dgid.raw, dgid.raw, 16);
	int rc = 0;
	for (;;) {
		rt.ctl().call([&] { rc = dev.prepare_ah(a); });
		if (rc != EINPROGRESS)
			break;
		const uint64_t until = rte_rdtsc() + rte_get_tsc_hz() / 100;
		while (rte_rdtsc() < until)
			pump();
		if (past(deadline, rte_rdtsc())) {
			rc = ETIMEDOUT;
			break;
		}
	}
	if (rc != 0) {
		*err = "cannot resolve the peer's MAC for " + format_gid(dgid) + " by " +
		       (dgid.is_v4_mapped() ? "ARP" : "ND") + ": " + strerror(rc);
		return rc;
	}
	int e = 0;
	rt.ctl().call([&] { *out = dev.create_ah(a, &e); });
	if (e != 0) {
		*err = "creating the AH to " + format_gid(dgid) + " failed: " + strerror(e);
		return e;
	}
	return 0;
}

} // namespace rdgram::perf

#endif
