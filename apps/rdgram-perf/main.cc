/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf: perftest-style UD latency (ping-pong, RTT/2) and bandwidth
 * (streaming) tests over rdgram drivers.
 *
 *   rdgram-perf [EAL args --] [options]
 *
 * With no arguments: an in-process loopback, two poll lcores joined by a
 * net_ring pair, through the software RoCEv2 driver, both tests.
 */
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "cli.h"
#include "perf_config.h"
#include "perf_cpu.h"
#include "perf_dests.h"
#include "perf_oob.h"
#include "perf_peer.h"
#include "perf_port.h"
#include "perf_rdma.h"
#include "perf_status.h"
#include "perf_tests.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "rdgram/telemetry.h"
#include "soft_device.h"

using namespace rdgram;
using namespace rdgram::perf;

namespace {

struct endpoint {
	const char *role;
	const endpoint_config *self;
	const endpoint_config *other;
	soft::soft_device dev;
	soft::soft_queue q;
	peer to{};
	/* txonly --dests: the prepared AHs, in the order they are sent. */
	std::vector<ah_handle> dests;
	lcore_cpu where{};
	/* Set while the device is a control-thread poller (ARP/ND, reclaim). */
	runtime *polled_by = nullptr;

	~endpoint()
	{
		/* Off the control thread's poller list before the device closes. */
		if (polled_by != nullptr)
			polled_by->ctl().remove_poller(&soft::soft_device::control_poller, &dev);
	}
};

/* Opens the soft device on port_id for an endpoint and creates, on the
 * control thread, the AH to its peer. */
int open_endpoint(runtime &rt, const perf_config &c, endpoint &e, uint16_t port_id)
{
	soft::soft_config sc;
	sc.port_id = port_id;
	sc.set_mac = true;
	sc.mac = e.self->mac;
	sc.addresses = {e.self->address};
	sc.pkey = c.pkey;
	sc.mtu = c.mtu;
	sc.max_ah = c.max_ah;
	/* The peer's MAC as a static neighbour when it is known (the config,
	 * or a soft peer's --oob record); a verbs peer does not know its MAC
	 * (its --oob record says 00:00:00:00:00:00): resolved by ARP/ND. */
	const bool peer_mac_known = !rte_is_zero_ether_addr(&e.other->mac);
	const bool with_dests = c.dests != 0 && c.test == "txonly" && e.self == &c.client;
	if (with_dests && !peer_mac_known) {
		fprintf(stderr, "rdgram-perf: --dests needs the peer's MAC (client.mac of the server's config)\n");
		return EINVAL;
	}
	if (with_dests) {
		/* One AH per destination plus the peer's own. */
		sc.neighbours = dest_neighbours(*e.other, *e.self, c.dests);
		sc.max_ah = std::max<uint32_t>(c.max_ah, c.dests + 1);
	} else if (peer_mac_known) {
		sc.neighbours = {{e.other->address, e.other->mac}};
	}
	sc.resolve = c.resolve;
	sc.neigh_ttl_ms = c.neigh_ttl_ms;
	sc.neigh_retry_ms = c.neigh_retry_ms;
	sc.neigh_retries = c.neigh_retries;
	sc.neigh_fail_hold_ms = c.neigh_fail_hold_ms;
	sc.qsbr = rt.qsbr();
	/* The AV replica goes on the poll thread's NUMA node. */
	sc.av_nodes = replica_nodes(rt.topology(), {e.where});
	if (int rc = e.dev.open(sc); rc != 0) {
		fprintf(stderr, "rdgram-perf: %s port: %s\n", e.role, e.dev.error().c_str());
		return rc;
	}
	/* The control thread answers ARP/ND for our address and reclaims AH
	 * slots (the poll thread of queue 0 carries the frames). */
	if (rt.ctl().add_poller(&soft::soft_device::control_poller, &e.dev) == 0)
		e.polled_by = &rt;
	e.dev.init_queue(0, e.q, sc.av_nodes[0]);
	e.q.add_qp(e.self->qpn, e.self->qkey);

	/* A static neighbour answers at once; an unknown MAC is resolved,
	 * this thread polling the queue meanwhile (ARP/ND answers come in on
	 * it), bounded by the run's timeout. */
	const auto pump = [&e] {
		recv_wc wcs[32];
		const uint16_t k = e.q.rx_burst(wcs, 32);
		for (uint16_t i = 0; i < k; i++)
			rte_pktmbuf_free(wcs[i].mbuf);
		e.q.tx_flush();
	};
	const uint64_t until = rte_rdtsc() + uint64_t(c.timeout_s * double(rte_get_tsc_hz()));
	ah_handle h = ah_null;
	std::string why;
	if (int err = soft_ah(rt, e.dev, e.other->address, pump, until, &h, &why); err != 0) {
		fprintf(stderr, "rdgram-perf: %s: %s\n", e.role, why.c_str());
		return err;
	}
	e.to = peer{h, e.other->qpn, e.other->qkey};
	if (with_dests)
		return create_dests(rt, e.dev, sc.neighbours, c.dest_order == "random", &e.dests);
	return 0;
}

struct run_ctx {
	const perf_config *c;
	runtime *rt;
	endpoint *ep;
	uint64_t deadline;
	bool ok = false;
	uint64_t served = 0;
	std::vector<lat_result> lat;
	std::vector<bw_result> bw;
	loop_hooks *hooks = nullptr;
	/* Loopback: the server's CPU clock, published by its thread once it
	 * runs, and the bandwidth test's CPU shares the client measured. */
	thread_clock clock{};
	std::atomic<bool> clock_ready{false};
	const run_ctx *server = nullptr;
	cpu_meter bw_cpu{};
};

/* The status line: printed by the control thread (a poller) every
 * interval from what the poll threads published (perf_status.h). */
struct status_printer {
	const perf_config *c;
	progress *prog;                               /* client side, or null */
	std::vector<const telemetry::qp_publisher *> qps;
	uint64_t start = 0, next = 0, interval = 0;
	uint64_t last_done = 0, last_tsc = 0;
	int last_phase = progress::idle;

	static bool poll(void *arg, uint64_t now)
	{
		auto *p = static_cast<status_printer *>(arg);
		if (now < p->next)
			return false;
		p->next = now + p->interval;
		p->print(now);
		return false;
	}
	void print(uint64_t now)
	{
		const double hz = double(rte_get_tsc_hz());
		uint64_t drops = 0, rx = 0;
		for (const auto *q : qps) {
			telemetry::qp_snapshot s;
			if (q->read(&s)) {
				drops += s.drops();
				rx += s.value("rx_pkts");
			}
		}
		const double el = double(now - start) / hz;
		if (prog == nullptr) { /* server: what arrived */
			const double rate = last_tsc ? double(rx - last_done) / (double(now - last_tsc) / hz) : 0;
			fprintf(stderr, " [%7.1f s] server: %lu received, %.0f/s, drops %lu\n", el,
				(unsigned long)rx, rate, (unsigned long)drops);
			last_done = rx;
			last_tsc = now;
			return;
		}
		const int phase = prog->phase.load(std::memory_order_relaxed);
		const uint64_t done = prog->done.load(std::memory_order_relaxed);
		if (phase == progress::idle)
			return;
		if (phase != last_phase)
			last_done = 0; /* the new phase counts from 0 */
		const double dt = last_tsc ? double(now - last_tsc) / hz : 0;
		const double rate = dt > 0 ? double(done - std::min(done, last_done)) / dt : 0;
		char lat[96] = "p50/p99 -";
		if (prog->hist.count() != 0)
			snprintf(lat, sizeof(lat), "p50 %.2f us, p99 %.2f us", double(prog->hist.quantile_ns(0.5)) / 1e3,
				 double(prog->hist.quantile_ns(0.99)) / 1e3);
		fprintf(stderr, " [%7.1f s] %s: %lu done, %.3f Mmsg/s, drops %lu, %s\n", el,
			phase == progress::lat ? "lat" : "bw", (unsigned long)done, rate / 1e6,
			(unsigned long)drops, lat);
		last_phase = phase;
		last_done = done;
		last_tsc = now;
	}
};

int server_main(void *arg)
{
	auto *x = static_cast<run_ctx *>(arg);
	x->rt->bind_this_thread(x->ep->where.cpu);
	x->clock = thread_clock::self();
	x->clock_ready.store(true, std::memory_order_release);
	unsigned tid = rte_lcore_id();
	poll_thread_online(x->rt->qsbr(), tid);
	loop_env env{x->rt->qsbr(), tid, x->deadline, x->hooks};
	x->ok = serve(x->ep->q, x->ep->to, x->c->inline_size, env, &x->served);
	if (x->hooks != nullptr && x->hooks->pub != nullptr) /* the final figures */
		x->hooks->pub->publish(x->ep->q.counters(), nullptr, rte_rdtsc());
	poll_thread_offline(x->rt->qsbr(), tid);
	return 0;
}

int client_main(void *arg)
{
	auto *x = static_cast<run_ctx *>(arg);
	const perf_config &c = *x->c;
	x->rt->bind_this_thread(x->ep->where.cpu);
	unsigned tid = rte_lcore_id();
	poll_thread_online(x->rt->qsbr(), tid);
	loop_env env{x->rt->qsbr(), tid, x->deadline, x->hooks};
	const bool txonly = c.test == "txonly";
	const bool do_lat = c.test == "lat" || c.test == "both", do_bw = c.test != "lat";
	x->ok = true;
	if (do_lat) {
		client_params cp{c.size, c.lat_iters, c.warmup, c.inline_size, c.tx_depth, c.use_imm, !do_bw, false};
		std::vector<double> samples;
		lat_result r;
		if (client_lat(x->ep->q, x->ep->dev.mempool(), x->ep->to, cp, env, samples, &r))
			x->lat.push_back(r);
		else
			x->ok = false;
	}
	if (do_bw && x->ok) {
		client_params cp{c.size, c.bw_iters, 0, c.inline_size, c.tx_depth, c.use_imm, true, txonly};
		if (!x->ep->dests.empty()) {
			cp.dests = x->ep->dests.data();
			cp.n_dests = uint32_t(x->ep->dests.size());
		}
		bw_result r;
		/* Who had the CPUs during the test (two clock reads each side
		 * of it, outside the loop). */
		x->bw_cpu.a = thread_clock::self();
		if (x->server != nullptr && x->server->clock_ready.load(std::memory_order_acquire))
			x->bw_cpu.b = x->server->clock;
		x->bw_cpu.start();
		const bool done = client_bw(x->ep->q, x->ep->dev.mempool(), x->ep->to, cp, env, &r);
		x->bw_cpu.stop();
		if (done)
			x->bw.push_back(r);
		else
			x->ok = false;
	}
	if (x->hooks != nullptr && x->hooks->pub != nullptr) /* the final figures */
		x->hooks->pub->publish(x->ep->q.counters(), nullptr, rte_rdtsc());
	poll_thread_offline(x->rt->qsbr(), tid);
	return 0;
}

/* --oob with the soft driver (rdgram's own rendezvous): swaps our
 * address, QPN, Q_Key and MAC for the peer's, written into *other. */
int oob_swap(const perf_config &c, const endpoint_config &self, endpoint_config *other)
{
	oob_addr me{}, peer{};
	memcpy(me.gid, self.address.raw, 16);
	me.qpn = self.qpn;
	me.qkey = self.qkey;
	memcpy(me.mac, self.mac.addr_bytes, 6);
	std::string err;
	if (int rc = oob_exchange(c.rdma.oob, c.mode == "server", me, c.timeout_s, &peer, &err); rc != 0) {
		fprintf(stderr, "rdgram-perf: --oob %s: %s\n", c.rdma.oob.c_str(), err.c_str());
		return rc;
	}
	memcpy(other->address.raw, peer.gid, 16);
	other->qpn = peer.qpn;
	other->qkey = peer.qkey;
	memcpy(other->mac.addr_bytes, peer.mac, 6);
	if (!c.json)
		printf(" rdgram-perf: --oob %s: peer QPN 0x%06x, GID %s, Q_Key 0x%x\n", c.rdma.oob.c_str(), other->qpn,
		       format_gid(other->address).c_str(), other->qkey);
	return 0;
}

/* SIGINT, SIGTERM: perf_tests.h's loops end as at their deadline. */
void on_stop_signal(int) { perf_stop.store(true, std::memory_order_relaxed); }

bool counted(const xstat_name &n, uint64_t v)
{
	return v != 0 && n.kind != counter_kind::traffic;
}

/* The queues' non-zero counters after the results (stdout flushed first,
 * so a pipe keeps the order): one line per role, "ROLE counters:
 * name=value ..." (scripts read it), then what each name means. */
void print_counters(const std::vector<std::pair<const char *, const soft::soft_counters *>> &qs)
{
	std::vector<const xstat_name *> seen;
	for (const auto &[role, k] : qs)
		k->for_each([&](const xstat_name &n, uint64_t v) {
			if (counted(n, v) &&
			    std::none_of(seen.begin(), seen.end(), [&](const xstat_name *p) { return strcmp(p->name, n.name) == 0; }))
				seen.push_back(&n);
		});
	fflush(stdout);
	if (seen.empty())
		return;
	fprintf(stderr, " queue counters, non-zero (packets and bytes left out):\n");
	for (const auto &q : qs) {
		/* A plain name, not a structured binding: clang before 16
		 * cannot capture a binding in the lambda below. */
		const auto &role = q.first;
		const auto &k = q.second;
		bool any = false;
		k->for_each([&](const xstat_name &n, uint64_t v) {
			if (!counted(n, v))
				return;
			if (!any)
				fprintf(stderr, " %s counters:", role);
			fprintf(stderr, " %s=%lu", n.name, (unsigned long)v);
			any = true;
		});
		if (any)
			fprintf(stderr, "\n");
	}
	for (const xstat_name *n : seen)
		fprintf(stderr, "   %-20s %s: %s\n", n->name,
			n->kind == counter_kind::drop ? "drop (messages lost)" : "event (not a loss)", n->desc);
}

} // namespace

int main(int argc, char **argv)
{
	split_args sa = split_command_line(argc, argv);
	perf_config c;

	cli::parser app{"rdgram-perf",
			"rdgram-perf: UD latency and bandwidth tests (perftest-style) over rdgram drivers.\n"
			"Usage: rdgram-perf [EAL args --] [options]. With no options: in-process loopback over "
			"a net_ring pair, latency then bandwidth.",
			34};
	std::string cfg_path;
	std::string test, mode;
	uint32_t size = 0, inline_size = 0, tx_depth = 0, cq_mod = 0;
	uint64_t iters = 0, warmup = 0;
	double timeout = 0;
	uint32_t ctl_nap_us = 0;
	bool json = false, imm = false, verbose = false;
	app.add("-c,--config", cfg_path, "TOML config file (see config/); options below override it");
	app.add("--test", test,
		"lat (ping-pong), bw (streaming), both, or txonly (client streams with no server: "
		"sender rate, e.g. on net_null) [both]")
		.one_of({"lat", "bw", "both", "txonly"});
	app.add("--mode", mode, "loopback (in-process), server or client [loopback]")
		.one_of({"loopback", "server", "client"});
	app.add("-s,--size", size, "payload bytes per message [64]").range(0u, 4096u);
	app.add("-n,--iters", iters, "iterations (lat default 10000, bw default 1000000)")
		.range(uint64_t(1), uint64_t(10000000000ull));
	app.add("--warmup", warmup, "latency pings not measured [1000]");
	app.add("-I,--inline-size", inline_size,
		"payloads up to this size are sent inline (copied from the app); larger ones from an "
		"mbuf the app fills [236]")
		.range(0u, 4096u);
	app.add("-t,--tx-depth", tx_depth, "send WRs posted per burst (postlist; soft: at most 32) [128]")
		.range(1u, 65536u);
	app.add("-Q,--cq-mod", cq_mod,
		"signal one send in N; the soft driver has no send CQ, so it has no effect there [64]")
		.range(1u, 1024u);
	app.add("--timeout", timeout,
		"seconds after which every loop stops by itself [60]; SIGINT/SIGTERM stop it sooner "
		"(exit 130, the completed tests are reported)")
		.range(0.1, 86400.0);
	app.add("--ctl-nap-us", ctl_nap_us,
		"the control thread's longest idle nap, microseconds: less when it has a core of its own, "
		"more when it shares one with a poll thread (each wake-up preempts that thread) [2000]")
		.range(20u, 1000000u);
	std::string port_args;
	app.add("--port", port_args,
		"DPDK port devargs for this role, e.g. net_memif0,role=server (overrides the config's "
		"[server|client].vdev; a port given with the EAL's --vdev is found by name)");
	std::string oob, oob_proto;
	app.add("--oob", oob,
		"HOST:PORT of a TCP exchange of addresses before the test, as perftest does: the server "
		"listens there, the client connects (overrides [rdma] oob) [none]");
	app.add("--oob-proto", oob_proto,
		"what --oob speaks: rdgram (rdgram-perf's own rendezvous and tests), perftest (be the "
		"peer of ib_send_lat / ib_send_bw -c UD, perftest 6.06's exchange) or ud_pingpong (be the "
		"peer of ibv_ud_pingpong) (overrides [rdma] oob_proto) [rdgram]")
		.one_of({"rdgram", "perftest", "ud_pingpong"});
	uint32_t dests = 0;
	std::string dest_order;
	app.add("--dests", dests,
		"txonly: send to N prepared destinations (distinct GIDs from the server's address on, "
		"each a static neighbour and an AH; max_ah is raised to N + 1) instead of the one peer "
		"(overrides [perf] dests) [0: the peer only]")
		.range(1u, 1u << 24);
	app.add("--dest-order", dest_order,
		"txonly --dests: rr (round robin) or random (a permutation made before the loop) "
		"(overrides [perf] dest_order) [rr]")
		.one_of({"rr", "random"});
	app.flag("--imm", imm, "send with immediate data (SEND_ONLY_WITH_IMMEDIATE)");
	app.flag("--json", json, "print results as JSON lines instead of tables");
	app.flag("-v,--verbose", verbose,
		 "DPDK's start-up messages too (EAL, telemetry, libraries and PMDs at DPDK's own log levels; "
		 "by default they are at WARNING). An EAL --log-level before -- sets the levels instead");
	double status_interval = 1.0;
	std::string hist_csv, hist_plot;
	app.add("--status-interval", status_interval,
		"seconds between status lines on stderr (rate, drops, p50/p99 so far) while a test runs; "
		"0: none [1]")
		.range(0.0, 3600.0);
	app.add("--hist-csv", hist_csv,
		"write the latency histogram (RTT/2) as CSV: lower_ns,count,cumulative_fraction, one line "
		"per bucket (log-linear, 16 per power of two) [none]");
	app.add("--hist-plot", hist_plot,
		"draw the latency histogram with gnuplot into FILE.svg or FILE.png (uses --hist-csv, or a "
		"CSV next to FILE) [none]");
	if (int rc = app.parse(sa.app); rc >= 0)
		return rc;
	try {
		if (!cfg_path.empty())
			load_perf_config(cfg_path, c);
	} catch (const config_error &e) {
		fprintf(stderr, "rdgram-perf: %s\n", e.what());
		return 2;
	}
	if (!test.empty())
		c.test = test;
	if (!mode.empty())
		c.mode = mode;
	if (app.count("--size"))
		c.size = size;
	if (app.count("--iters"))
		c.lat_iters = c.bw_iters = iters;
	if (app.count("--warmup"))
		c.warmup = warmup;
	if (app.count("--inline-size"))
		c.inline_size = inline_size;
	if (app.count("--tx-depth"))
		c.tx_depth = tx_depth;
	if (app.count("--cq-mod"))
		c.cq_mod = cq_mod;
	if (app.count("--timeout"))
		c.timeout_s = timeout;
	if (app.count("--ctl-nap-us"))
		c.ctl_max_nap_us = ctl_nap_us;
	c.json |= json;
	if (app.count("--dests"))
		c.dests = dests;
	if (!dest_order.empty())
		c.dest_order = dest_order;
	if (c.dests != 0 && (c.test != "txonly" || c.mode != "client" || c.driver != "soft")) {
		fprintf(stderr, "rdgram-perf: --dests needs --test txonly --mode client with the soft driver\n");
		return 2;
	}
	if (!oob.empty())
		c.rdma.oob = oob;
	if (!oob_proto.empty())
		c.rdma.oob_proto = oob_proto;
	if (!c.rdma.oob.empty() && c.mode == "loopback") {
		fprintf(stderr, "rdgram-perf: --oob needs --mode server or --mode client\n");
		return 2;
	}
	if (!port_args.empty())
		(c.mode == "server" ? c.server : c.client).vdev = port_args;
	c.use_imm |= imm;
	if (peer_proto(c) && !peer_config_ok(c))
		return 2;
	if (c.size > c.mtu) {
		fprintf(stderr, "rdgram-perf: size %u is above the path MTU %u\n", c.size, c.mtu);
		return 2;
	}
	if (c.driver == "soft" && c.mode != "loopback" &&
	    (c.mode == "server" ? c.server.vdev : c.client.vdev).empty()) {
		fprintf(stderr, "rdgram-perf: mode %s needs %s.vdev in the config (a DPDK port, e.g. net_memif)\n",
			c.mode.c_str(), c.mode.c_str());
		return 2;
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

	runtime rt;
	rt.set_verbose(verbose);
	const std::string &lc = c.mode == "server" ? c.server.lcores : c.mode == "client" ? c.client.lcores : "";
	int init_rc;
	{
		/* The runtime directory and the telemetry socket are born
		 * owner-only (docs/SECURITY.md), then chmod-ed to be sure. */
		telemetry::private_umask um;
		init_rc = rt.init(sa.eal_given ? sa.eal : c.eal_args, argv[0], lc);
	}
	if (init_rc != 0) {
		fprintf(stderr, "rdgram-perf: %s\n", rt.error().c_str());
		return 1;
	}
	telemetry::register_log_types();
	rt.ctl().set_max_nap(long(c.ctl_max_nap_us) * 1000); /* range checked by the parsers */
	{
		std::string err;
		if (int rc = telemetry::secure_socket(&err); rc != 0 && rc != ENOENT) {
			fprintf(stderr, "rdgram-perf: %s\n", err.c_str());
			return 1;
		}
	}
	const uint64_t deadline = rte_rdtsc() + uint64_t(c.timeout_s * double(rte_get_tsc_hz()));
	/* Ctrl-C (or a script's kill) ends every loop as the deadline does; the
	 * tests that completed are still reported. */
	std::signal(SIGINT, on_stop_signal);
	std::signal(SIGTERM, on_stop_signal);
	if (c.driver != "soft") { /* verbs or mlx5: perf_rdma.cc */
		const int st = run_rdma(rt, c, deadline);
		rt.fini();
		return st;
	}
	if (peer_proto(c)) { /* the peer of perftest or ibv_ud_pingpong: perf_peer_soft.cc */
		const int st = run_soft_peer(rt, c, deadline);
		rt.fini();
		return st;
	}
	int status = 0;
	{
		endpoint srv{"server", &c.server, &c.client, {}, {}, {}, {}};
		endpoint cli{"client", &c.client, &c.server, {}, {}, {}, {}};
		run_ctx sx{&c, &rt, &srv, deadline, false, 0, {}, {}};
		run_ctx cx{&c, &rt, &cli, deadline, false, 0, {}, {}};
		cx.server = &sx;
		/* Progress for the status line and /rdgram/ telemetry. */
		progress prog;
		telemetry::qp_publisher srv_pub, cli_pub;
		loop_hooks srv_hooks{nullptr, &srv_pub}, cli_hooks{&prog, &cli_pub};
		sx.hooks = &srv_hooks;
		cx.hooks = &cli_hooks;
		status_printer stline{&c, nullptr, {}};
		double line_ns_before = -1, line_ns_after = -1; /* loopback: line_probe */
		bool status_on = false;
		/* After the endpoints are open: exposes them, starts the status line. */
		auto expose = [&](std::vector<endpoint *> eps) {
			telemetry::attachment a;
			a.app = "rdgram-perf";
			a.ctl = &rt.ctl();
			for (endpoint *e : eps) {
				const bool is_srv = e == &srv;
				a.lcores.push_back({e->where.lcore, e->where.cpu, numa_of_cpu(rt.topology(), e->where.cpu),
						    e->role});
				char mac[RTE_ETHER_ADDR_FMT_SIZE];
				rte_ether_format_addr(mac, sizeof(mac), &e->dev.mac());
				a.ports.push_back({&e->dev, int(e->dev.port_id()), e->role, mac});
				a.qps.push_back({std::string(e->role) + "_qp0", e->where.lcore, int(e->dev.port_id()),
						 e->self->qpn, is_srv ? &srv_pub : &cli_pub});
				a.ah_devices.push_back(&e->dev);
				stline.qps.push_back(is_srv ? &srv_pub : &cli_pub);
				if (!is_srv)
					stline.prog = &prog;
			}
			if (int rc = telemetry::attach(std::move(a)); rc != 0)
				fprintf(stderr, "rdgram-perf: telemetry not attached: %s\n", strerror(rc));
			if (status_interval > 0) {
				stline.interval = uint64_t(status_interval * double(rte_get_tsc_hz()));
				stline.start = rte_get_tsc_cycles();
				stline.next = stline.start + stline.interval;
				stline.last_tsc = stline.start;
				status_on = rt.ctl().add_poller(&status_printer::poll, &stline) == 0;
			}
		};
		/* Before anything exposed goes away. */
		auto unexpose = [&] {
			if (status_on)
				rt.ctl().remove_poller(&status_printer::poll, &stline);
			status_on = false;
			telemetry::detach();
		};

		if (c.mode == "loopback") {
			rte_ring *r0 = rte_ring_create("rdgram_lo0", 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
			rte_ring *r1 = rte_ring_create("rdgram_lo1", 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
			int ps = r0 && r1 ? rte_eth_from_rings("rdgram_srv", &r0, 1, &r1, 1, 0) : -1;
			int pc = r0 && r1 ? rte_eth_from_rings("rdgram_cli", &r1, 1, &r0, 1, 0) : -1;
			if (ps < 0 || pc < 0) {
				fprintf(stderr, "rdgram-perf: cannot create the net_ring loopback pair\n");
				return 1;
			}
			auto lcores = rt.poll_lcores(rte_eth_dev_socket_id(uint16_t(ps)));
			/* The client runs on the main lcore, the server on a worker. */
			lcore_cpu main_l{rte_get_main_lcore(), unsigned(rte_lcore_to_cpu_id(int(rte_get_main_lcore())))};
			const lcore_cpu *worker = nullptr;
			for (const auto &l : lcores)
				if (l.lcore != main_l.lcore) {
					worker = &l;
					break;
				}
			if (worker == nullptr) {
				fprintf(stderr, "rdgram-perf: loopback needs two lcores (EAL -l with two CPUs)\n");
				return 2;
			}
			srv.where = *worker;
			cli.where = main_l;
			if (open_endpoint(rt, c, srv, uint16_t(ps)) != 0 || open_endpoint(rt, c, cli, uint16_t(pc)) != 0)
				return 1;
			expose({&srv, &cli});
			if (!c.json)
				printf(" rdgram-perf: loopback, soft RoCEv2 driver over net_ring, %s, server lcore %u "
				       "(cpu %u), client lcore %u (cpu %u)\n",
				       c.server.address.is_v4_mapped() ? "IPv4" : "IPv6", srv.where.lcore,
				       srv.where.cpu, cli.where.lcore, cli.where.cpu);
			fflush(stdout); /* before the status lines (stderr) */
			/* The two CPUs' cache-line round trip, before and after
			 * the tests (a few ms each; at most 1 s). */
			auto probe = [&] {
				line_probe lp;
				lp.deadline = rte_rdtsc() + rte_get_tsc_hz();
				launch_on_lcore(line_probe::echo, &lp, srv.where.lcore);
				const double ns = lp.run();
				wait_on_lcore(srv.where.lcore);
				return ns;
			};
			if (!c.json)
				line_ns_before = probe();
			launch_on_lcore(server_main, &sx, srv.where.lcore);
			client_main(&cx);
			wait_on_lcore(srv.where.lcore);
			if (!c.json)
				line_ns_after = probe();
		} else {
			endpoint &me = c.mode == "server" ? srv : cli;
			/* --oob: the peer's address, QPN and MAC from it instead
			 * of the config (perf_oob.h). */
			endpoint_config other = *me.other;
			if (!c.rdma.oob.empty()) {
				if (oob_swap(c, *me.self, &other) != 0)
					return 1;
				me.other = &other;
			}
			uint16_t port;
			if (std::string err; apps::probe_port(me.self->vdev, &port, &err) != 0) {
				fprintf(stderr, "rdgram-perf: %s\n", err.c_str());
				return 1;
			}
			auto lcores = rt.poll_lcores(rte_eth_dev_socket_id(port));
			me.where = {rte_get_main_lcore(), unsigned(rte_lcore_to_cpu_id(int(rte_get_main_lcore())))};
			if (open_endpoint(rt, c, me, port) != 0)
				return 1;
			if (c.mode == "client" && !wait_link_up(port, deadline)) {
				fprintf(stderr, "rdgram-perf: link to the server never came up (is it running?)\n");
				return 1;
			}
			expose({&me});
			if (!c.json)
				printf(" rdgram-perf: %s on %s, lcore %u (cpu %u)\n", c.mode.c_str(),
				       me.self->vdev.c_str(), me.where.lcore, me.where.cpu);
			fflush(stdout);
			if (c.mode == "server") {
				server_main(&sx);
				if (!c.json)
					printf(" server: answered %lu data messages in the last test%s\n",
					       (unsigned long)sx.served, sx.ok ? "" : " (stopped at the timeout)");
			} else {
				client_main(&cx);
			}
		}
		unexpose();
		const bool is_client = c.mode != "server";
		if (is_client) {
			if (c.json) {
				for (const auto &r : cx.lat)
					printf("%s\n", lat_json(r).c_str());
				for (const auto &r : cx.bw)
					printf("%s\n", bw_json(r).c_str());
			} else {
				if (!cx.lat.empty())
					print_lat_table(stdout, cx.lat);
				if (!cx.bw.empty())
					print_bw_table(stdout, cx.bw);
				if (!cx.bw.empty() && c.mode == "loopback")
					print_bw_limits(stdout, cx.bw_cpu, cli.where.cpu, srv.where.cpu,
							(unsigned long)cli.q.counters().tx_port_full, line_ns_before,
							line_ns_after);
			}
			for (const auto &r : cx.lat)
				if (r.lost != 0)
					fprintf(stderr, " latency: %lu pings timed out and were re-sent\n",
						(unsigned long)r.lost);
			if (!cx.ok && perf_stop.load()) {
				fprintf(stderr, "rdgram-perf: interrupted\n");
				status = 130;
			} else if (!cx.ok) {
				fprintf(stderr, "rdgram-perf: the test did not complete before the %.1f s timeout\n",
					c.timeout_s);
				status = 1;
			}
		} else if (!sx.ok) {
			status = perf_stop.load() ? 130 : 1;
		}
		if (!cli.dests.empty()) {
			/* Every message accounted for: sent, or counted as a drop
			 * above; every mbuf back in the pool (inline sends). */
			rte_mempool *mp = cli.dev.mempool();
			const unsigned avail = rte_mempool_avail_count(mp), size = mp->size;
			const uint64_t sent = cx.bw.empty() ? 0 : cx.bw[0].iterations;
			fprintf(stderr,
				" txonly: %zu destinations, %s order, %lu messages (%.1f per destination), "
				"mbufs in the pool %u of %u\n",
				cli.dests.size(), c.dest_order.c_str(), (unsigned long)sent,
				double(sent) / double(cli.dests.size()), avail, size);
			if (avail != size && status == 0) {
				fprintf(stderr, "rdgram-perf: %u mbufs not back in the pool\n", size - avail);
				status = 1;
			}
		}
		if (c.mode == "loopback")
			print_counters({{"server", &srv.q.counters()}, {"client", &cli.q.counters()}});
		else
			print_counters({{c.mode.c_str(), &(c.mode == "server" ? srv : cli).q.counters()}});
		if (is_client && !hist_csv.empty()) {
			if (int rc = write_hist_csv(prog.hist, hist_csv); rc != 0) {
				fprintf(stderr, "rdgram-perf: cannot write %s: %s\n", hist_csv.c_str(), strerror(rc));
				status = status ? status : 1;
			} else if (!c.json) {
				printf(" latency histogram: %lu samples -> %s\n", (unsigned long)prog.hist.count(),
				       hist_csv.c_str());
			}
			if (!hist_plot.empty() && access(hist_csv.c_str(), F_OK) == 0) {
				std::string err;
				char title[128];
				snprintf(title, sizeof(title), "rdgram-perf RTT/2, %u-byte payloads, %lu samples", c.size,
					 (unsigned long)prog.hist.count());
				if (plot_hist(hist_csv, hist_plot, title, &err) != 0) {
					fprintf(stderr, "rdgram-perf: --hist-plot: %s\n", err.c_str());
					status = status ? status : 3;
				} else if (!c.json) {
					printf(" latency plot -> %s\n", hist_plot.c_str());
				}
			}
		}
		fflush(stdout);
		rt.ctl().call([&] {
			srv.dev.destroy_ah(srv.to.ah);
			cli.dev.destroy_ah(cli.to.ah);
			for (ah_handle h : cli.dests)
				cli.dev.destroy_ah(h);
		});
	}
	rt.fini();
	return status;
}
