/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd: a RoCEv2 UD reflector / forwarder appliance on any DPDK port
 * (net_pcap to replay a capture, net_ring, net_memif, af_packet, a NIC).
 *
 *   rdgram-fwd [EAL args --] [options]
 *
 * The poll loop runs on a worker lcore (fwd_loop.h); the main thread only
 * starts things, watches signals and the clock, and prints counters from
 * snapshots the poll thread takes when asked.
 */
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include "cli.h"
#include "fwd_config.h"
#include "fwd_loop.h"
#include "fwd_report.h"
#include "port.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "soft_device.h"

using namespace rdgram;
using namespace rdgram::fwd;

namespace {

/* Set by signal handlers, read by the main thread: nothing is printed or
 * allocated in a handler. */
volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_dump = 0;

void on_stop(int) { g_stop = 1; }
void on_dump(int) { g_dump = 1; }

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

int sgid_for(const port_config &p, const wire::gid &dst)
{
	for (size_t i = 0; i < p.addresses.size(); i++)
		if (p.addresses[i].is_v4_mapped() == dst.is_v4_mapped())
			return int(i);
	return -1;
}

struct poll_arg {
	runtime *rt;
	loop_ctx *ctx;
	unsigned cpu;
};

int poll_main(void *a)
{
	auto *x = static_cast<poll_arg *>(a);
	x->rt->bind_this_thread(x->cpu);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(x->rt->qsbr(), tid);
	x->ctx->run(tid);
	poll_thread_offline(x->rt->qsbr(), tid);
	return 0;
}

void sleep_ms(long ms)
{
	timespec ts{ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, nullptr);
}

/* Port-level counters, read on the main thread: ethdev statistics, and the
 * AH service's and neighbour table's, which live on the control thread and
 * are copied there. */
std::vector<port_report> port_reports(runtime &rt, const fwd_config &c,
				      const std::vector<std::unique_ptr<port_rt>> &ports)
{
	std::vector<port_report> out;
	for (size_t p = 0; p < ports.size(); p++) {
		port_rt &pr = *ports[p];
		port_report r{&c.ports[p], pr.port_id, false, {}, {}, {}};
		r.have_eth = rte_eth_stats_get(pr.port_id, &r.eth) == 0;
		if (pr.svc_up)
			r.ahs = pr.svc.stats();
		rt.ctl().call([&] { r.neigh = pr.dev.neigh_stats(); });
		out.push_back(r);
	}
	return out;
}

/* The table on stdout and, with --stats-json, the same as JSON (written to
 * a temporary file and renamed, so a reader never sees half a file). */
int report(const fwd_config &c, const snapshot &s, const std::vector<port_report> &pr, const char *why)
{
	print_table(stdout, c, s, pr, why);
	if (c.stats_json.empty())
		return 0;
	const std::string tmp = c.stats_json + ".tmp";
	FILE *f = fopen(tmp.c_str(), "w");
	if (f == nullptr) {
		fprintf(stderr, "rdgram-fwd: cannot write %s: %s\n", tmp.c_str(), strerror(errno));
		return 1;
	}
	write_json(f, c, s, pr, why);
	if (fclose(f) != 0 || rename(tmp.c_str(), c.stats_json.c_str()) != 0) {
		fprintf(stderr, "rdgram-fwd: cannot write %s: %s\n", c.stats_json.c_str(), strerror(errno));
		return 1;
	}
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	split_args sa = split_command_line(argc, argv);
	fwd_config c;

	cli::parser app{"rdgram-fwd",
			"rdgram-fwd: RoCEv2 UD reflector and forwarder on any DPDK port (soft RoCEv2 driver).\n"
			"Usage: rdgram-fwd [EAL args --] [options]. Needs two lcores: the poll loop runs on a "
			"worker, the main lcore prints counters.\n"
			"reflect: every well-formed packet goes back to its sender (reply AH from the completion, "
			"cached); forward: the first matching [[rule]] sends it to a peer.\n"
			"Counters are printed on exit and on SIGUSR1; SIGINT/SIGTERM stop.",
			36};
	std::string cfg_path, mode, stats_json, port_args;
	double duration = 0, idle = 0, interval = 0;
	uint64_t max_packets = 0;
	app.add("-c,--config", cfg_path,
		"TOML config file (see config/rdgram-fwd.toml); options below override it [none]");
	app.add("--mode", mode, "reflect or forward (forward needs [[rule]]s and [peers]) [reflect]")
		.one_of({"reflect", "forward"});
	app.add("--stats-json", stats_json, "also write the counters as JSON to FILE, on exit and on SIGUSR1 [none]");
	app.add("--duration", duration, "stop after this many seconds; 0: run until a signal [0]").range(0.0, 1e9);
	app.add("--max-packets", max_packets, "stop after this many delivered (well-formed) packets; 0: no limit [0]");
	app.add("--idle-exit", idle,
		"stop once no frame arrived and nothing waited for this many seconds (ends a pcap "
		"replay); 0: never [0]")
		.range(0.0, 1e9);
	app.add("--stats-interval", interval,
		"also print the counters every N seconds; 0: only on exit and SIGUSR1 [0]")
		.range(0.0, 1e9);
	app.add("--port", port_args,
		"devargs of the first port, e.g. net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap (overrides "
		"[[port]] device; with no [[port]] in the config: MAC 02:00:00:00:00:01, address "
		"10.0.0.1, QP 0x100 with Q_Key 0x11111111) [none]");
	if (int rc = app.parse(sa.app); rc >= 0)
		return rc;
	try {
		if (!cfg_path.empty())
			load_fwd_config(cfg_path, c);
		if (!mode.empty())
			c.mode = mode;
		if (app.count("--duration"))
			c.duration_s = duration;
		if (app.count("--max-packets"))
			c.max_packets = max_packets;
		if (app.count("--idle-exit"))
			c.idle_exit_s = idle;
		if (app.count("--stats-interval"))
			c.stats_interval_s = interval;
		if (!stats_json.empty())
			c.stats_json = stats_json;
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
			c.ports[0].device = port_args;
		}
		check_fwd_config(c);
		if (c.ports.size() > max_ports || c.peers.size() > max_peers || c.rules.size() > max_rules)
			throw config_error("at most " + std::to_string(max_ports) + " ports, " +
					   std::to_string(max_peers) + " peers and " + std::to_string(max_rules) +
					   " rules");
	} catch (const config_error &e) {
		fprintf(stderr, "rdgram-fwd: %s\n", e.what());
		return 2;
	}

	runtime rt;
	if (rt.init(sa.eal_given ? sa.eal : c.eal_args, argv[0]) != 0) {
		fprintf(stderr, "rdgram-fwd: %s\n", rt.error().c_str());
		return 1;
	}
	int status = 0;
	{
		auto ctx = std::make_unique<loop_ctx>();
		std::vector<std::unique_ptr<port_rt>> ports;
		const unsigned main_lcore = rte_get_main_lcore();
		const lcore_cpu *worker = nullptr;
		for (size_t p = 0; p < c.ports.size(); p++) {
			auto pr = std::make_unique<port_rt>();
			pr->cfg = &c.ports[p];
			if (std::string err; apps::probe_port(c.ports[p].device, &pr->port_id, &err) != 0) {
				fprintf(stderr, "rdgram-fwd: %s\n", err.c_str());
				return 1;
			}
			ports.push_back(std::move(pr));
		}
		/* The poll lcore: the first worker in NUMA order of the first port. */
		const std::vector<lcore_cpu> lcores = rt.poll_lcores(rte_eth_dev_socket_id(ports[0]->port_id));
		for (const auto &l : lcores)
			if (l.lcore != main_lcore) {
				worker = &l;
				break;
			}
		if (worker == nullptr) {
			fprintf(stderr, "rdgram-fwd: needs two lcores (EAL -l with two CPUs): the poll loop runs on a "
					"worker\n");
			return 2;
		}
		const std::vector<int> nodes = replica_nodes(rt.topology(), {*worker});

		for (size_t p = 0; p < c.ports.size(); p++) {
			port_rt &pr = *ports[p];
			const port_config &pc = c.ports[p];
			soft::soft_config sc;
			sc.port_id = pr.port_id;
			sc.set_mac = pc.set_mac;
			sc.mac = pc.mac;
			sc.addresses = pc.addresses;
			sc.pkey = pc.pkey;
			sc.mtu = pc.mtu;
			sc.max_ah = pc.max_ah;
			sc.resolve = pc.resolve;
			sc.nb_mbufs = pc.nb_mbufs;
			for (const auto &n : pc.neighbours)
				sc.neighbours.push_back({n.ip, n.mac});
			/* A peer's configured MAC is a static neighbour of its egress port. */
			for (const auto &pe : c.peers)
				if (pe.mac && (pe.port == pc.name || (pe.port.empty() && p == 0)))
					sc.neighbours.push_back({pe.ip, *pe.mac});
			sc.qsbr = rt.qsbr();
			sc.av_nodes = nodes;
			if (int rc = pr.dev.open(sc); rc != 0) {
				fprintf(stderr, "rdgram-fwd: port %s: %s\n", pc.name.c_str(), pr.dev.error().c_str());
				return 1;
			}
			/* The AH service's control-thread poller also runs the
			 * device's housekeeping (ARP/ND, reclamation). */
			ah_service_config asc;
			asc.capacity = pc.max_ah;
			asc.qsbr = rt.qsbr();
			asc.socket = nodes.empty() ? SOCKET_ID_ANY : nodes[0];
			if (int rc = pr.svc.start(pr.dev, rt.ctl(), asc); rc != 0) {
				fprintf(stderr, "rdgram-fwd: port %s: AH service: %s\n", pc.name.c_str(), strerror(rc));
				return 1;
			}
			pr.svc_up = true;
			pr.dev.init_queue(0, pr.st.q, asc.socket);
			for (const auto &q : pc.qps) {
				const unsigned i = pr.st.nqp;
				if (int rc = pr.st.q.add_qp(q.qpn, q.qkey); rc != 0) {
					fprintf(stderr, "rdgram-fwd: port %s: QP 0x%x: %s\n", pc.name.c_str(), q.qpn,
						strerror(rc));
					return 1;
				}
				pr.st.qpn[i] = q.qpn;
				pr.st.qkey[i] = q.qkey;
				ah_client_config cc;
				cc.max_dests = c.pending_dests;
				cc.max_per_dest = c.pending_per_dest;
				cc.max_total = c.pending_total;
				cc.timeout_us = uint64_t(c.pending_timeout_ms) * 1000;
				cc.mp = pr.dev.mempool();
				cc.socket = asc.socket;
				if (int rc = pr.svc.add_client(pr.st.cl[i], cc); rc != 0) {
					fprintf(stderr, "rdgram-fwd: port %s: reply path: %s\n", pc.name.c_str(), strerror(rc));
					return 1;
				}
				pr.nclients++;
				pr.st.nqp++;
			}
			ctx->ports[p] = &pr.st;
		}
		ctx->nports = unsigned(ports.size());

		/* Peers: the key the poll thread sends to; with a configured MAC
		 * the AH is created now and held, so the first packet hits. */
		for (size_t i = 0; i < c.peers.size(); i++) {
			const peer_config &pe = c.peers[i];
			unsigned e = 0;
			for (size_t p = 0; p < c.ports.size(); p++)
				if (c.ports[p].name == pe.port)
					e = unsigned(p);
			ibv_ah_attr a{};
			a.is_global = 1;
			a.port_num = 1;
			a.grh.sgid_index = uint8_t(sgid_for(c.ports[e], pe.ip));
			a.grh.hop_limit = pe.hop_limit;
			a.grh.traffic_class = pe.traffic_class;
			memcpy(a.grh.dgid.raw, pe.ip.raw, 16);
			peer_state &ps = ctx->peers[i];
			ps.key = ah_key::of(a);
			ps.port = e;
			ps.qpn = pe.qpn;
			ps.keep_qkey = !pe.qkey.has_value();
			ps.qkey = pe.qkey.value_or(0);
			if (pe.mac) {
				int err = 0;
				ah_handle h = ports[e]->svc.create_ah(a, &err);
				if (err != 0) {
					fprintf(stderr, "rdgram-fwd: peer %s (%s): creating its AH failed: %s\n",
						pe.name.c_str(), format_gid(pe.ip).c_str(), strerror(err));
					return 1;
				}
				ports[e]->held.push_back(h);
			}
		}
		ctx->npeers = unsigned(c.peers.size());
		for (size_t r = 0; r < c.rules.size(); r++) {
			const rule_config &ru = c.rules[r];
			rule_state &rs = ctx->rules[r];
			rs.has_qpn = ru.match_qpn.has_value();
			rs.qpn = ru.match_qpn.value_or(0);
			rs.has_qkey = ru.match_qkey.has_value();
			rs.qkey = ru.match_qkey.value_or(0);
			rs.rewrite = ru.rewrite_qkey.has_value();
			rs.new_qkey = ru.rewrite_qkey.value_or(0);
			for (size_t i = 0; i < c.peers.size(); i++)
				if (c.peers[i].name == ru.to)
					rs.peer = unsigned(i);
		}
		ctx->nrules = unsigned(c.rules.size());
		ctx->reflect = c.mode == "reflect";
		ctx->qsbr = rt.qsbr();
		ctx->max_packets = c.max_packets;
		const double hz = double(rte_get_tsc_hz());
		ctx->duration_cyc = uint64_t(c.duration_s * hz);
		ctx->idle_cyc = uint64_t(c.idle_exit_s * hz);
		ctx->drain_cyc = uint64_t(double(c.pending_timeout_ms) * 1e-3 * hz) + uint64_t(0.1 * hz);

		std::signal(SIGINT, on_stop);
		std::signal(SIGTERM, on_stop);
		std::signal(SIGUSR1, on_dump);

		printf(" rdgram-fwd: %s mode, %zu port(s), poll lcore %u (cpu %u)", c.mode.c_str(), ports.size(),
		       worker->lcore, worker->cpu);
		for (size_t p = 0; p < ports.size(); p++)
			printf("%s %s=%s", p ? "," : ":", c.ports[p].name.c_str(), c.ports[p].device.c_str());
		printf("\n");
		fflush(stdout);

		poll_arg pa{&rt, ctx.get(), worker->cpu};
		if (launch_on_lcore(poll_main, &pa, worker->lcore) != 0) {
			fprintf(stderr, "rdgram-fwd: cannot launch the poll lcore\n");
			return 1;
		}
		const uint64_t interval_cyc = uint64_t(c.stats_interval_s * hz);
		uint64_t next_print = interval_cyc != 0 ? rte_get_tsc_cycles() + interval_cyc : UINT64_MAX;
		while (!ctx->done.load(std::memory_order_acquire)) {
			sleep_ms(10);
			if (g_stop)
				ctx->stop.store(true, std::memory_order_relaxed);
			const bool timed = rte_get_tsc_cycles() >= next_print;
			if (g_dump || timed) {
				g_dump = 0;
				if (timed)
					next_print += interval_cyc;
				/* Ask the poll thread for a copy; it answers within one loop. */
				const uint32_t req = ctx->snap_req.load(std::memory_order_relaxed) + 1;
				ctx->snap_req.store(req, std::memory_order_release);
				while (ctx->snap_ack.load(std::memory_order_acquire) != req &&
				       !ctx->done.load(std::memory_order_acquire))
					sleep_ms(1);
				if (ctx->snap_ack.load(std::memory_order_acquire) == req)
					status |= report(c, ctx->snap, port_reports(rt, c, ports), "running");
			}
		}
		wait_on_lcore(worker->lcore);
		/* Replies still waiting are dropped (counted as pend_timeout). */
		for (auto &pr : ports) {
			for (unsigned i = 0; i < pr->nclients; i++) {
				pr->svc.remove_client(pr->st.cl[i]);
				pr->st.cl[i].fini();
			}
			pr->nclients = 0;
		}
		ctx->take_snapshot(rte_get_tsc_cycles());
		status |= report(c, ctx->snap, port_reports(rt, c, ports), g_stop ? "signal" : ctx->why);
		for (auto &pr : ports) {
			for (ah_handle h : pr->held)
				pr->svc.destroy_ah(h);
			pr->held.clear();
			pr->svc.stop();
			pr->svc_up = false;
			pr->dev.close();
		}
	}
	rt.fini();
	return status;
}
