/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "perf_cli.h"

#include <cstdio>
#include <string>

#include <rte_config.h>

#include "app_start.h"
#include "rdgram/config.h"
#include "perf_peer.h"

namespace rdgram::perf {

int parse_perf_options(int argc, char **argv, perf_options *o)
{
	o->sa = split_command_line(argc, argv);
	perf_config &c = o->c;

	cli::parser app{"rdgram-perf",
			"rdgram-perf: UD latency and bandwidth tests (perftest-style) over rdgram drivers.\n"
			"Usage: rdgram-perf [EAL args --] [options]. With no options: in-process loopback over "
			"a net_ring pair, latency then bandwidth.",
			34};
	app.config("-c,--config", "TOML config file (see config/); options below override it",
		   [&](const std::string &path) { load_perf_config(path, c); });
	app.add("--test", c.test,
		"lat (ping-pong), bw (streaming), both, or txonly (client streams with no server: "
		"sender rate, e.g. on net_null) [both]")
		.one_of({"lat", "bw", "both", "txonly"});
	app.add("--mode", c.mode, "loopback (in-process), server or client [loopback]")
		.one_of({"loopback", "server", "client"});
	app.add("-s,--size", c.size, "payload bytes per message [64]").range(0u, 4096u);
	/* Not a field: one count for both tests. */
	uint64_t iters = 0;
	app.add("-n,--iters", iters, "iterations (lat default 10000, bw default 1000000)")
		.range(uint64_t(1), uint64_t(10000000000ull));
	app.add("--warmup", c.warmup, "latency pings not measured [1000]");
	app.add("-I,--inline-size", c.inline_size,
		"payloads up to this size are sent inline (copied from the app); larger ones from an "
		"mbuf the app fills [236]")
		.range(0u, 4096u);
	app.add("-t,--tx-depth", c.tx_depth, "send WRs posted per burst (postlist; soft: at most 32) [128]")
		.range(1u, 65536u);
	app.add("-Q,--cq-mod", c.cq_mod,
		"signal one send in N; the soft driver has no send CQ, so it has no effect there [64]")
		.range(1u, 1024u);
	app.add("--timeout", c.timeout_s,
		"seconds after which every loop stops by itself [60]; SIGINT/SIGTERM stop it sooner "
		"(exit 130, the completed tests are reported)")
		.range(0.1, 86400.0);
	app.add("--ctl-nap-us", c.ctl_max_nap_us,
		"the control thread's longest idle nap, microseconds: less when it has a core of its own, "
		"more when it shares one with a poll thread (each wake-up preempts that thread) [2000]")
		.range(20u, 1000000u);
	/* Not a field: the device of the side --mode names. */
	std::string port_args;
	app.add("--port", port_args,
		"DPDK port devargs for this role, e.g. net_memif0,role=server (overrides the devargs of the "
		"side's port table: the [[port]] named server or client, else the first; a port given with "
		"the EAL's --vdev is found by name)");
	app.add("--capture", c.capture, apps::capture_help)
		.one_of({"auto", "on", "off"});
	app.add("--oob", c.rdma.oob,
		"HOST:PORT of a TCP exchange of addresses before the test, as perftest does: the server "
		"listens there, the client connects (overrides [rdma] oob) [none]");
	app.add("--oob-proto", c.rdma.oob_proto,
		"what --oob speaks: rdgram (rdgram-perf's own rendezvous and tests), perftest (be the "
		"peer of ib_send_lat / ib_send_bw -c UD, perftest 6.06's exchange) or ud_pingpong (be the "
		"peer of ibv_ud_pingpong) (overrides [rdma] oob_proto) [rdgram]")
		.one_of({"rdgram", "perftest", "ud_pingpong"});
	app.add("--dests", c.dests,
		"txonly: send to N prepared destinations (distinct GIDs from the server's address on, "
		"each a static neighbour and an AH; max_ah is raised to N + 1) instead of the one peer "
		"(overrides [perf] dests) [0: the peer only]")
		.range(1u, 1u << 24);
	app.add("--dest-order", c.dest_order,
		"txonly --dests: rr (round robin) or random (a permutation made before the loop) "
		"(overrides [perf] dest_order) [rr]")
		.one_of({"rr", "random"});
	app.add("--workers", c.workers,
		"poll threads a side, each on its own lcore with its own queue and QP (worker i talks to the "
		"peer's worker i; soft driver: QPN [server|client] qpn + i on queue i); -n is each worker's; "
		"results are summed, then each worker's own and its accounting (overrides [perf] workers) [1]")
		.range(1u, unsigned(RTE_MAX_LCORE));
	app.flag("--imm", c.use_imm, "send with immediate data (SEND_ONLY_WITH_IMMEDIATE)");
	app.flag("--json", c.json, "print results as JSON lines instead of tables");
	app.flag("-v,--verbose", o->verbose,
		 "DPDK's start-up messages too (EAL, telemetry, libraries and PMDs at DPDK's own log levels; "
		 "by default they are at WARNING). An EAL --log-level before -- sets the levels instead");
	std::string &hist_csv = o->hist_csv, &hist_plot = o->hist_plot;
	app.add("--status-interval", o->status_interval,
		"seconds between status lines on stderr (rate, drops, p50/p99 so far) while a test runs; "
		"0: none [1]")
		.range(0.0, 3600.0);
	app.add("--hist-csv", hist_csv,
		"write the latency histogram (RTT/2) as CSV: lower_ns,count,cumulative_fraction, one line "
		"per bucket (log-linear, 16 per power of two) [none]");
	app.add("--hist-plot", hist_plot,
		"draw the latency histogram with gnuplot into FILE.svg or FILE.png (uses --hist-csv, or a "
		"CSV next to FILE) [none]");
	if (int rc = app.parse(o->sa.app); rc >= 0)
		return rc;
	if (app.count("--iters"))
		c.lat_iters = c.bw_iters = iters;
	try {
		select_port(c);
	} catch (const config_error &e) {
		fprintf(stderr, "rdgram-perf: %s\n", e.what());
		return 2;
	}
	if (!port_args.empty())
		c.port.devargs = port_args;
	if (std::string err; apps::parse_driver(c.driver, &o->driver, &err) != 0) {
		fprintf(stderr, "rdgram-perf: %s\n", err.c_str());
		return 2;
	}
	if (c.dests != 0 && (c.test != "txonly" || c.mode != "client" || c.driver != "soft")) {
		fprintf(stderr, "rdgram-perf: --dests needs --test txonly --mode client with the soft driver\n");
		return 2;
	}
	if (!c.rdma.oob.empty() && c.mode == "loopback") {
		fprintf(stderr, "rdgram-perf: --oob needs --mode server or --mode client\n");
		return 2;
	}
	if (peer_proto(c) && !peer_config_ok(c))
		return 2;
	const char *one_worker = nullptr;
	if (c.workers > 1 && peer_proto(c))
		one_worker = "--oob-proto perftest|ud_pingpong speaks for one QP, as the tools do: --workers 1";
	else if (c.workers > 1 && (!hist_csv.empty() || !hist_plot.empty()))
		one_worker = "--hist-csv/--hist-plot write one worker's histogram: --workers 1";
	else if (c.workers > 1 && c.driver != "soft" && c.test != "txonly")
		one_worker = "--workers above 1 on an RDMA driver runs --test txonly only (the device picks the QPNs "
			     "and the client is told one server QPN)";
	if (one_worker != nullptr) {
		fprintf(stderr, "rdgram-perf: %s\n", one_worker);
		return 2;
	}
	if (c.size > c.mtu) {
		fprintf(stderr, "rdgram-perf: size %u is above the path MTU %u\n", c.size, c.mtu);
		return 2;
	}
	if (c.driver == "soft" && c.mode != "loopback") {
		if (std::string e = soft::need_devargs(c.port); !e.empty()) {
			fprintf(stderr, "rdgram-perf: mode %s: %s (or --port)\n", c.mode.c_str(), e.c_str());
			return 2;
		}
	}

	if ((!hist_csv.empty() || !hist_plot.empty()) && (c.test == "bw" || c.test == "txonly" || c.mode == "server")) {
		fprintf(stderr, "rdgram-perf: --hist-csv/--hist-plot need a latency test on the client side "
				"(--test lat or both, mode loopback or client)\n");
		return 2;
	}
	if (!hist_plot.empty() && !(hist_plot.size() > 4 && (hist_plot.ends_with(".svg") || hist_plot.ends_with(".png")))) {
		fprintf(stderr, "rdgram-perf: --hist-plot wants a file ending in .svg or .png: %s\n", hist_plot.c_str());
		return 2;
	}
	if (!hist_plot.empty() && hist_csv.empty())
		hist_csv = hist_plot.substr(0, hist_plot.rfind('.')) + ".csv";
	return -1;
}

} // namespace rdgram::perf
