/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf's set-up on the soft driver, before any poll loop runs: the
 * loopback's net_ring pair and lcores, a server's or client's DPDK port,
 * the device, queue and AHs of each endpoint, --oob's exchange, and what
 * is exposed while the tests run (telemetry, the status line). Each
 * function prints what went wrong on stderr, one line. (Main thread.)
 * The verbs and mlx5 drivers' set-up is perf_rdma.cc's.
 */
#ifndef RDGRAM_PERF_SETUP_H
#define RDGRAM_PERF_SETUP_H

#include <cstdint>
#include <vector>

#include "perf_cli.h"
#include "perf_report.h"
#include "perf_run.h"
#include "rdgram/runtime.h"
#include "rdgram/telemetry.h"
#include "soft_device.h"

namespace rdgram::perf {

using soft_endpoint = endpoint<soft::soft_device>;

/* Opens the soft device on port_id for e (its role, self, other and
 * where set), its queue, the AH to its peer (resolved by ARP/ND when the
 * peer's MAC is not known, bounded by the run's timeout) and, for
 * txonly --dests, the prepared destinations. 0 or an errno value. */
int open_soft_endpoint(runtime &rt, const perf_config &c, soft_endpoint &e, uint16_t port_id);

/* Loopback: the net_ring pair joining the two endpoints' ports, and
 * their lcores (the client on the main lcore, the server on a worker).
 * 0, or the exit status (1: no pair; 2: fewer than two lcores). */
int open_loopback(runtime &rt, uint16_t *srv_port, uint16_t *cli_port, lcore_cpu *srv, lcore_cpu *cli);

/* --oob with the soft driver (rdgram's own rendezvous): swaps our
 * address, QPN, Q_Key and MAC for the peer's, written into *other. */
int oob_swap(const perf_config &c, const endpoint_config &self, endpoint_config *other);

/* The open endpoints in /rdgram/ telemetry and, every --status-interval,
 * the status line, while the tests run: start() after the endpoints are
 * open, stop() before anything exposed goes away (the destructor too). */
class exposure {
public:
	exposure(runtime &rt, const perf_options &o) : rt_(rt), o_(o) {}
	exposure(const exposure &) = delete;
	exposure &operator=(const exposure &) = delete;
	~exposure() { stop(); }

	/* The hooks each side's poll loop publishes through. */
	loop_hooks *server_hooks() { return &srv_hooks_; }
	loop_hooks *client_hooks() { return &cli_hooks_; }
	const progress &client_progress() const { return prog_; }

	void start(const std::vector<soft_endpoint *> &eps);
	void stop();

private:
	runtime &rt_;
	const perf_options &o_;
	progress prog_;
	telemetry::qp_publisher srv_pub_, cli_pub_;
	loop_hooks srv_hooks_{nullptr, &srv_pub_}, cli_hooks_{&prog_, &cli_pub_};
	status_printer line_{&o_.c, nullptr, {}};
	bool attached_ = false, line_on_ = false;
};

} // namespace rdgram::perf

#endif
