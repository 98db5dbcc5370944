/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf's set-up, before any poll loop runs, on every driver: a
 * side's device and one queue per worker (open_side: the soft driver on
 * a DPDK port, or an RDMA device), the AHs to the peer, the loopback's
 * net_ring pair and lcores, --oob's exchange (rdgram-perf's own
 * rendezvous), and what is exposed while the tests run (telemetry, the
 * status line). Each function prints what went wrong on stderr, one
 * line. (Main thread.)
 */
#ifndef RDGRAM_PERF_SETUP_H
#define RDGRAM_PERF_SETUP_H

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "driver.h"
#include "perf_cli.h"
#include "perf_oob.h"
#include "perf_report.h"
#include "perf_run.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "rdgram/telemetry.h"
#include "open_device.h"

namespace rdgram::perf {

using apps::is_soft;
using soft_side = side<soft::soft_device>;

/* ---- the soft driver ---------------------------------------------------- */

/* Starts s's port (s.owner, probed or adopted already) with one queue
 * per worker (its workers added, their lcores set): worker i on queue i
 * with QP self.qpn + i, sending to the peer's QP other.qpn + i. Unless
 * peer_mode (a standard tool is the peer: its address comes from the
 * exchange, its MAC by ARP/ND), each worker's AH to its peer (resolved by
 * ARP/ND when the peer's MAC is not known, bounded by the run's timeout)
 * and, for txonly --dests, the prepared destinations. 0 or an errno
 * value. */
int open_soft_side(runtime &rt, const perf_config &c, soft_side &s, bool peer_mode);

/* Loopback: the net_ring pair joining the two sides' ports, n queues
 * each (queue i to queue i), and the lcores of their n workers each
 * (the last client worker on the main lcore, the first server worker on
 * another). 0, or the exit status (1: no pair; 2: fewer than 2n lcores). */
int open_loopback(runtime &rt, unsigned n, uint16_t *srv_port, uint16_t *cli_port, std::vector<lcore_cpu> *srv,
		  std::vector<lcore_cpu> *cli);

/* --oob with the soft driver (rdgram's own rendezvous): swaps our
 * address, QPN, Q_Key and MAC for the peer's, written into *other. */
int oob_swap(const perf_config &c, const endpoint_config &self, endpoint_config *other);

/* ---- verbs, mlx5, EFA --------------------------------------------------- */

/* Our QP's number (EFA's queue names it qp_num). */
template <class Q> uint32_t queue_qpn(const Q &q)
{
	if constexpr (requires { q.qpn(); })
		return q.qpn();
	else
		return q.qp_num();
}

/* What the QP took of the inline size asked for: ibv_create_qp may grant
 * less than asked, and more; mlx5's create_queue refuses more than a UD
 * WQE carries, so it grants what was asked. */
template <class Q> uint32_t granted_inline(const Q &q, uint32_t asked)
{
	if constexpr (requires { q.max_inline(); })
		return std::min(asked, q.max_inline());
	else
		return asked;
}

/* The RDMA device of s (not the soft driver), its workers' lcores chosen
 * after it opened (pick: n workers near its NUMA node), then one queue
 * per worker. 0, or the exit status after one line on stderr. */
template <class Dev>
int open_rdma_side(runtime &rt, const perf_config &c, side<Dev> &s,
		   const std::function<int(int numa, std::vector<lcore_cpu> *)> &pick)
{
	if (std::string err; apps::open_device<Dev>(rt, {.rdma = &c.rdma, .rdma_opts = {.max_ah = c.max_ah}}, s.owner, &err) != 0) {
		fprintf(stderr, "rdgram-perf: %s\n", err.c_str());
		return 1;
	}
	std::vector<lcore_cpu> lcores;
	if (int st = pick(s.dev.port().numa_node, &lcores); st != 0)
		return st;
	s.add_workers(lcores);
	for (auto &e : s.w) {
		queue_params qp;
		qp.socket = s.dev.port().numa_node >= 0 ? s.dev.port().numa_node : SOCKET_ID_ANY;
		qp.qkey = s.self->qkey;
		qp.max_inline = c.inline_size;
		qp.signal_every = c.cq_mod;
		if (int rc = s.dev.create_queue(qp, e->q); rc != 0) {
			fprintf(stderr, "rdgram-perf: driver %s: queue %u: %s (%s)\n", s.dev.driver_name(), e->index,
				s.dev.error().c_str(), strerror(rc));
			return 1;
		}
		e->qpn = queue_qpn(e->q);
		e->inline_max = granted_inline(e->q, c.inline_size);
	}
	return 0;
}

/* The AH to the server from the client's settings (cx: the config with
 * --oob's record). */
inline ibv_ah_attr server_ah_attr(const perf_config &cx, const port_attr &port)
{
	ibv_ah_attr a{};
	a.port_num = 1; /* rdgram numbers its one port 1 */
	a.dlid = cx.server.lid;
	/* IB without a GRH needs the LID; otherwise address by GID. */
	a.is_global = port.grh_required || cx.server.lid == 0;
	a.grh.sgid_index = cx.rdma.sgid_index();
	a.grh.hop_limit = 64;
	memcpy(a.grh.dgid.raw, cx.server.address.raw, 16);
	return a;
}

/* A client worker's AH to the server, on an RDMA device. 0 or the errno
 * value of the last attempt. */
template <class Dev> int create_server_ah(runtime &rt, endpoint<Dev> &e, const perf_config &cx, uint64_t deadline)
{
	int err = 0;
	const ibv_ah_attr a = server_ah_attr(cx, e.dev->port());
	/* On RoCE ibv_create_ah resolves the server's MAC in the kernel and
	 * gives up (ETIMEDOUT, EHOSTUNREACH) when no ARP/ND answer came
	 * within its own wait, e.g. while the server, told our address by
	 * --oob, is still opening its port. Try again until the timeout, as
	 * the registry's retry does for ENOMEM. */
	for (;;) {
		rt.ctl().call([&] { e.to.ah = e.dev->create_ah(a, &err); });
		if ((err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH) || past(deadline, rte_rdtsc()) ||
		    perf_stop.load())
			break;
		rte_delay_us_sleep(100000);
	}
	e.to.qpn = cx.server.qpn;
	e.to.qkey = cx.server.qkey;
	return err;
}

/* --oob on an RDMA device: swaps addresses with the peer over TCP
 * (perf_oob.h), worker 0's QPN, so the client needs no QPN from the
 * config; the peer's record goes into *cx. 0, or an errno value after
 * one line on stderr. */
template <class Dev> int exchange_oob(const perf_config &c, const side<Dev> &s, perf_config *cx)
{
	const port_attr &pa = s.dev.port();
	oob_addr self{}, peer{};
	if (c.rdma.sgid_index() < pa.gids.size())
		memcpy(self.gid, pa.gids[c.rdma.sgid_index()].raw, 16);
	self.qpn = s.w[0]->qpn;
	self.qkey = s.self->qkey;
	self.lid = pa.lid;
	std::string oerr;
	if (int rc = oob_exchange(c.rdma.oob, c.mode == "server", self, c.timeout_s, &peer, &oerr); rc != 0) {
		fprintf(stderr, "rdgram-perf: --oob %s: %s\n", c.rdma.oob.c_str(), oerr.c_str());
		return rc;
	}
	endpoint_config &o = c.mode == "server" ? cx->client : cx->server;
	memcpy(o.address.raw, peer.gid, 16);
	o.qpn = peer.qpn;
	o.qkey = peer.qkey;
	o.lid = peer.lid;
	if (!c.json)
		printf(" rdgram-perf: --oob %s: peer QPN 0x%06x, GID %s, LID %u, Q_Key 0x%x\n", c.rdma.oob.c_str(),
		       o.qpn, format_gid(o.address).c_str(), unsigned(o.lid), o.qkey);
	fflush(stdout);
	return 0;
}

/* ---- what is exposed while the tests run -------------------------------- */

/* The open sides in /rdgram/ telemetry and, every --status-interval, the
 * status line, while the tests run: start() after the sides are open,
 * stop() before anything exposed goes away (the destructor too). Each
 * worker has its own hooks: its QP's publisher and, on a client, its
 * progress. */
class exposure {
public:
	exposure(runtime &rt, const perf_options &o)
		: rt_(rt), o_(o), srv_pub_(o.c.workers), cli_pub_(o.c.workers), prog_(o.c.workers)
	{
		for (unsigned i = 0; i < o.c.workers; i++) {
			srv_hooks_.push_back({nullptr, &srv_pub_[i]});
			cli_hooks_.push_back({&prog_[i], &cli_pub_[i]});
		}
	}
	exposure(const exposure &) = delete;
	exposure &operator=(const exposure &) = delete;
	~exposure() { stop(); }

	/* The hooks worker i of a side publishes through. */
	loop_hooks *hooks(bool server, unsigned i) { return server ? &srv_hooks_[i] : &cli_hooks_[i]; }
	const progress &client_progress(unsigned i) const { return prog_[i]; }

	template <class Dev> void start(const std::vector<side<Dev> *> &sides)
	{
		telemetry::attachment a;
		a.app = "rdgram-perf";
		a.ctl = &rt_.ctl();
		for (side<Dev> *s : sides) {
			const bool is_srv = strcmp(s->role, "server") == 0;
			if constexpr (is_soft<Dev>) {
				char mac[RTE_ETHER_ADDR_FMT_SIZE];
				rte_ether_format_addr(mac, sizeof(mac), &s->dev.mac());
				a.ports.push_back({&s->dev, int(s->dev.port_id()), s->role, mac});
			} else {
				a.ports.push_back({&s->dev, -1, s->role, ""});
			}
			a.ah_devices.push_back(&s->dev);
			for (auto &e : s->w) {
				telemetry::qp_publisher *pub = is_srv ? &srv_pub_[e->index] : &cli_pub_[e->index];
				const int port = a.ports.back().port_id;
				a.lcores.push_back(
					{e->where.lcore, e->where.cpu, numa_of_cpu(rt_.topology(), e->where.cpu), s->role});
				a.qps.push_back({std::string(s->role) + "_qp" + std::to_string(e->index), e->where.lcore, port,
						 e->qpn, pub});
				line_.qps.push_back(pub);
				if (!is_srv)
					line_.progs.push_back(&prog_[e->index]);
			}
		}
		attach(std::move(a));
	}
	void stop();

private:
	void attach(telemetry::attachment a);

	runtime &rt_;
	const perf_options &o_;
	std::deque<telemetry::qp_publisher> srv_pub_, cli_pub_;
	std::deque<progress> prog_;
	std::vector<loop_hooks> srv_hooks_, cli_hooks_;
	status_printer line_{&o_.c, {}, {}};
	bool attached_ = false, line_on_ = false;
};

} // namespace rdgram::perf

#endif
