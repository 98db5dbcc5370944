/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf --oob-proto perftest|ud_pingpong on an open side, on every
 * driver: who we are for the exchange (peer_self), how the AH to the peer
 * is made (the soft driver resolves its MAC by ARP/ND, since the tools
 * exchange no MAC; an RDMA device makes it from the peer's GID, and LID
 * on InfiniBand), then run_peer (perf_peer.h) on worker 0's queue, on
 * the calling thread (the main lcore). (Main thread.)
 */
#ifndef RDGRAM_PERF_PEER_SIDE_H
#define RDGRAM_PERF_PEER_SIDE_H

#include <cstdio>
#include <cstring>
#include <string>

#include "perf_peer.h"
#include "perf_port.h"
#include "perf_setup.h"

namespace rdgram::perf {

/* One session against a perftest or ibv_ud_pingpong peer on s (its one
 * worker's queue up). Returns the exit status: 0, 1 (the exchange or the
 * test failed), 2 (a setting the port cannot serve); one line on stderr
 * says why. */
template <class Dev> int run_peer_side(runtime &rt, const perf_config &c, side<Dev> &s, uint64_t deadline)
{
	endpoint<Dev> &e = *s.w[0];
	const port_attr &pa = s.dev.port();
	peer_self ps;
	ps.qpn = e.qpn;
	ps.mtu = pa.active_mtu;
	if constexpr (is_soft<Dev>) {
		ps.gid = s.self->address;
		ps.with_gid = true;
		ps.device = "soft, " + c.port.devargs;
	} else {
		ps.lid = pa.lid;
		ps.with_gid = pa.link == link_layer::ethernet || pa.grh_required || c.rdma.gid_index >= 0;
		if (ps.with_gid && c.rdma.sgid_index() >= pa.gids.size()) {
			fprintf(stderr, "rdgram-perf: [rdma] gid_index %u: the port has %zu GIDs\n",
				unsigned(c.rdma.sgid_index()), pa.gids.size());
			return 2;
		}
		if (ps.with_gid)
			ps.gid = pa.gids[c.rdma.sgid_index()];
		ps.device = std::string(s.dev.driver_name()) + ", " +
			    (c.rdma.device.empty() ? "first device" : c.rdma.device);
	}
	peer_port<typename Dev::queue_type> pp;
	pp.q = &e.q;
	pp.mp = s.dev.mempool();
	pp.inline_max = e.inline_max;
	pp.qs = rt.qsbr();
	pp.tid = e.where.lcore;
	pp.make_ah = [&](const wire::gid &g, uint16_t dlid, const std::function<void()> &pump, ah_handle *out,
			 std::string *err) {
		if constexpr (is_soft<Dev>) {
			(void)dlid;
			return soft_ah(rt, s.dev, g, pump, deadline, out, err);
		} else {
			(void)pump;
			ibv_ah_attr a{};
			a.port_num = 1;
			a.dlid = dlid;
			a.is_global = ps.with_gid;
			a.grh.sgid_index = c.rdma.sgid_index();
			a.grh.hop_limit = 64;
			memcpy(a.grh.dgid.raw, g.raw, 16);
			int ae = 0;
			rt.ctl().call([&] { *out = s.dev.create_ah(a, &ae); });
			if (ae != 0)
				*err = "creating the AH to " +
				       (ps.with_gid ? format_gid(g) : "LID " + std::to_string(dlid)) + " failed: " + strerror(ae);
			return ae;
		}
	};
	rt.bind_this_thread(e.where.cpu);
	poll_thread_online(rt.qsbr(), e.where.lcore);
	const int status = run_peer(c, pp, ps, deadline, &e.to.ah); /* side::close destroys the AH */
	poll_thread_offline(rt.qsbr(), e.where.lcore);
	if constexpr (is_soft<Dev>) {
		/* Every drop counter that is not zero, by name (frames of
		 * other protocols on a shared link land in rx_not_udp and the
		 * like). */
		std::string drops;
		e.q.counters().for_each([&](const xstat_name &n, uint64_t v) {
			if (v != 0 && n.kind != counter_kind::traffic)
				drops.append(1, ' ').append(n.name).append(1, '=').append(std::to_string(v));
		});
		fprintf(stderr, " %s counters: rx_pkts=%lu tx_pkts=%lu%s\n", c.mode.c_str(),
			(unsigned long)e.q.counters().rx_pkts, (unsigned long)e.q.counters().tx_pkts, drops.c_str());
	} else {
		print_drops(s.dev.driver_name(), e.q.counters());
	}
	return status;
}

} // namespace rdgram::perf

#endif
