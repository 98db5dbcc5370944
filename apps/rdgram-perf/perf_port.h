/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The DPDK port of a soft-driver endpoint (found or probed by
 * apps/common/port.h's probe_port): wait for its link, make the AH to its
 * peer. (Main thread, before the poll loops.)
 */
#ifndef RDGRAM_PERF_PORT_H
#define RDGRAM_PERF_PORT_H

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "ah_attr.h"
#include "perf_tests.h"
#include "port.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "soft_device.h"

namespace rdgram::perf {

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
	const ibv_ah_attr a = apps::gid_ah_attr(dgid.raw);
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
