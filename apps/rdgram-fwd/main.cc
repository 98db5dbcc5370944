/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd: a UD reflector / forwarder appliance on every rdgram driver:
 * soft (RoCEv2 on any DPDK port: net_pcap to replay a capture, net_ring,
 * net_memif, af_packet, a NIC), verbs (any rdma-core provider), mlx5, efa.
 *
 *   rdgram-fwd [EAL args --] [options]
 *
 * main() parses the options over the config (fwd_config.cc), names the
 * driver once (apps/common/driver.h) and runs one template over its
 * device: the ports set up (fwd_setup.h), N workers each running the poll
 * loop (fwd_loop.h) on its own queue while a watch handles signals and the
 * clock (fwd_run.h), and the counters per worker and summed (fwd_report.cc).
 */
#include <cstdio>
#include <string>

#include <rte_cycles.h>

#include "app_start.h"
#include "cli.h"
#include "driver.h"
#include "fwd_config.h"
#include "fwd_report.h"
#include "fwd_run.h"
#include "fwd_setup.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"

using namespace rdgram;
using namespace rdgram::fwd;

namespace {

/* The whole run on driver Dev. 0, or 1/2 (printed). (Main thread.) */
template <class Dev> int run_app(runtime &rt, const fwd_config &c)
{
#if RDGRAM_HAVE_DRIVER_EFA
	if constexpr (std::is_same_v<Dev, efa::efa_device>) {
		if (c.mode == "reflect") {
			fprintf(stderr, "rdgram-fwd: driver efa cannot reflect: EFA completions carry no GRH (the "
					"sender is an AH number, wc.slid, that rdgram-fwd does not map back); forward "
					"mode works\n");
			return 2;
		}
	}
#endif
	int status = 0;
	fwd_app<Dev> a;
	if (int rc = set_up(rt, c, a); rc != 0)
		return rc;
	if (!run(rt, c, a, &status))
		return 1;
	stop_reply_paths(a);
	/* Whatever a queue still holds goes out, then the last copies, after
	 * the reply paths dropped what still waited. */
	for (auto &pr : a.ports)
		for (auto &st : pr->st)
			st->q.tx_flush();
	const uint64_t now = rte_get_tsc_cycles();
	for (auto &x : a.ctx)
		x->take_snapshot(now);
	std::vector<int64_t> mbufs_out;
	close_queues(rt, a, &mbufs_out);
	std::vector<port_report> pr = port_reports(rt, c, a);
	for (size_t p = 0; p < pr.size(); p++)
		pr[p].mbufs_out = mbufs_out[p];
	status |= report(c, worker_views(a), pr,
			 stopped_by_signal() ? "signal" : a.ctx.size() == 1 ? a.ctx[0]->why : "every worker stopped");
	close_ports(a);
	return status;
}

} // namespace

int main(int argc, char **argv)
{
	split_args sa = split_command_line(argc, argv);
	fwd_config c;
	apps::driver_kind kind = apps::driver_kind::soft;

	cli::parser app{"rdgram-fwd",
			"rdgram-fwd: UD reflector and forwarder on every rdgram driver (soft: RoCEv2 on any DPDK "
			"port; verbs, mlx5, efa).\n"
			"Usage: rdgram-fwd [EAL args --] [options]. --workers N runs N poll threads on the EAL's "
			"lcores (the main lcore last), each with its own queue of every port and its own QPs.\n"
			"reflect: every well-formed packet goes back to its sender (reply AH from the completion, "
			"cached); forward: the first matching [[rule]] sends it to a peer.\n"
			"Counters are printed on exit and on SIGUSR1; SIGINT/SIGTERM stop.",
			36};
	std::string port_args;
	app.config("-c,--config", "TOML config file (see config/rdgram-fwd.toml); options below override it [none]",
		   [&](const std::string &path) { load_fwd_config(path, c); });
	app.add("--driver", c.driver,
		"soft, verbs, mlx5 or efa (config [fwd] driver); verbs/mlx5/efa open the [rdma] device [soft]");
	app.add("--workers", c.workers,
		"poll threads (config [fwd] workers): worker i polls queue i of every port and owns its share "
		"of the QPs (soft: QP k goes to worker k mod N, or its 'worker' key; verbs/mlx5/efa: one QP "
		"each) [1]")
		.range(1u, 64u);
	app.add("--mode", c.mode, "reflect or forward (forward needs [[rule]]s and [peers]) [reflect]")
		.one_of({"reflect", "forward"});
	app.add("--stats-json", c.stats_json, "also write the counters as JSON to FILE, on exit and on SIGUSR1 [none]");
	app.add("--duration", c.duration_s, "stop after this many seconds; 0: run until a signal [0]").range(0.0, 1e9);
	app.add("--max-packets", c.max_packets, "stop after this many delivered (well-formed) packets; 0: no limit [0]");
	app.add("--idle-exit", c.idle_exit_s,
		"stop once no frame arrived and nothing waited for this many seconds (ends a pcap "
		"replay); 0: never [0]")
		.range(0.0, 1e9);
	app.add("--stats-interval", c.stats_interval_s,
		"also print the counters every N seconds; 0: only on exit and SIGUSR1 [0]")
		.range(0.0, 1e9);
	app.add("--port", port_args,
		"devargs of the first port, e.g. net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap (overrides "
		"[[port]] devargs; with no [[port]] in the config: MAC 02:00:00:00:00:01, address "
		"10.0.0.1, QP 0x100 with Q_Key 0x11111111) [none]");
	app.add("--capture", c.capture, apps::capture_help)
		.one_of({"auto", "on", "off"});
	if (int rc = app.parse(sa.app); rc >= 0)
		return rc;
	try {
		/* Not a field: --port names the first port's device, or makes
		 * a default port when the config has none. */
		if (!port_args.empty()) {
			if (c.ports.empty()) {
				port_config p;
				p.name = "p0";
				parse_mac("02:00:00:00:00:01", &p.mac);
				p.set_mac = true;
				wire::gid g;
				parse_ip("10.0.0.1", &g);
				p.addresses = {g};
				p.qps = {{0x100, 0x11111111}};
				c.ports.push_back(p);
			}
			c.ports[0].devargs = port_args;
		}
		/* A port table that names no QPs (the one every app reads,
		 * docs/PORTS.md): QP 0x100 + w on worker w, Q_Key 0x11111111. */
		for (auto &p : c.ports)
			if (p.qps.empty())
				for (unsigned w = 0; w < c.workers; w++)
					p.qps.push_back({0x100 + w, 0x11111111, int(w)});
		/* The driver first: its name decides what the rest may say. */
		if (std::string err; apps::parse_driver(c.driver, &kind, &err) != 0)
			throw config_error(err);
		check_fwd_config(c);
		if (c.driver != "soft") {
			/* The [rdma] device as the one port, one QP per worker
			 * (the device numbers them). */
			port_config p;
			p.name = "rdma";
			p.devargs = c.rdma.device.empty() ? "(first usable)" : c.rdma.device;
			for (unsigned w = 0; w < c.workers; w++)
				p.qps.push_back({0, c.rdma.qkey, int(w)});
			c.ports.push_back(p);
		}
		if (c.ports.size() > max_ports || c.peers.size() > max_peers || c.rules.size() > max_rules)
			throw config_error("at most " + std::to_string(max_ports) + " ports, " +
					   std::to_string(max_peers) + " peers and " + std::to_string(max_rules) +
					   " rules");
	} catch (const config_error &e) {
		fprintf(stderr, "rdgram-fwd: %s\n", e.what());
		return 2;
	}

	runtime rt;
	if (int rc = apps::start_runtime(rt, {.app = "rdgram-fwd", .eal = sa.eal_given ? sa.eal : c.eal_args,
					      .argv0 = argv[0],
					      .capture = apps::capture_of(c.capture)});
	    rc != 0)
		return rc;
	const int status = apps::with_driver(kind, [&](auto tag) {
		using Dev = typename decltype(tag)::type;
		return run_app<Dev>(rt, c);
	});
	rt.fini();
	return status;
}
