/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf on the verbs and mlx5 drivers: what differs per driver (its
 * device config, what its QP grants of the inline size), then one
 * template for both that makes the queue (queue_params), runs perf_run.h's
 * poll thread bodies on the device's own queue type and reports. Never run on RDMA hardware; the
 * verbs driver runs against rxe in the lab (tests/lab/perf_soft_verbs.sh,
 * perftest.sh, ud_pingpong.sh), mlx5 only up to its device failing to
 * open (tests/integration/perf_rdma_driver.sh).
 *
 * Addressing: QP numbers are the device's to choose, so the soft driver's
 * fixed qpn settings cannot be used for our own QP. The server prints its
 * QPN, GID and LID; the client is given them ([server] qpn, address, lid).
 * The server learns the client from the first SYNC it receives
 * (perf_run.h's learn_client).
 */
#include "perf_rdma.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "perf_oob.h"
#include "perf_peer.h"
#include "perf_report.h"
#include "perf_run.h"
#include "rdgram/config.h"

#ifdef RDGRAM_PERF_VERBS
#include "verbs_device.h"
#endif
#ifdef RDGRAM_PERF_MLX5
#include "mlx5_device.h"
#endif

namespace rdgram::perf {

namespace {

/* ---- set-up: what differs per driver ------------------------------------ */

#ifdef RDGRAM_PERF_VERBS
using verbs_endpoint = endpoint<verbs::verbs_device>;

/* Opens a verbs device: any rdma-core provider. 0 or an errno value. */
int open_device(runtime &rt, const perf_config &c, verbs::verbs_device &dev)
{
	verbs::verbs_config vc;
	vc.device = c.rdma.device;
	vc.port_num = c.rdma.port;
	vc.max_ah = c.max_ah;
	vc.qsbr = rt.qsbr();
	vc.topology = rt.topology();
	return dev.open(vc);
}

/* What the QP took of the inline size asked for (ibv_create_qp may
 * grant less than asked, and more). */
uint32_t inline_max(const verbs::verbs_queue &q, uint32_t asked) { return std::min(asked, q.max_inline()); }
#endif

#ifdef RDGRAM_PERF_MLX5
using mlx5_endpoint = endpoint<mlx5::mlx5_device>;

/* Opens an mlx5 device (direct verbs). 0 or an errno value. */
int open_device(runtime &rt, const perf_config &c, mlx5::mlx5_device &dev)
{
	mlx5::mlx5_config mc;
	mc.device = c.rdma.device;
	mc.port_num = c.rdma.port;
	mc.max_ah = c.max_ah;
	mc.qsbr = rt.qsbr();
	return dev.open(mc);
}

/* mlx5: what was asked. create_queue refuses more than a UD WQE carries,
 * and fails when ibv_create_qp cannot give it. */
uint32_t inline_max(const mlx5::mlx5_queue &, uint32_t asked) { return asked; }
#endif

/* ---- one template for both --------------------------------------------- */

/* The device and its one UD queue, which receives into the device's own
 * mempool. 0, or an errno value with *err. */
template <class E> int open_endpoint(runtime &rt, const perf_config &c, E &e, std::string *err)
{
	if (int rc = open_device(rt, c, e.dev); rc != 0) {
		*err = e.dev.error();
		return rc;
	}
	queue_params qp;
	qp.socket = e.dev.port().numa_node >= 0 ? e.dev.port().numa_node : SOCKET_ID_ANY;
	qp.qkey = e.self->qkey;
	qp.max_inline = c.inline_size;
	qp.signal_every = c.cq_mod;
	if (int rc = e.dev.create_queue(qp, e.q); rc != 0) {
		*err = e.dev.error();
		return rc;
	}
	e.inline_max = inline_max(e.q, c.inline_size);
	return 0;
}

template <class E> void close_endpoint(E &e)
{
	e.dev.destroy_queue(e.q); /* nothing when it was not created */
	e.dev.close();
}

/* The AH to the server from the client's settings. */
ibv_ah_attr server_ah_attr(const perf_config &c, const port_attr &port)
{
	ibv_ah_attr a{};
	a.port_num = 1; /* rdgram numbers its one port 1 */
	a.dlid = c.server.lid;
	/* IB without a GRH needs the LID; otherwise address by GID. */
	a.is_global = port.grh_required || c.server.lid == 0;
	a.grh.sgid_index = c.rdma.gid_index;
	a.grh.hop_limit = 64;
	memcpy(a.grh.dgid.raw, c.server.address.raw, 16);
	return a;
}

/* The client's AH to the server (cx: the config with --oob's record).
 * 0 or the errno value of the last attempt. */
template <class E> int create_server_ah(runtime &rt, E &e, const perf_config &cx, uint64_t deadline)
{
	int err = 0;
	const ibv_ah_attr a = server_ah_attr(cx, e.dev.port());
	/* On RoCE ibv_create_ah resolves the server's MAC in the kernel and
	 * gives up (ETIMEDOUT, EHOSTUNREACH) when no ARP/ND answer came
	 * within its own wait, e.g. while the server, told our address by
	 * --oob, is still opening its port. Try again until the timeout, as
	 * the registry's retry does for ENOMEM. */
	for (;;) {
		rt.ctl().call([&] { e.to.ah = e.dev.create_ah(a, &err); });
		if ((err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH) || past(deadline, rte_rdtsc()) ||
		    perf_stop.load())
			break;
		rte_delay_us_sleep(100000);
	}
	e.to.qpn = cx.server.qpn;
	e.to.qkey = cx.server.qkey;
	return err;
}

/* --oob: swaps addresses with the peer over TCP (perf_oob.h), so the
 * client needs no QPN from the config; the peer's record goes into *cx.
 * 0, or an errno value after one line on stderr. */
template <class E> int exchange_oob(const perf_config &c, const E &e, perf_config *cx)
{
	const port_attr &pa = e.dev.port();
	oob_addr self{}, peer{};
	if (c.rdma.gid_index < pa.gids.size())
		memcpy(self.gid, pa.gids[c.rdma.gid_index].raw, 16);
	self.qpn = e.q.qpn();
	self.qkey = e.self->qkey;
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

/* The peer of perftest or ibv_ud_pingpong on an open device: run_peer
 * with an AH made by the device from the peer's GID (and LID on IB). */
template <class E> int run_side_peer(runtime &rt, E &e, const perf_config &c, uint64_t deadline)
{
	const port_attr &pa = e.dev.port();
	peer_self ps;
	ps.qpn = e.q.qpn();
	ps.lid = pa.lid;
	ps.with_gid = pa.link == link_layer::ethernet || pa.grh_required || c.rdma.gid_index_set;
	if (ps.with_gid && c.rdma.gid_index >= pa.gids.size()) {
		fprintf(stderr, "rdgram-perf: [rdma] gid_index %u: the port has %zu GIDs\n", unsigned(c.rdma.gid_index),
			pa.gids.size());
		close_endpoint(e);
		return 2;
	}
	if (ps.with_gid)
		ps.gid = pa.gids[c.rdma.gid_index];
	ps.mtu = pa.active_mtu;
	ps.device = std::string(e.dev.driver_name()) + ", " + (c.rdma.device.empty() ? "first device" : c.rdma.device);
	peer_port<typename E::queue_type> pp;
	pp.q = &e.q;
	pp.mp = e.dev.mempool();
	pp.inline_max = e.inline_max;
	pp.qs = rt.qsbr();
	pp.tid = e.where.lcore;
	pp.make_ah = [&](const wire::gid &g, uint16_t dlid, const std::function<void()> &, ah_handle *out,
			 std::string *err) {
		ibv_ah_attr a{};
		a.port_num = 1;
		a.dlid = dlid;
		a.is_global = ps.with_gid;
		a.grh.sgid_index = c.rdma.gid_index;
		a.grh.hop_limit = 64;
		memcpy(a.grh.dgid.raw, g.raw, 16);
		int ae = 0;
		rt.ctl().call([&] { *out = e.dev.create_ah(a, &ae); });
		if (ae != 0)
			*err = "creating the AH to " + (ps.with_gid ? format_gid(g) : "LID " + std::to_string(dlid)) +
			       " failed: " + strerror(ae);
		return ae;
	};
	poll_thread_online(rt.qsbr(), e.where.lcore);
	ah_handle ah = ah_null;
	const int status = run_peer(c, pp, ps, deadline, &ah);
	poll_thread_offline(rt.qsbr(), e.where.lcore);
	print_drops(e.dev.driver_name(), e.q.counters());
	if (ah != ah_null)
		rt.ctl().call([&] { e.dev.destroy_ah(ah); });
	close_endpoint(e);
	return status;
}

/* One side, server or client, on the main lcore: set up (open_device,
 * --oob, the AH), run (server_main / client_main), report. */
template <class E> int run_side(runtime &rt, const perf_config &c, uint64_t deadline)
{
	const bool is_server = c.mode == "server";
	E e{c.mode.c_str(), is_server ? &c.server : &c.client, is_server ? &c.client : &c.server};
	std::string err;
	if (int rc = open_endpoint(rt, c, e, &err); rc != 0) {
		fprintf(stderr, "rdgram-perf: driver %s: cannot open RDMA device '%s' port %u: %s (%s)\n",
			e.dev.driver_name(), c.rdma.device.empty() ? "(first found)" : c.rdma.device.c_str(),
			unsigned(c.rdma.port), err.c_str(), strerror(rc));
		close_endpoint(e);
		return 1;
	}
	const port_attr &pa = e.dev.port();
	e.where = {rte_get_main_lcore(), unsigned(rte_lcore_to_cpu_id(int(rte_get_main_lcore())))};
	rt.bind_this_thread(e.where.cpu);
	std::string gid = c.rdma.gid_index < pa.gids.size() ? format_gid(pa.gids[c.rdma.gid_index]) : "-";
	if (!c.json)
		printf(" rdgram-perf: %s, driver %s, QPN 0x%06x, GID[%u] %s, LID %u, %s port\n", c.mode.c_str(),
		       e.dev.driver_name(), e.q.qpn(), unsigned(c.rdma.gid_index), gid.c_str(), unsigned(pa.lid),
		       pa.link == link_layer::ethernet ? "Ethernet (RoCE)" : "InfiniBand");
	fflush(stdout);

	/* --oob-proto perftest|ud_pingpong: the peer is a standard tool
	 * (perf_peer.h). */
	if (peer_proto(c))
		return run_side_peer(rt, e, c, deadline);

	perf_config cx = c;
	if (!c.rdma.oob.empty() && exchange_oob(c, e, &cx) != 0) {
		close_endpoint(e);
		return 1;
	}
	run_ctx<E> x{&cx, &rt, &e, deadline};
	int status = 0;
	if (is_server) {
		/* e.to is unset: server_main learns the client from its SYNC. */
		server_main<E>(&x);
		if (x.no_client) {
			fprintf(stderr, "rdgram-perf: no client SYNC before the %.1f s timeout\n", c.timeout_s);
			status = 1;
		} else if (!x.ok) {
			status = perf_stop.load() ? 130 : 1;
		}
		if (!c.json)
			printf(" server: answered %lu data messages in the last test\n", (unsigned long)x.served);
	} else if (int ae = create_server_ah(rt, e, cx, deadline); ae != 0) {
		fprintf(stderr, "rdgram-perf: creating the AH to %s failed: %s\n", format_gid(cx.server.address).c_str(),
			strerror(ae));
		status = 1;
	} else {
		client_main<E>(&x);
		print_results(c, x.lat, x.bw);
		status = client_status(c, x.ok);
	}
	fflush(stdout);
	print_drops(e.dev.driver_name(), e.q.counters());
	if (e.to.ah != ah_null)
		rt.ctl().call([&] { e.dev.destroy_ah(e.to.ah); });
	close_endpoint(e);
	return status;
}

} // namespace

int run_rdma(runtime &rt, const perf_config &c, uint64_t deadline)
{
	if (c.mode == "loopback") {
		fprintf(stderr, "rdgram-perf: driver %s runs as mode = \"server\" or \"client\" (one per host), "
				"not loopback\n",
			c.driver.c_str());
		return 2;
	}
#ifdef RDGRAM_PERF_VERBS
	if (c.driver == "verbs")
		return run_side<verbs_endpoint>(rt, c, deadline);
#endif
#ifdef RDGRAM_PERF_MLX5
	if (c.driver == "mlx5")
		return run_side<mlx5_endpoint>(rt, c, deadline);
#endif
	fprintf(stderr, "rdgram-perf: driver %s was not built in (see the meson summary: Drivers)\n",
		c.driver.c_str());
	return 2;
}

} // namespace rdgram::perf
