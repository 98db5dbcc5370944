/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "perf_soft.h"

#include <cstdio>
#include <string>

#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "perf_port.h"
#include "perf_setup.h"

namespace rdgram::perf {

namespace {

using soft_run = run_ctx<soft_endpoint>;

/* The two CPUs' cache-line round trip (a few ms; at most 1 s), the
 * server's lcore echoing. */
double probe_line(unsigned srv_lcore)
{
	line_probe lp;
	lp.deadline = rte_rdtsc() + rte_get_tsc_hz();
	launch_on_lcore(line_probe::echo, &lp, srv_lcore);
	const double ns = lp.run();
	wait_on_lcore(srv_lcore);
	return ns;
}

} // namespace

int run_soft(runtime &rt, const perf_options &o, uint64_t deadline)
{
	const perf_config &c = o.c;
	soft_endpoint srv{"server", &c.server, &c.client};
	soft_endpoint cli{"client", &c.client, &c.server};
	soft_run sx{&c, &rt, &srv, deadline};
	soft_run cx{&c, &rt, &cli, deadline};
	cx.server = &sx;
	/* Progress for the status line and /rdgram/ telemetry. */
	exposure ex(rt, o);
	sx.hooks = ex.server_hooks();
	cx.hooks = ex.client_hooks();
	double line_ns_before = -1, line_ns_after = -1; /* loopback: line_probe */
	endpoint_config other;                          /* --oob: the peer's record */

	if (c.mode == "loopback") {
		uint16_t ps, pc;
		if (int st = open_loopback(rt, &ps, &pc, &srv.where, &cli.where); st != 0)
			return st;
		if (open_soft_endpoint(rt, c, srv, ps) != 0 || open_soft_endpoint(rt, c, cli, pc) != 0)
			return 1;
		ex.start({&srv, &cli});
		if (!c.json)
			printf(" rdgram-perf: loopback, soft RoCEv2 driver over net_ring, %s, server lcore %u "
			       "(cpu %u), client lcore %u (cpu %u)\n",
			       c.server.address.is_v4_mapped() ? "IPv4" : "IPv6", srv.where.lcore, srv.where.cpu,
			       cli.where.lcore, cli.where.cpu);
		fflush(stdout); /* before the status lines (stderr) */
		if (!c.json)
			line_ns_before = probe_line(srv.where.lcore);
		launch_on_lcore(server_main<soft_endpoint>, &sx, srv.where.lcore);
		client_main<soft_endpoint>(&cx);
		wait_on_lcore(srv.where.lcore);
		if (!c.json)
			line_ns_after = probe_line(srv.where.lcore);
	} else {
		soft_endpoint &me = c.mode == "server" ? srv : cli;
		/* --oob: the peer's address, QPN and MAC from it instead of
		 * the config (perf_oob.h). */
		if (!c.rdma.oob.empty()) {
			other = *me.other;
			if (oob_swap(c, *me.self, &other) != 0)
				return 1;
			me.other = &other;
		}
		uint16_t port;
		if (std::string err; apps::probe_port(me.self->vdev, &port, &err) != 0) {
			fprintf(stderr, "rdgram-perf: %s\n", err.c_str());
			return 1;
		}
		me.where = {rte_get_main_lcore(), unsigned(rte_lcore_to_cpu_id(int(rte_get_main_lcore())))};
		if (open_soft_endpoint(rt, c, me, port) != 0)
			return 1;
		if (c.mode == "client" && !wait_link_up(port, deadline)) {
			fprintf(stderr, "rdgram-perf: link to the server never came up (is it running?)\n");
			return 1;
		}
		ex.start({&me});
		if (!c.json)
			printf(" rdgram-perf: %s on %s, lcore %u (cpu %u)\n", c.mode.c_str(), me.self->vdev.c_str(),
			       me.where.lcore, me.where.cpu);
		fflush(stdout);
		if (c.mode == "server") {
			server_main<soft_endpoint>(&sx);
			if (!c.json)
				printf(" server: answered %lu data messages in the last test%s\n",
				       (unsigned long)sx.served, sx.ok ? "" : " (stopped at the timeout)");
		} else {
			client_main<soft_endpoint>(&cx);
		}
	}
	ex.stop();

	int status = 0;
	const bool is_client = c.mode != "server";
	if (is_client) {
		print_results(c, cx.lat, cx.bw);
		if (!c.json && !cx.bw.empty() && c.mode == "loopback")
			print_bw_limits(stdout, cx.bw_cpu, cli.where.cpu, srv.where.cpu,
					(unsigned long)cli.q.counters().tx_port_full, line_ns_before, line_ns_after);
		for (const auto &r : cx.lat)
			if (r.lost != 0)
				fprintf(stderr, " latency: %lu pings timed out and were re-sent\n", (unsigned long)r.lost);
		status = client_status(c, cx.ok);
	} else if (!sx.ok) {
		status = perf_stop.load() ? 130 : 1;
	}
	if (!cli.dests.empty())
		status = report_dests(c, cli.dests.size(), cx.bw, cli.dev.mempool(), status);
	if (c.mode == "loopback")
		print_counters<soft::soft_counters>({{"server", &srv.q.counters()}, {"client", &cli.q.counters()}});
	else
		print_counters<soft::soft_counters>({{c.mode.c_str(), &(c.mode == "server" ? srv : cli).q.counters()}});
	if (is_client)
		status = write_histogram(c, ex.client_progress().hist, o.hist_csv, o.hist_plot, status);
	fflush(stdout);
	rt.ctl().call([&] {
		for (soft_endpoint *e : {&srv, &cli})
			if (e->to.ah != ah_null)
				e->dev.destroy_ah(e->to.ah);
		for (ah_handle h : cli.dests)
			cli.dev.destroy_ah(h);
	});
	return status;
}

} // namespace rdgram::perf
