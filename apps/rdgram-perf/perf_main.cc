/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf's one run, for every driver (apps/common/driver.h picks it
 * once; run_perf<Dev> is instantiated per built driver, on its queue
 * type): open the sides (perf_setup.h: the soft driver on a DPDK port or
 * the loopback's net_ring pair, or an RDMA device), each with one queue
 * and QP per worker; run every worker's poll thread (perf_run.h's
 * server_main / client_main, apps/common/workers.h's run_workers); report
 * the sum over the workers, then each worker's own figures and
 * accounting. A standard tool as the peer (--oob-proto perftest |
 * ud_pingpong) is peer/'s.
 *
 * Worker i of a client talks to worker i of its server: on the soft
 * driver its QP is [client] qpn + i on queue i, its peer [server] qpn +
 * i; on an RDMA device the QPN is the device's, and a client with N
 * workers runs txonly only (it knows one server QPN).
 */
#include "perf_main.h"

#include <cstdio>
#include <memory>
#include <string>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include "perf_cpu.h"
#include "perf_peer.h"
#include "perf_peer_side.h"
#include "perf_port.h"
#include "perf_setup.h"
#include "workers.h"

namespace rdgram::perf {

namespace {

/* A poll thread's body and its argument, for run_workers' one function. */
struct job {
	int (*fn)(void *);
	void *arg;
};
int run_job(void *a)
{
	auto *j = static_cast<job *>(a);
	return j->fn(j->arg);
}

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

lcore_cpu main_lcore()
{
	return {rte_get_main_lcore(), lcore_os_cpu(rte_get_main_lcore())};
}

/* The lcores of one side's n workers near numa: one worker runs on the
 * main lcore (the calling thread, as rdgram-perf always did); more are
 * workers.h's choice, the main lcore last. 0, or 2 after one line. */
int pick_lcores(const runtime &rt, unsigned n, int numa, std::vector<lcore_cpu> *out)
{
	if (n == 1) {
		*out = {main_lcore()};
		return 0;
	}
	std::string err;
	if (apps::pick_workers(rt, numa, n, out, &err) != 0) {
		fprintf(stderr, "rdgram-perf: %s\n", err.c_str());
		return 2;
	}
	return 0;
}

/* "lcore 1 (cpu 1), lcore 0 (cpu 0)" */
template <class Dev> std::string lcore_list(const side<Dev> &s)
{
	std::string r;
	for (const auto &e : s.w) {
		if (!r.empty())
			r += ", ";
		r += "lcore " + std::to_string(e->where.lcore) + " (cpu " + std::to_string(e->where.cpu) + ")";
	}
	return r;
}

/* A counter of a driver's set by name (K: stats.h's for_each); the
 * drop-kind counters whose name starts with prefix, summed. */
template <class K> uint64_t counter_of(const K &k, const char *name)
{
	uint64_t v = 0;
	k.for_each([&](const xstat_name &n, uint64_t x) {
		if (strcmp(n.name, name) == 0)
			v = x;
	});
	return v;
}
template <class K> uint64_t drops_of(const K &k, const char *prefix)
{
	uint64_t v = 0;
	k.for_each([&](const xstat_name &n, uint64_t x) {
		if (n.kind == counter_kind::drop && strncmp(n.name, prefix, strlen(prefix)) == 0)
			v += x;
	});
	return v;
}

/* Each client worker's accounting, on stderr, one line per worker: bw
 * with a server, what it sent against what the server counted; txonly,
 * what its loop sent against its queue's counters (every message built
 * into a frame, tx_pkts, or dropped by name; none left pending). Returns
 * false when a txonly worker's does not close (one line says which). */
template <class Dev>
bool report_workers(const perf_config &c, const side<Dev> &s,
		    const std::vector<std::unique_ptr<run_ctx<endpoint<Dev>>>> &xs)
{
	bool closes = true;
	for (size_t i = 0; i < xs.size(); i++) {
		const endpoint<Dev> &e = *s.w[i];
		const auto &k = e.q.counters();
		fprintf(stderr, " worker %u: lcore %u (cpu %u), QPN 0x%06x -> 0x%06x:", e.index, e.where.lcore, e.where.cpu,
			e.qpn, e.to.qpn);
		for (const lat_result &r : xs[i]->lat)
			fprintf(stderr, " lat %lu samples, t_typical %.2f us;", (unsigned long)r.iterations, r.t_typical);
		for (const bw_result &r : xs[i]->bw) {
			if (c.test == "txonly") {
				const uint64_t tx = counter_of(k, "tx_pkts"), drops = drops_of(k, "tx_"),
					       pending = e.q.tx_pending();
				const bool ok = tx + drops == r.iterations && pending == 0;
				fprintf(stderr, " txonly %lu sent, %.3f Mpps = tx_pkts %lu + tx drops %lu, %lu pending: %s",
					(unsigned long)r.iterations, r.msg_rate_mpps, (unsigned long)tx, (unsigned long)drops,
					(unsigned long)pending, ok ? "closes" : "DOES NOT CLOSE");
				closes &= ok;
			} else if (r.received_known) {
				fprintf(stderr, " bw %lu sent, %.3f Mpps, %lu received by the server's worker %u%s",
					(unsigned long)r.iterations, r.msg_rate_mpps, (unsigned long)r.received, e.index,
					r.received == r.iterations ? ": closes" : " (lost on the way)");
			} else {
				fprintf(stderr, " bw %lu sent, %.3f Mpps, the server's count unknown", (unsigned long)r.iterations,
					r.msg_rate_mpps);
			}
		}
		fprintf(stderr, "\n");
	}
	if (!closes)
		fprintf(stderr, "rdgram-perf: a worker's txonly accounting does not close (above)\n");
	return closes;
}

/* The queues' counters after the results: one role per worker when
 * there are several ("client w0"), and their sum. */
template <class Dev> void report_counters(const std::vector<side<Dev> *> &sides)
{
	using K = std::remove_cvref_t<decltype(sides[0]->w[0]->q.counters())>;
	if constexpr (is_soft<Dev>) {
		std::vector<std::string> names;
		std::vector<std::pair<const char *, const K *>> qs;
		for (side<Dev> *s : sides)
			for (const auto &e : s->w)
				names.push_back(s->w.size() == 1 ? std::string(s->role)
								 : std::string(s->role) + " w" + std::to_string(e->index));
		size_t j = 0;
		for (side<Dev> *s : sides)
			for (const auto &e : s->w)
				qs.push_back({names[j++].c_str(), &e->q.counters()});
		print_counters<K>(qs);
		/* Summed over a side's workers: every counter, traffic too. */
		for (side<Dev> *s : sides) {
			if (s->w.size() == 1)
				continue;
			std::vector<std::pair<std::string, uint64_t>> sum;
			for (const auto &e : s->w) {
				size_t i = 0;
				e->q.counters().for_each([&](const xstat_name &n, uint64_t v) {
					if (i == sum.size())
						sum.push_back({n.name, 0});
					sum[i++].second += v;
				});
			}
			fprintf(stderr, " %s counters, summed over %zu workers:", s->role, s->w.size());
			for (const auto &[n, v] : sum)
				if (v != 0)
					fprintf(stderr, " %s=%lu", n.c_str(), (unsigned long)v);
			fprintf(stderr, "\n");
		}
	} else {
		for (side<Dev> *s : sides)
			for (const auto &e : s->w)
				print_drops(s->dev.driver_name(), e->q.counters());
	}
}

/* Opens what this process runs: both sides in loopback, else its role's.
 * 0, the exit status, or -1 when a standard tool's session ran on it
 * (*status then holds its exit status). */
template <class Dev>
int open_sides(runtime &rt, const perf_config &c, perf_config &cx, side<Dev> &srv, side<Dev> &cli,
	       std::vector<side<Dev> *> *sides, uint64_t deadline, int *peer_status)
{
	const unsigned n = c.workers;
	const bool is_server = c.mode == "server";
	const bool peer = peer_proto(c);
	side<Dev> &me = is_server ? srv : cli;
	if constexpr (is_soft<Dev>) {
		if (c.mode == "loopback") {
			uint16_t ps, pc;
			std::vector<lcore_cpu> ls, lc;
			if (int st = open_loopback(rt, n, &ps, &pc, &ls, &lc); st != 0)
				return st;
			srv.add_workers(ls);
			cli.add_workers(lc);
			/* Each side's port: the [port] table's settings on a
			 * net_ring port of the pair. */
			for (auto [s, id] : {std::pair{&srv, ps}, std::pair{&cli, pc}}) {
				soft::port_config pt = c.port;
				pt.name = s->role;
				pt.queues = 0;
				if (std::string err; s->owner.adopt(pt, id, uint16_t(n), &err) != 0) {
					fprintf(stderr, "rdgram-perf: %s\n", err.c_str());
					return 1;
				}
				if (open_soft_side(rt, c, *s, false) != 0)
					return 1;
			}
			*sides = {&srv, &cli};
			return 0;
		}
		/* --oob: the peer's address, QPN and MAC from it instead of the
		 * config (perf_oob.h). */
		if (!peer && !c.rdma.oob.empty() && oob_swap(c, *me.self, is_server ? &cx.client : &cx.server) != 0)
			return 1;
		if (std::string err; me.owner.probe(c.port, uint16_t(n), &err) != 0) {
			fprintf(stderr, "rdgram-perf: %s\n", err.c_str());
			return 1;
		}
		const uint16_t port = me.owner.port_id();
		std::vector<lcore_cpu> l;
		if (int st = pick_lcores(rt, n, me.owner.socket(), &l); st != 0)
			return st;
		me.add_workers(l);
		if (open_soft_side(rt, c, me, peer) != 0)
			return 1;
		if (peer) {
			if (!wait_link_up(port, deadline)) {
				fprintf(stderr, "rdgram-perf: the link of %s never came up\n", c.port.devargs.c_str());
				return 1;
			}
			*peer_status = run_peer_side(rt, c, me, deadline);
			return -1;
		}
		if (!is_server && !wait_link_up(port, deadline)) {
			fprintf(stderr, "rdgram-perf: link to the server never came up (is it running?)\n");
			return 1;
		}
	} else {
		if (c.mode == "loopback") {
			fprintf(stderr,
				"rdgram-perf: driver %s runs as mode = \"server\" or \"client\" (one per host), not loopback\n",
				c.driver.c_str());
			return 2;
		}
		if (int st = open_rdma_side(rt, c, me,
					    [&](int numa, std::vector<lcore_cpu> *out) {
						    return pick_lcores(rt, n, numa, out);
					    });
		    st != 0)
			return st;
		const port_attr &pa = me.dev.port();
		rt.bind_this_thread(main_lcore().cpu);
		std::string gid = c.rdma.sgid_index() < pa.gids.size() ? format_gid(pa.gids[c.rdma.sgid_index()]) : "-";
		std::string qpns;
		for (const auto &e : me.w) {
			char b[16];
			snprintf(b, sizeof(b), "%s0x%06x", qpns.empty() ? "" : ",", e->qpn);
			qpns += b;
		}
		if (!c.json)
			printf(" rdgram-perf: %s, driver %s, QPN %s, GID[%u] %s, LID %u, %s port\n", c.mode.c_str(),
			       me.dev.driver_name(), qpns.c_str(), unsigned(c.rdma.sgid_index()), gid.c_str(),
			       unsigned(pa.lid), pa.link == link_layer::ethernet ? "Ethernet (RoCE)" : "InfiniBand");
		fflush(stdout);
		if (peer) {
			*peer_status = run_peer_side(rt, c, me, deadline);
			return -1;
		}
		if (!c.rdma.oob.empty() && exchange_oob(c, me, &cx) != 0)
			return 1;
		/* A server learns each worker's client from its SYNC. */
		if (!is_server)
			for (auto &e : me.w)
				if (int ae = create_server_ah(rt, *e, cx, deadline); ae != 0) {
					fprintf(stderr, "rdgram-perf: creating the AH to %s failed: %s\n",
						format_gid(cx.server.address).c_str(), strerror(ae));
					return 1;
				}
	}
	*sides = {&me};
	return 0;
}

} // namespace

template <class Dev> int run_perf(runtime &rt, const perf_options &o, uint64_t deadline)
{
	using E = endpoint<Dev>;
	const perf_config &c = o.c;
	const unsigned n = c.workers;
	const bool loopback = c.mode == "loopback", is_server = c.mode == "server";
	perf_config cx = c; /* with --oob's record: what the workers are told */
	side<Dev> srv{"server", &cx.server, &cx.client}, cli{"client", &cx.client, &cx.server};
	/* Closes both sides last (after the exposure below stopped): their
	 * AHs, queues and devices, on every path. */
	struct closer {
		runtime &rt;
		side<Dev> &a, &b;
		~closer()
		{
			a.close(rt);
			b.close(rt);
		}
	} close_sides{rt, srv, cli};
	std::vector<side<Dev> *> sides;
	int peer_status = 0;
	if (int st = open_sides(rt, c, cx, srv, cli, &sides, deadline, &peer_status); st != 0)
		return st < 0 ? peer_status : st;

	/* One run context per worker; a loopback client reads its server's
	 * CPU clock. */
	exposure ex(rt, o);
	std::vector<std::unique_ptr<run_ctx<E>>> sx, cxs;
	for (side<Dev> *s : sides)
		for (auto &e : s->w) {
			const bool srv_side = s == &srv;
			auto x = std::make_unique<run_ctx<E>>(&cx, &rt, e.get(), deadline);
			x->hooks = ex.hooks(srv_side, e->index);
			(srv_side ? sx : cxs).push_back(std::move(x));
		}
	if (loopback)
		for (size_t i = 0; i < cxs.size(); i++)
			cxs[i]->server = sx[i].get();
	ex.start(sides);
	if (!c.json) {
		if (loopback) {
			if (n == 1)
				printf(" rdgram-perf: loopback, soft RoCEv2 driver over net_ring, %s, server lcore %u "
				       "(cpu %u), client lcore %u (cpu %u)\n",
				       c.server.address.is_v4_mapped() ? "IPv4" : "IPv6", srv.w[0]->where.lcore,
				       srv.w[0]->where.cpu, cli.w[0]->where.lcore, cli.w[0]->where.cpu);
			else
				printf(" rdgram-perf: loopback, soft RoCEv2 driver over net_ring, %s, %u workers a side: "
				       "server %s; client %s\n",
				       c.server.address.is_v4_mapped() ? "IPv4" : "IPv6", n, lcore_list(srv).c_str(),
				       lcore_list(cli).c_str());
		} else if constexpr (is_soft<Dev>) {
			const side<Dev> &me = *sides[0];
			if (n == 1)
				printf(" rdgram-perf: %s on %s, lcore %u (cpu %u)\n", c.mode.c_str(), c.port.devargs.c_str(),
				       me.w[0]->where.lcore, me.w[0]->where.cpu);
			else
				printf(" rdgram-perf: %s on %s, %u workers, queue i on the i-th: %s\n", c.mode.c_str(),
				       c.port.devargs.c_str(), n, lcore_list(me).c_str());
		}
	}
	fflush(stdout); /* before the status lines (stderr) */

	double line_ns_before = -1, line_ns_after = -1; /* loopback, one worker: line_probe */
	if (loopback && !c.json && n == 1)
		line_ns_before = probe_line(srv.w[0]->where.lcore);
	std::vector<job> jobs;
	std::vector<lcore_cpu> lcores;
	for (auto &x : sx)
		jobs.push_back({server_main<E>, x.get()}), lcores.push_back(x->ep->where);
	for (auto &x : cxs)
		jobs.push_back({client_main<E>, x.get()}), lcores.push_back(x->ep->where);
	if (jobs.size() == 1 && lcores[0].lcore == rte_get_main_lcore()) {
		jobs[0].fn(jobs[0].arg); /* one worker: this thread, as ever */
	} else {
		std::vector<void *> args;
		for (job &j : jobs)
			args.push_back(&j);
		const int rc = apps::run_workers(lcores, run_job, args, [](const std::atomic<unsigned> &running) {
			while (running.load(std::memory_order_acquire) != 0)
				rte_delay_us_sleep(10000);
		});
		if (rc < 0) {
			fprintf(stderr, "rdgram-perf: cannot launch the poll threads: %s\n", strerror(-rc));
			return 1;
		}
	}
	if (loopback && !c.json && n == 1)
		line_ns_after = probe_line(srv.w[0]->where.lcore);
	ex.stop();

	int status = 0;
	std::vector<bw_result> bw; /* the client's, summed over its workers */
	if (!is_server) {
		/* The client's figures: the sum over its workers first. */
		bool ok = true;
		std::vector<worker_result> per;
		for (auto &x : cxs) {
			ok &= x->ok;
			per.push_back({x->ep->index, x->ep->where.lcore, x->ep->qpn, &x->lat, &x->lat_samples, &x->bw});
		}
		const std::vector<lat_result> lat = merge_lat(per);
		bw = merge_bw(per);
		print_results(c, lat, bw, n > 1 ? &per : nullptr);
		if (!c.json && !bw.empty() && loopback && n == 1)
			print_bw_limits(stdout, cxs[0]->bw_cpu, cli.w[0]->where.cpu, srv.w[0]->where.cpu,
					(unsigned long)counter_of(cli.w[0]->q.counters(), "tx_port_full"), line_ns_before,
					line_ns_after);
		for (const auto &r : lat)
			if (r.lost != 0)
				fprintf(stderr, " latency: %lu pings timed out and were re-sent\n", (unsigned long)r.lost);
		fflush(stdout);
		status = client_status(c, ok);
		if (n > 1 && !report_workers(c, cli, cxs) && status == 0)
			status = 1;
	} else {
		for (auto &x : sx) {
			if (x->no_client) {
				fprintf(stderr, "rdgram-perf: no client SYNC before the %.1f s timeout%s\n", c.timeout_s,
					n > 1 ? (" (worker " + std::to_string(x->ep->index) + ")").c_str() : "");
				status = 1;
			} else if (!x->ok && status == 0) {
				status = perf_stop.load() ? 130 : 1;
			}
			if (!c.json) {
				if (n == 1)
					printf(" server: answered %lu data messages in the last test%s\n",
					       (unsigned long)x->served, x->ok ? "" : " (stopped at the timeout)");
				else
					printf(" server worker %u: lcore %u (cpu %u), QPN 0x%06x: answered %lu data messages "
					       "in the last test%s\n",
					       x->ep->index, x->ep->where.lcore, x->ep->where.cpu, x->ep->qpn,
					       (unsigned long)x->served, x->ok ? "" : " (stopped at the timeout)");
			}
		}
	}
	fflush(stdout);
	if (!cli.dests.empty())
		status = report_dests(c, cli.dests.size(), bw, cli.dev.mempool(), status);
	report_counters(sides);
	if (!is_server)
		status = write_histogram(c, ex.client_progress(0).hist, o.hist_csv, o.hist_plot, status);
	fflush(stdout);
	return status;
}

int run_perf_on(apps::driver_kind k, runtime &rt, const perf_options &o, uint64_t deadline)
{
	return apps::with_driver(k, [&](auto tag) {
		using Dev = typename decltype(tag)::type;
		return run_perf<Dev>(rt, o, deadline);
	});
}

} // namespace rdgram::perf
