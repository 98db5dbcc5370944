/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-ah: the operators' AH tool.
 *
 *   rdgram-ah [EAL args --] inspect|bench|storm [options]
 *
 * It runs the AH registry and service of one host (a soft RoCEv2 device,
 * "local") whose peer (a second soft device, "peer") sits on the other end
 * of an in-process net_ring pair and answers ARP/ND for the addresses that
 * are resolved dynamically; or, when the port table ([port], docs/PORTS.md)
 * has devargs (--port), whose local device is that DPDK port and whose
 * peer is the program on the other end of the link (inspect and storm to
 * the addresses --to names; inspect sends each AH one datagram to the
 * peer's QP --ping-qpn and counts the replies). --workers poll threads
 * (default 1) each poll their queue of the device(s) (neighbour frames
 * travel through queue 0's) with their own AH client; in storm they share the watch of the
 * destination cache for each new AH becoming visible to the data path
 * (key k watched by worker k % N), in bench they all run the lookups at
 * once. Only the soft driver serves it (--driver: one line why not).
 *
 *   inspect  creates a set of AHs (static and resolved destinations, a few
 *            released again) and prints the registry: destination, state,
 *            refcount, generation, ahn, neighbour, AV bytes
 *   bench    create rate one by one and batched, reuse rate, dest_cache
 *            bulk lookup rate
 *   storm N  creates N AHs in batches; time until all are ready, p50/p99 of
 *            each AH's readiness, registry memory
 *
 * main() parses, sets up (ah_setup.cc), runs a mode beside the poll
 * threads (ah_modes.cc; their loop is ah_engine.h) and, once they stopped,
 * reports with each one's frame accounting (ah_report.cc).
 */
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <rte_cycles.h>

#include "app_start.h"
#include "ah_app.h"
#include "ah_host.h"
#include "ah_report.h"
#include "cli.h"
#include "driver.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "rdgram/telemetry.h"

using namespace rdgram;
using namespace rdgram::ahtool;

namespace {

std::atomic<bool> g_hold_stop{false};
void on_hold_signal(int) { g_hold_stop.store(true); }

} // namespace

int main(int argc, char **argv)
{
	split_args sa = split_command_line(argc, argv);
	ah_app_config c;

	cli::parser app{"rdgram-ah",
			"rdgram-ah: inspect the AH registry, measure AH creation and lookup, and run an AH storm, "
			"on the soft RoCEv2 driver (an in-process net_ring pair: this host and a peer that "
			"answers ARP/ND; or the DPDK port of the [port] table's devargs, the peer at its other "
			"end).\nUsage: rdgram-ah [EAL args --] inspect|bench|storm N [options]",
			34};
	app.require_subcommand(1);
	app.config("-c,--config", "TOML config file (see config/rdgram-ah.toml); options override it",
		   [&](const std::string &path) { load_ah_config(path, c); });
	app.flag("--json", c.json, "print one JSON object instead of tables [off]");
	app.add("--capture", c.capture, apps::capture_help)
		.one_of({"auto", "on", "off"});

	app.flag("--ipv6", c.ipv6, "use IPv6 addresses (fd00::/16) instead of IPv4 (10/8) [off]");
	app.add("--capacity", c.capacity, "AH registry capacity [65536]").range(1u, 1u << 24);
	app.add("--max-ah", c.port.max_ah, "the soft device's AH table size (the port table's max_ah) [1048576]")
		.range(1u, 1u << 24);
	app.add("--neigh-ttl-ms", c.port.neigh_ttl_ms,
		"lifetime of a resolved neighbour before re-resolution (the port table's neigh_ttl_ms) [30000]")
		.range(1u, 86400000u);
	app.add("--port", c.port.devargs,
		"the local device's DPDK port (the port table's devargs, e.g. net_memif0,role=client,socket=...); "
		"the peer is what is on its other end [none: an in-process net_ring pair]");
	std::vector<std::string> to_args;
	app.add("--to", to_args,
		"on a DPDK port: a destination address (repeat for several) of inspect and storm [the table's "
		"'to', else its static neighbours]");
	app.add("--ping-qpn", c.ping_qpn, "on a DPDK port: the peer's QP inspect sends each AH a datagram to "
					  "(rdgram-fwd reflects it) [0x100]")
		.range(2u, 0xfffffeu);
	app.add("--ping-qkey", c.ping_qkey, "on a DPDK port: those datagrams' Q_Key, and the local QP's (a reply "
					    "carries the replier's own) [0x11111111]")
		.range(0u, 0x7fffffffu);
	app.add("--driver", c.driver, "the driver: soft (the only one this tool serves: see docs/APPS.md) [soft]");
	app.add("--workers", c.workers,
		"poll threads, each on its own lcore with its own queue of both devices and its own AH client; "
		"storm's readiness watch and bench's lookups are split over / run on all of them; the main lcore "
		"is the last one taken, so -l 0,1 runs 2 [1]")
		.range(1u, 128u);
	app.add("--hold", c.hold_s, "seconds to keep running after the report, e.g. to read /rdgram/ telemetry; "
		"SIGINT/SIGTERM end it sooner [0]")
		.range(0.0, 86400.0);

	cli::command ins = app.subcommand("inspect", "create a set of AHs and print the registry table");
	ins.add("--dests", c.dests, "destinations with a static neighbour entry [4]").range(0u, 65536u);
	ins.add("--resolved", c.resolved, "destinations resolved by ARP/ND (the peer answers) [2]").range(0u, 1024u);
	ins.add("--flows", c.flows, "AHs per destination, each with its own flow label [1]").range(1u, 1u << 20);
	ins.add("--release", c.release, "of the AHs created, destroy this many again (cached, refcount 0) [1]")
		.range(0u, 1u << 24);
	ins.add("--timeout", c.timeout_s, "on a DPDK port: seconds to wait for the link, and for neighbours [30]")
		.range(0.1, 3600.0);

	cli::command ben = app.subcommand("bench", "AH create rates (one by one, batched, reuse) and lookup rate");
	ben.add("--count", c.count, "AHs per phase (three disjoint sets: needs capacity >= 3 x count) [10000]")
		.range(1u, 1u << 22);
	ben.add("--batch", c.batch, "AHs per create_ah_batch call [4096]").range(1u, 1u << 24);
	ben.add("--dests", c.storm_dests, "distinct destination addresses (the rest differ by flow label) [1024]")
		.range(1u, 1u << 24);
	ben.add("--lookup-seconds", c.lookup_s, "how long to run dest_cache bulk lookups [0.5]").range(0.01, 600.0);

	uint32_t storm_n = 0;
	cli::command sto = app.subcommand("storm", "create N AHs at once; time to all-ready, readiness p50/p99, memory");
	sto.add("N", storm_n, "AHs to create (no default: required)").required().range(1u, 1u << 24);
	sto.add("--batch", c.batch, "AHs per create_ah_batch call [4096]").range(1u, 1u << 24);
	sto.add("--dests", c.storm_dests, "distinct destination addresses (the rest differ by flow label) [1024]")
		.range(1u, 1u << 24);
	sto.flag("--resolve", c.storm_resolve,
		 "resolve the destinations by ARP/ND through the peer (at most 1024) instead of static "
		 "neighbours [off]");
	sto.add("--timeout", c.timeout_s, "seconds to wait for readiness (and for neighbours) [30]").range(0.1, 3600.0);

	/* Global options may also follow the subcommand. */
	for (cli::command *sub : {&ins, &ben, &sto})
		sub->fallthrough();

	if (int rc = app.parse(sa.app); rc >= 0)
		return rc;
	if (!to_args.empty())
		c.to.clear();
	for (const std::string &a : to_args) {
		wire::gid g;
		if (!parse_ip(a, &g) || g.is_multicast() || g.is_zero()) {
			fprintf(stderr, "rdgram-ah: --to %s: expected a unicast IPv4 or IPv6 address\n", a.c_str());
			return 2;
		}
		c.to.push_back(g);
	}
	const bool on_port = !c.port.devargs.empty();
	if (on_port && ben.parsed()) {
		fprintf(stderr, "rdgram-ah: bench measures the registry and the dest_cache, with no peer: run it "
				"without devargs (no --port)\n");
		return 2;
	}
	if (on_port && (ins.parsed() || sto.parsed()) && c.to.empty() && c.port.neighbours.empty()) {
		fprintf(stderr, "rdgram-ah: on a DPDK port, %s needs destinations: --to ADDR (the peer's address), "
				"or static neighbours in the port table\n", ins.parsed() ? "inspect" : "storm");
		return 2;
	}
	if (!on_port && ins.parsed() && c.dests + c.resolved == 0) {
		fprintf(stderr, "rdgram-ah: nothing to create\n");
		return 2;
	}
	if (!on_port && sto.parsed() && c.storm_resolve && c.storm_dests > 1024) {
		fprintf(stderr, "rdgram-ah: storm --resolve takes at most 1024 destinations (--dests)\n");
		return 2;
	}
	if (sto.parsed() && uint64_t(storm_n) > c.capacity) {
		fprintf(stderr, "rdgram-ah: storm of %u AHs above the registry capacity %u (--capacity)\n", storm_n,
			c.capacity);
		return 2;
	}

	apps::driver_kind drv;
	if (std::string err; apps::parse_driver(c.driver, &drv, &err) != 0) {
		fprintf(stderr, "rdgram-ah: %s\n", err.c_str());
		return 2;
	}
	if (drv != apps::driver_kind::soft) {
		/* The tool's host is a soft device (on a ring pair with a soft
		 * peer answering ARP/ND, or on a DPDK port), and inspect prints
		 * the soft AV (the frame header template); a verbs, mlx5 or EFA
		 * device resolves neighbours in the kernel or the device and has
		 * AVs of its own. */
		fprintf(stderr, "rdgram-ah: driver %s: rdgram-ah runs its host as a soft device (on an in-process "
				"ring pair with an ARP/ND peer, or on a DPDK port); it has no %s host (run rdgram-coll "
				"or rdgram-perf on it for AH storms there)\n", c.driver.c_str(), c.driver.c_str());
		return 2;
	}
	const ah_dests dests = plan_dests(c, ins.parsed(), sto.parsed(), storm_n);

	runtime rt;
	if (int rc = apps::start_runtime(rt, {.app = "rdgram-ah", .eal = sa.eal_given ? sa.eal : c.eal_args, .argv0 = argv[0],
					      .capture = apps::capture_of(c.capture)});
	    rc != 0)
		return rc;
	int status = 0;
	{
	host h(rt, c);
	std::vector<lcore_cpu> lcores;
	if (status == 0)
		status = pick_lcores(h, &lcores);
	if (status == 0)
		status = bring_up(h, lcores, dests.statics, dests.peer_addrs,
				  ins.parsed() ? dests.inspect : sto.parsed() ? dests.storm : dests.statics);
	if (status == 0) {
		/* The mode runs beside the poll threads; the report once they
		 * stopped, with each one's frame accounting. */
		inspect_result ir;
		bench_result br;
		storm_result sr;
		status = run_with_workers(h, [&] {
			if (ins.parsed())
				return run_inspect(h, dests.inspect, &ir);
			if (ben.parsed())
				return run_bench(h, &br);
			return run_storm(h, storm_n, dests.storm, &sr);
		});
		const std::vector<worker_frames> wf = worker_accounting(h);
		if (ins.parsed())
			print_inspect(c, ir, wf);
		else if (ben.parsed() && status != 2)
			print_bench(c, br, wf);
		else if (sto.parsed())
			print_storm(c, sr, wf);
		for (const worker_frames &f : wf)
			if (!f.closed && status == 0) {
				fprintf(stderr, "rdgram-ah: worker %u: its frames do not add up (above)\n", f.index);
				status = 1;
			}
		fflush(stdout);
		if (c.hold_s > 0) { /* SIGINT or SIGTERM ends the hold early */
			std::signal(SIGINT, on_hold_signal);
			std::signal(SIGTERM, on_hold_signal);
			const uint64_t end = rte_get_timer_cycles() + uint64_t(c.hold_s * double(rte_get_timer_hz()));
			while (!g_hold_stop.load() && rte_get_timer_cycles() < end)
				rte_delay_us_sleep(10000);
		}
	}
	if (tear_down(h) != 0 && status == 0)
		status = 1;
	}
	rt.fini();
	return status;
}
