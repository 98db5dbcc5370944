/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf on the verbs and mlx5 drivers. Never run on RDMA hardware:
 * no device exists where it was written; here it is exercised only up to
 * the device failing to open (tests/integration/perf_rdma_driver.sh).
 *
 * Addressing: QP numbers are the device's to choose, so the soft driver's
 * fixed qpn settings cannot be used for our own QP. The server prints its
 * QPN, GID and LID; the client is given them ([server] qpn, address, lid).
 * The server learns the client from the first SYNC it receives (the
 * client repeats SYNC until it is answered, so taking the first one out
 * of the stream loses nothing): its AH comes from that completion
 * (ibv_create_ah_from_wc semantics, rdgram/ah_from_wc.h).
 */
#include "perf_rdma.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "perf_oob.h"
#include "perf_peer.h"
#include "perf_tests.h"
#include "rdgram/ah_from_wc.h"
#include "rdgram/config.h"

#ifdef RDGRAM_PERF_VERBS
#include "verbs_device.h"
#endif
#ifdef RDGRAM_PERF_MLX5
#include "mlx5_device.h"
#endif

namespace rdgram::perf {

namespace {

#ifdef RDGRAM_PERF_VERBS
/* A verbs device, its mempool and one UD queue. */
struct verbs_side {
	static constexpr const char *name = "verbs";
	verbs::verbs_device dev;
	verbs::verbs_queue q;
	rte_mempool *mp = nullptr;
	bool queue = false;

	int open(runtime &rt, const perf_config &c, std::string *err)
	{
		verbs::verbs_config vc;
		vc.device = c.rdma.device;
		vc.port_num = c.rdma.port;
		vc.max_ah = c.max_ah;
		vc.qsbr = rt.qsbr();
		vc.topology = rt.topology();
		if (int rc = dev.open(vc); rc != 0) {
			*err = dev.error();
			return rc;
		}
		const int node = dev.port().numa_node >= 0 ? dev.port().numa_node : SOCKET_ID_ANY;
		mp = rte_pktmbuf_pool_create("perf_verbs", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, node);
		if (mp == nullptr) {
			*err = "mempool: " + std::string(rte_strerror(rte_errno));
			return ENOMEM;
		}
		if (int rc = dev.register_mempool(mp); rc != 0) {
			*err = dev.error();
			return rc;
		}
		verbs::verbs_queue_config qc;
		qc.pool = mp;
		qc.qkey = c.mode == "server" ? c.server.qkey : c.client.qkey;
		qc.max_inline = c.inline_size;
		qc.signal_every = c.cq_mod;
		if (int rc = dev.create_queue(qc, q, node); rc != 0) {
			*err = dev.error();
			return rc;
		}
		queue = true;
		return 0;
	}
	rte_mempool *mempool() const { return mp; }
	uint32_t inline_max(const perf_config &c) const
	{
		return c.inline_size < q.max_inline() ? c.inline_size : q.max_inline();
	}
	void close()
	{
		if (queue)
			dev.destroy_queue(q);
		dev.close();
		rte_mempool_free(mp);
	}
};
#endif

#ifdef RDGRAM_PERF_MLX5
/* An mlx5 device: its QP, CQs and mempool are the device's own. */
struct mlx5_side {
	static constexpr const char *name = "mlx5";
	mlx5::mlx5_device dev;
	mlx5::mlx5_queue q;

	int open(runtime &rt, const perf_config &c, std::string *err)
	{
		mlx5::mlx5_config mc;
		mc.device = c.rdma.device;
		mc.port_num = c.rdma.port;
		mc.qkey = c.mode == "server" ? c.server.qkey : c.client.qkey;
		mc.max_inline = c.inline_size;
		mc.signal_every = c.cq_mod;
		mc.max_ah = c.max_ah;
		mc.qsbr = rt.qsbr();
		if (int rc = dev.open(mc); rc != 0) {
			*err = dev.error();
			return rc;
		}
		if (int rc = dev.init_queue(q); rc != 0) {
			*err = "init_queue: " + std::string(strerror(rc));
			return rc;
		}
		return 0;
	}
	rte_mempool *mempool() const { return dev.mempool(); }
	uint32_t inline_max(const perf_config &c) const { return c.inline_size; }
	void close()
	{
		q.detach();
		dev.close();
	}
};
#endif

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

/* The server: waits for the client's first SYNC and makes the AH to it
 * from that completion. */
template <class S>
bool learn_client(runtime &rt, S &s, const perf_config &c, const loop_env &env, peer *to)
{
	gid_index gids;
	gids.build(s.dev.port().gids);
	recv_wc wcs[decltype(s.q)::max_burst];
	for (;;) {
		s.q.tx_flush();
		const uint16_t n = s.q.rx_burst(wcs, decltype(s.q)::max_burst);
		bool got = false;
		for (uint16_t i = 0; i < n; i++) {
			const recv_wc &wc = wcs[i];
			if (!got && (wc.wc_flags & wc_with_imm) && wc.imm_data == imm_sync) {
				int err = 0;
				ah_handle h = ah_null;
				rt.ctl().call([&] {
					h = create_ah_from_wc(s.dev, gids, 1, wc, rte_pktmbuf_mtod(wc.mbuf, void *),
							      &err);
				});
				if (err != 0) {
					fprintf(stderr, "rdgram-perf: AH from the client's SYNC (QPN 0x%06x): %s\n",
						wc.src_qp, strerror(err));
				} else {
					*to = peer{h, wc.src_qp, c.client.qkey};
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

/* Every drop counter of the queue that is not zero, by name: the driver's
 * whole set (stats.h, drivers/<d>/<d>_counters.h). One line on stderr,
 * none when nothing was dropped. */
template <class Q> void print_drops(const char *drv, const Q &q)
{
	std::string out;
	q.counters().for_each([&](const xstat_name &n, uint64_t v) {
		if (n.kind == counter_kind::drop && v != 0)
			out += std::string(" ") + n.name + "=" + std::to_string(v);
	});
	if (!out.empty())
		fprintf(stderr, "rdgram-perf: driver %s drops:%s\n", drv, out.c_str());
}

/* The peer of perftest or ibv_ud_pingpong on an open device: run_peer
 * with an AH made by the device from the peer's GID (and LID on IB). */
template <class S> int run_side_peer(runtime &rt, S &s, const perf_config &c, uint64_t deadline)
{
	const port_attr &pa = s.dev.port();
	const unsigned lcore = rte_get_main_lcore();
	peer_self ps;
	ps.qpn = s.q.qpn();
	ps.lid = pa.lid;
	ps.with_gid = pa.link == link_layer::ethernet || pa.grh_required || c.rdma.gid_index_set;
	if (ps.with_gid && c.rdma.gid_index >= pa.gids.size()) {
		fprintf(stderr, "rdgram-perf: [rdma] gid_index %u: the port has %zu GIDs\n", unsigned(c.rdma.gid_index),
			pa.gids.size());
		s.close();
		return 2;
	}
	if (ps.with_gid)
		ps.gid = pa.gids[c.rdma.gid_index];
	ps.mtu = pa.active_mtu;
	ps.device = std::string(S::name) + ", " + (c.rdma.device.empty() ? "first device" : c.rdma.device);
	peer_port<decltype(s.q)> pp;
	pp.q = &s.q;
	pp.mp = s.mempool();
	pp.inline_max = s.inline_max(c);
	pp.qs = rt.qsbr();
	pp.tid = lcore;
	pp.make_ah = [&](const wire::gid &g, uint16_t dlid, const std::function<void()> &, ah_handle *out,
			 std::string *err) {
		ibv_ah_attr a{};
		a.port_num = 1;
		a.dlid = dlid;
		a.is_global = ps.with_gid;
		a.grh.sgid_index = c.rdma.gid_index;
		a.grh.hop_limit = 64;
		memcpy(a.grh.dgid.raw, g.raw, 16);
		int e = 0;
		rt.ctl().call([&] { *out = s.dev.create_ah(a, &e); });
		if (e != 0)
			*err = "creating the AH to " + (ps.with_gid ? format_gid(g) : "LID " + std::to_string(dlid)) +
			       " failed: " + strerror(e);
		return e;
	};
	poll_thread_online(rt.qsbr(), lcore);
	ah_handle ah = ah_null;
	const int status = run_peer(c, pp, ps, deadline, &ah);
	poll_thread_offline(rt.qsbr(), lcore);
	print_drops(S::name, s.q);
	if (ah != ah_null)
		rt.ctl().call([&] { s.dev.destroy_ah(ah); });
	s.close();
	return status;
}

template <class S> int run_side(runtime &rt, const perf_config &c, uint64_t deadline)
{
	S s;
	std::string err;
	if (int rc = s.open(rt, c, &err); rc != 0) {
		fprintf(stderr, "rdgram-perf: driver %s: cannot open RDMA device '%s' port %u: %s (%s)\n", S::name,
			c.rdma.device.empty() ? "(first found)" : c.rdma.device.c_str(), unsigned(c.rdma.port),
			err.c_str(), strerror(rc));
		s.close();
		return 1;
	}
	const port_attr &pa = s.dev.port();
	const unsigned lcore = rte_get_main_lcore();
	rt.bind_this_thread(unsigned(rte_lcore_to_cpu_id(int(lcore))));
	const uint32_t inl = s.inline_max(c);
	std::string gid = c.rdma.gid_index < pa.gids.size() ? format_gid(pa.gids[c.rdma.gid_index]) : "-";
	if (!c.json)
		printf(" rdgram-perf: %s, driver %s, QPN 0x%06x, GID[%u] %s, LID %u, %s port\n", c.mode.c_str(),
		       S::name, s.q.qpn(), unsigned(c.rdma.gid_index), gid.c_str(), unsigned(pa.lid),
		       pa.link == link_layer::ethernet ? "Ethernet (RoCE)" : "InfiniBand");
	fflush(stdout);

	/* --oob-proto perftest|ud_pingpong: the peer is a standard tool
	 * (perf_peer.h). */
	if (peer_proto(c))
		return run_side_peer(rt, s, c, deadline);

	/* --oob: swap addresses with the peer over TCP (perf_oob.h), so the
	 * client needs no QPN from the config. */
	perf_config cx = c;
	if (!c.rdma.oob.empty()) {
		oob_addr self{}, peer{};
		if (c.rdma.gid_index < pa.gids.size())
			memcpy(self.gid, pa.gids[c.rdma.gid_index].raw, 16);
		self.qpn = s.q.qpn();
		self.qkey = c.mode == "server" ? c.server.qkey : c.client.qkey;
		self.lid = pa.lid;
		std::string oerr;
		if (int rc = oob_exchange(c.rdma.oob, c.mode == "server", self, c.timeout_s, &peer, &oerr); rc != 0) {
			fprintf(stderr, "rdgram-perf: --oob %s: %s\n", c.rdma.oob.c_str(), oerr.c_str());
			s.close();
			return 1;
		}
		endpoint_config &e = c.mode == "server" ? cx.client : cx.server;
		memcpy(e.address.raw, peer.gid, 16);
		e.qpn = peer.qpn;
		e.qkey = peer.qkey;
		e.lid = peer.lid;
		if (!c.json)
			printf(" rdgram-perf: --oob %s: peer QPN 0x%06x, GID %s, LID %u, Q_Key 0x%x\n", c.rdma.oob.c_str(),
			       e.qpn, format_gid(e.address).c_str(), unsigned(e.lid), e.qkey);
		fflush(stdout);
	}

	poll_thread_online(rt.qsbr(), lcore);
	loop_env env{rt.qsbr(), lcore, deadline, nullptr};
	peer to{ah_null, 0, 0};
	int status = 0;
	if (c.mode == "server") {
		uint64_t served = 0;
		if (!learn_client(rt, s, cx, env, &to)) {
			fprintf(stderr, "rdgram-perf: no client SYNC before the %.1f s timeout\n", c.timeout_s);
			status = 1;
		} else if (!serve(s.q, to, inl, env, &served)) {
			status = perf_stop.load() ? 130 : 1;
		}
		if (!c.json)
			printf(" server: answered %lu data messages in the last test\n", (unsigned long)served);
	} else {
		int e = 0;
		const ibv_ah_attr a = server_ah_attr(cx, pa);
		/* On RoCE ibv_create_ah resolves the server's MAC in the kernel
		 * and gives up (ETIMEDOUT, EHOSTUNREACH) when no ARP/ND answer
		 * came within its own wait, e.g. while the server, told our
		 * address by --oob, is still opening its port. Try again until
		 * the timeout, as the registry's retry does for ENOMEM. */
		for (;;) {
			rt.ctl().call([&] { to.ah = s.dev.create_ah(a, &e); });
			if ((e != ETIMEDOUT && e != EHOSTUNREACH && e != ENETUNREACH) || past(deadline, rte_rdtsc()) ||
			    perf_stop.load())
				break;
			rte_delay_us_sleep(100000);
		}
		to.qpn = cx.server.qpn;
		to.qkey = cx.server.qkey;
		if (e != 0) {
			fprintf(stderr, "rdgram-perf: creating the AH to %s failed: %s\n",
				format_gid(cx.server.address).c_str(), strerror(e));
			status = 1;
		} else {
			const bool do_lat = c.test == "lat" || c.test == "both", do_bw = c.test != "lat";
			const bool txonly = c.test == "txonly";
			std::vector<lat_result> lat;
			std::vector<bw_result> bw;
			bool ok = true;
			if (do_lat) {
				client_params cp{c.size, c.lat_iters, c.warmup, inl, c.tx_depth, c.use_imm, !do_bw, false};
				std::vector<double> samples;
				lat_result r;
				ok = client_lat(s.q, s.mempool(), to, cp, env, samples, &r);
				if (ok)
					lat.push_back(r);
			}
			if (do_bw && ok) {
				client_params cp{c.size, c.bw_iters, 0, inl, c.tx_depth, c.use_imm, true, txonly};
				bw_result r;
				ok = client_bw(s.q, s.mempool(), to, cp, env, &r);
				if (ok)
					bw.push_back(r);
			}
			if (c.json) {
				for (const auto &r : lat)
					printf("%s\n", lat_json(r).c_str());
				for (const auto &r : bw)
					printf("%s\n", bw_json(r).c_str());
			} else {
				if (!lat.empty())
					print_lat_table(stdout, lat);
				if (!bw.empty())
					print_bw_table(stdout, bw);
			}
			if (!ok && perf_stop.load()) {
				fprintf(stderr, "rdgram-perf: interrupted\n");
				status = 130;
			} else if (!ok) {
				fprintf(stderr, "rdgram-perf: the test did not complete before the %.1f s timeout\n",
					c.timeout_s);
				status = 1;
			}
		}
	}
	poll_thread_offline(rt.qsbr(), lcore);
	fflush(stdout);
	print_drops(S::name, s.q);
	if (to.ah != ah_null)
		rt.ctl().call([&] { s.dev.destroy_ah(to.ah); });
	s.close();
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
	if (c.driver == "verbs") {
#ifdef RDGRAM_PERF_VERBS
		return run_side<verbs_side>(rt, c, deadline);
#endif
	} else if (c.driver == "mlx5") {
#ifdef RDGRAM_PERF_MLX5
		return run_side<mlx5_side>(rt, c, deadline);
#endif
	}
	fprintf(stderr, "rdgram-perf: driver %s was not built in (see the meson summary: Drivers)\n",
		c.driver.c_str());
	return 2;
}

} // namespace rdgram::perf
