/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf --oob-proto perftest|ud_pingpong on the soft driver: a DPDK
 * port ([server|client] vdev or --port) speaking RoCEv2 as the peer of
 * ib_send_lat/ib_send_bw/ibv_ud_pingpong on a host with a RoCE NIC (or
 * rxe). Our address, MAC and QPN come from the config; the peer's QPN and
 * GID from the exchange; its MAC by ARP or ND (the soft driver's
 * neighbour table, resolved while the exchange waits), since the tools
 * exchange no MAC.
 */
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <rte_ethdev.h>
#include <rte_lcore.h>

#include "perf_peer.h"
#include "perf_port.h"
#include "rdgram/config.h"
#include "soft_device.h"

namespace rdgram::perf {

int run_soft_peer(runtime &rt, const perf_config &c, uint64_t deadline)
{
	const endpoint_config &self = c.mode == "server" ? c.server : c.client;
	if (self.vdev.empty()) {
		fprintf(stderr, "rdgram-perf: mode %s needs %s.vdev in the config or --port (a DPDK port)\n",
			c.mode.c_str(), c.mode.c_str());
		return 2;
	}
	uint16_t port;
	if (std::string err; apps::probe_port(self.vdev, &port, &err) != 0) {
		fprintf(stderr, "rdgram-perf: %s\n", err.c_str());
		return 1;
	}
	const lcore_cpu me{rte_get_main_lcore(), unsigned(rte_lcore_to_cpu_id(int(rte_get_main_lcore())))};
	soft::soft_device dev;
	soft::soft_config sc(c); /* [port]: mtu, pkey, max_ah, neighbour resolution */
	sc.port_id = port;
	sc.set_mac = true;
	sc.mac = self.mac;
	sc.addresses = {self.address};
	sc.resolve = true; /* the tools exchange no MAC: ARP/ND */
	sc.qsbr = rt.qsbr();
	sc.av_nodes = replica_nodes(rt.topology(), {me});
	if (int rc = dev.open(sc); rc != 0) {
		fprintf(stderr, "rdgram-perf: %s port: %s\n", c.mode.c_str(), dev.error().c_str());
		return 1;
	}
	/* The control thread answers ARP/ND for our address, resolves the
	 * peer's and reclaims AH slots. */
	const bool polled = rt.ctl().add_poller(&soft::soft_device::control_poller, &dev) == 0;
	soft::soft_queue q;
	int status = 0;
	ah_handle ah = ah_null;
	if (int rc = dev.create_queue({.index = 0, .socket = sc.av_nodes[0]}, q); rc != 0) {
		fprintf(stderr, "rdgram-perf: %s queue: %s\n", c.mode.c_str(), dev.error().c_str());
		status = 1;
	} else if (q.add_qp(self.qpn, self.qkey), !wait_link_up(port, deadline)) {
		fprintf(stderr, "rdgram-perf: the link of %s never came up\n", self.vdev.c_str());
		status = 1;
	} else {
		rt.bind_this_thread(me.cpu);
		poll_thread_online(rt.qsbr(), me.lcore);
		peer_self ps;
		ps.qpn = self.qpn;
		ps.gid = self.address;
		ps.with_gid = true;
		ps.mtu = dev.port().active_mtu;
		ps.device = "soft, " + self.vdev;
		peer_port<soft::soft_queue> pp;
		pp.q = &q;
		pp.mp = dev.mempool();
		pp.inline_max = c.inline_size;
		pp.qs = rt.qsbr();
		pp.tid = me.lcore;
		pp.make_ah = [&](const wire::gid &g, uint16_t, const std::function<void()> &pump, ah_handle *out,
				 std::string *err) { return soft_ah(rt, dev, g, pump, deadline, out, err); };
		status = run_peer(c, pp, ps, deadline, &ah);
		poll_thread_offline(rt.qsbr(), me.lcore);
	}
	/* Every drop counter that is not zero, by name (frames of other
	 * protocols on a shared link land in rx_not_udp and the like). */
	std::string drops;
	q.counters().for_each([&](const xstat_name &n, uint64_t v) {
		if (v != 0 && n.kind != counter_kind::traffic)
			drops.append(1, ' ').append(n.name).append(1, '=').append(std::to_string(v));
	});
	fprintf(stderr, " %s counters: rx_pkts=%lu tx_pkts=%lu%s\n", c.mode.c_str(),
		(unsigned long)q.counters().rx_pkts, (unsigned long)q.counters().tx_pkts, drops.c_str());
	if (ah != ah_null)
		rt.ctl().call([&] { dev.destroy_ah(ah); });
	if (polled)
		rt.ctl().remove_poller(&soft::soft_device::control_poller, &dev);
	dev.close();
	return status;
}

} // namespace rdgram::perf
