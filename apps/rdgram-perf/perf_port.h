/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The DPDK port of a soft-driver endpoint (found or probed by
 * soft_port.h's probe_port): wait for its link, make the AH to its
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
#include "soft_port.h"
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

/* The AH to dgid (soft::resolve_ah on the control thread), the queue
 * pumped for 10 ms between tries: ARP/ND replies come in on it. */
inline int soft_ah(runtime &rt, soft::soft_device &dev, const wire::gid &dgid, const std::function<void()> &pump,
		   uint64_t deadline, ah_handle *out, std::string *err)
{
	const ibv_ah_attr a = apps::gid_ah_attr(dgid.raw);
	const int rc = soft::resolve_ah(
		dev, a, deadline, [&](const std::function<void()> &f) { rt.ctl().call(f); },
		[&] {
			const uint64_t until = rte_rdtsc() + rte_get_tsc_hz() / 100;
			while (rte_rdtsc() < until)
				pump();
		},
		out);
	if (rc == ETIMEDOUT || rc == EHOSTUNREACH)
		*err = "cannot resolve the peer's MAC for " + format_gid(dgid) + " by " +
		       (dgid.is_v4_mapped() ? "ARP" : "ND") + ": " + strerror(rc);
	else if (rc != 0)
		*err = "creating the AH to " + format_gid(dgid) + " failed: " + strerror(rc);
	return rc;
}

} // namespace rdgram::perf

#endif
