/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd's set-up and tear-down (main thread): every port's device, AH
 * service, queue, QPs and reply paths, the peers' AHs created ahead, the
 * rules, and the poll loop's parameters (fwd_loop.h); fwd_run.cc then runs
 * the poll lcore.
 */
#ifndef RDGRAM_FWD_SETUP_H
#define RDGRAM_FWD_SETUP_H

#include <memory>
#include <vector>

#include "fwd_config.h"
#include "fwd_loop.h"
#include "rdgram/ah_service.h"
#include "rdgram/runtime.h"
#include "soft_device.h"

namespace rdgram::fwd {

/* Everything one port needs; lives until the poll thread has stopped. */
struct port_rt {
	const port_config *cfg = nullptr;
	uint16_t port_id = 0;
	soft::soft_device dev;
	ah_service svc;
	port_state st;
	bool svc_up = false;
	unsigned nclients = 0;
	std::vector<ah_handle> held; /* peers' AHs created ahead */

	~port_rt()
	{
		for (unsigned i = 0; i < nclients; i++) {
			svc.remove_client(st.cl[i]);
			st.cl[i].fini();
		}
		for (ah_handle h : held)
			svc.destroy_ah(h);
		if (svc_up)
			svc.stop();
	}
};

/* The appliance: the poll loop's context, the ports it runs, and the
 * lcore it runs on. ports goes first on destruction: its members free what
 * ctx's loop used. */
struct fwd_app {
	std::unique_ptr<loop_ctx> ctx = std::make_unique<loop_ctx>();
	std::vector<std::unique_ptr<port_rt>> ports;
	lcore_cpu worker{};
};

/* Probes and opens every port of c, picks the poll lcore (the first
 * worker in NUMA order of the first port), creates the peers' AHs ahead and
 * fills a.ctx. 0, or 1/2 (printed). (Main thread.) */
int set_up(runtime &rt, const fwd_config &c, fwd_app &a);

/* Once the poll lcore stopped: the reply paths go, and replies still
 * waiting are dropped (counted as pend_timeout). (Main thread.) */
void stop_reply_paths(fwd_app &a);

/* After the last report: the peers' AHs, the AH services, the devices.
 * (Main thread.) */
void close_ports(fwd_app &a);

} // namespace rdgram::fwd

#endif
