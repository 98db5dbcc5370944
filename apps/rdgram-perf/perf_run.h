/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * What a poll thread of rdgram-perf runs, on every driver: the server's
 * and the client's thread bodies around perf_tests.h's loops, templates
 * over the driver's device and queue types (the soft driver, verbs,
 * mlx5, EFA), chosen once per run, so nothing is virtual or branches on
 * the driver per burst; one thread body per worker. Set-up (opening
 * devices, queues, AHs) is perf_setup.h's; the run, perf_main.cc's; what
 * is printed, perf_report.cc's.
 */
#ifndef RDGRAM_PERF_RUN_H
#define RDGRAM_PERF_RUN_H

#include <atomic>
#include <memory>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "open_device.h"
#include "perf_config.h"
#include "perf_cpu.h"
#include "perf_status.h"
#include "perf_tests.h"
#include "rdgram/ah_from_wc.h"
#include "rdgram/runtime.h"

namespace rdgram::perf {

/* One poll thread of a side (a worker): its queue on the side's device
 * (Dev: soft_device, verbs_device, mlx5_device, efa_device; queue i of
 * the device for worker i; the device's mempool feeds it and what it
 * sends beyond inline), its own QP and where it sends. Worker i of a
 * client talks to worker i of its server. */
template <class Dev> struct endpoint {
	using device_type = Dev;
	using queue_type = typename Dev::queue_type;

	const char *role;
	const endpoint_config *self;
	const endpoint_config *other;
	Dev *dev = nullptr;
	unsigned index = 0;        /* worker and queue index */
	queue_type q;
	uint32_t qpn = 0;          /* our QP's number */
	uint32_t inline_max = 0;   /* payloads up to this many bytes go inline */
	peer to{ah_null, 0, 0};    /* ah_null: a server learns it from the client's SYNC */
	/* txonly --dests: the prepared AHs, in the order they are sent (the
	 * side's, shared by its workers; empty: none). */
	const std::vector<ah_handle> *dests = nullptr;
	lcore_cpu where{};
};

/* One role of a test, server or client: one device and its workers. */
template <class Dev> struct side {
	const char *role;
	const endpoint_config *self;
	const endpoint_config *other;
	/* soft: the DPDK port with the device on it (and its control
	 * poller); the RDMA drivers: the device (open_device.h). */
	apps::device_owner<Dev> owner;
	Dev &dev = apps::device_of<Dev>(owner);
	std::vector<std::unique_ptr<endpoint<Dev>>> w;
	std::vector<ah_handle> dests; /* txonly --dests (soft client) */

	side(const char *r, const endpoint_config *s, const endpoint_config *o) : role(r), self(s), other(o) {}
	side(const side &) = delete;
	side &operator=(const side &) = delete;
	/* Workers for these lcores, on this side's device (main thread). */
	void add_workers(const std::vector<lcore_cpu> &lcores)
	{
		for (const lcore_cpu &l : lcores) {
			auto e = std::make_unique<endpoint<Dev>>();
			e->role = role;
			e->self = self;
			e->other = other;
			e->dev = &dev;
			e->index = unsigned(w.size());
			e->where = l;
			e->dests = &dests;
			w.push_back(std::move(e));
		}
	}
	/* (Main thread, after the workers stopped.) Their AHs and the
	 * queues, then the device. */
	void close(runtime &rt)
	{
		rt.ctl().call([&] {
			for (auto &e : w)
				if (e->to.ah != ah_null)
					dev.destroy_ah(e->to.ah);
			for (ah_handle h : dests)
				dev.destroy_ah(h);
		});
		for (auto &e : w)
			e->to.ah = ah_null;
		dests.clear();
		for (auto &e : w)
			dev.destroy_queue(e->q); /* nothing when it was not created */
		owner.close(); /* soft: the control poller, the port, the device */
	}
};

/* A poll thread's run: what it is given and what it leaves. */
template <class E> struct run_ctx {
	const perf_config *c;
	runtime *rt;
	E *ep;
	uint64_t deadline;
	bool ok = false;
	bool no_client = false; /* server: no SYNC came to learn the client from */
	uint64_t served = 0;
	std::vector<lat_result> lat;
	std::vector<double> lat_samples; /* RTT/2, us: merged over workers */
	std::vector<bw_result> bw;
	loop_hooks *hooks = nullptr;
	/* Loopback: the server's CPU clock, published by its thread once it
	 * runs, and the bandwidth test's CPU shares the client measured. */
	thread_clock clock{};
	std::atomic<bool> clock_ready{false};
	const run_ctx *server = nullptr;
	cpu_meter bw_cpu{};

	run_ctx(const perf_config *c_, runtime *rt_, E *ep_, uint64_t deadline_)
		: c(c_), rt(rt_), ep(ep_), deadline(deadline_)
	{
	}
};

/* The server, when it has no AH to the client yet: waits for the
 * client's first SYNC and makes the AH to it from that completion
 * (ibv_create_ah_from_wc semantics, rdgram/ah_from_wc.h). The client
 * repeats SYNC until it is answered, so taking the first one out of the
 * stream loses nothing. (The queue's poll thread.) */
template <class E> bool learn_client(runtime &rt, E &e, const perf_config &c, const loop_env &env)
{
	using Q = typename E::queue_type;
	gid_index gids;
	gids.build(e.dev->port().gids);
	recv_wc wcs[Q::max_burst];
	for (;;) {
		e.q.tx_flush();
		const uint16_t n = e.q.rx_burst(wcs, Q::max_burst);
		bool got = false;
		for (uint16_t i = 0; i < n; i++) {
			const recv_wc &wc = wcs[i];
			if (!got && (wc.wc_flags & wc_with_imm) && wc.imm_data == imm_sync) {
				int err = 0;
				ah_handle h = ah_null;
				rt.ctl().call([&] {
					h = create_ah_from_wc(*e.dev, gids, 1, wc, rte_pktmbuf_mtod(wc.mbuf, void *),
							      &err);
				});
				if (err != 0) {
					fprintf(stderr, "rdgram-perf: AH from the client's SYNC (QPN 0x%06x): %s\n",
						wc.src_qp, strerror(err));
				} else {
					e.to = peer{h, wc.src_qp, c.client.qkey};
					got = true;
				}
			}
			rte_pktmbuf_free(wc.mbuf);
		}
		rte_rcu_qsbr_quiescent(env.qs, env.tid);
		if (got)
			return true;
		if (past(env.deadline, rte_rdtsc()))
			return false;
	}
}

/* The server's poll thread (an lcore_function_t: arg is a run_ctx<E>):
 * learns the client if it must, then answers until the client's last
 * FIN or the deadline. */
template <class E> int server_main(void *arg)
{
	auto *x = static_cast<run_ctx<E> *>(arg);
	E &e = *x->ep;
	x->rt->bind_this_thread(e.where.cpu);
	x->clock = thread_clock::self();
	x->clock_ready.store(true, std::memory_order_release);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(x->rt->qsbr(), tid);
	loop_env env{x->rt->qsbr(), tid, x->deadline, x->hooks};
	if (e.to.ah == ah_null && !learn_client(*x->rt, e, *x->c, env))
		x->no_client = true;
	else
		x->ok = serve(e.q, e.to, e.inline_max, env, &x->served);
	if (x->hooks != nullptr && x->hooks->pub != nullptr) /* the final figures */
		x->hooks->pub->publish(e.q.counters(), nullptr, rte_rdtsc());
	poll_thread_offline(x->rt->qsbr(), tid);
	return 0;
}

/* The client's poll thread (arg is a run_ctx<E>): the latency test,
 * then the bandwidth test, as c.test says. */
template <class E> int client_main(void *arg)
{
	auto *x = static_cast<run_ctx<E> *>(arg);
	E &e = *x->ep;
	const perf_config &c = *x->c;
	x->rt->bind_this_thread(e.where.cpu);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(x->rt->qsbr(), tid);
	loop_env env{x->rt->qsbr(), tid, x->deadline, x->hooks};
	const bool txonly = c.test == "txonly";
	const bool do_lat = c.test == "lat" || c.test == "both", do_bw = c.test != "lat";
	x->ok = true;
	if (do_lat) {
		client_params cp{c.size, c.lat_iters, c.warmup, e.inline_max, c.tx_depth, c.use_imm, !do_bw, false};
		lat_result r;
		if (client_lat(e.q, e.dev->mempool(), e.to, cp, env, x->lat_samples, &r))
			x->lat.push_back(r);
		else
			x->ok = false;
	}
	if (do_bw && x->ok) {
		client_params cp{c.size, c.bw_iters, 0, e.inline_max, c.tx_depth, c.use_imm, true, txonly};
		if (e.dests != nullptr && !e.dests->empty()) {
			cp.dests = e.dests->data();
			cp.n_dests = uint32_t(e.dests->size());
		}
		bw_result r;
		/* Who had the CPUs during the test (two clock reads each side
		 * of it, outside the loop). */
		x->bw_cpu.a = thread_clock::self();
		if (x->server != nullptr && x->server->clock_ready.load(std::memory_order_acquire))
			x->bw_cpu.b = x->server->clock;
		x->bw_cpu.start();
		const bool done = client_bw(e.q, e.dev->mempool(), e.to, cp, env, &r);
		x->bw_cpu.stop();
		if (done)
			x->bw.push_back(r);
		else
			x->ok = false;
	}
	if (x->hooks != nullptr && x->hooks->pub != nullptr) /* the final figures */
		x->hooks->pub->publish(e.q.counters(), nullptr, rte_rdtsc());
	poll_thread_offline(x->rt->qsbr(), tid);
	return 0;
}

} // namespace rdgram::perf

#endif
