/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-ah's set-up and tear-down (main thread): the net_ring pair, both
 * soft devices and their queues, the AH service and client, telemetry, and
 * the worker lcore (ah_engine.h).
 */
#include <algorithm>
#include <cstdio>
#include <cstring>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "ah_attr.h"
#include "ah_engine.h"
#include "ah_host.h"
#include "rdgram/config.h"

namespace rdgram::ahtool {

wire::gid addr_of(bool v6, uint8_t net, uint32_t host)
{
	wire::gid g{};
	if (v6) {
		g.raw[0] = 0xfd;
		g.raw[1] = net;
		for (int i = 0; i < 4; i++)
			g.raw[12 + i] = uint8_t(host >> (24 - 8 * i));
	} else {
		/* 10.net.host: IPv4-mapped, as RoCEv2 GID tables hold IPv4. */
		g.raw[10] = g.raw[11] = 0xff;
		g.raw[12] = 10;
		g.raw[13] = net;
		g.raw[14] = uint8_t(host >> 8);
		g.raw[15] = uint8_t(host);
	}
	return g;
}

ibv_ah_attr attr_to(const wire::gid &dst, uint32_t flow)
{
	return apps::gid_ah_attr(dst.raw, 0, 64, flow);
}

/* Destinations: static ones on 10.2/16 (fd02::), resolved ones on
 * 10.3/16 (fd03::), which the peer owns and answers ARP/ND for. */
ah_dests plan_dests(const ah_app_config &c, bool inspect, bool storm, uint32_t storm_n)
{
	ah_dests ds;
	ds.peer_addrs = {addr_of(c.ipv6, 1, 2)};
	if (inspect) {
		for (uint32_t d = 0; d < c.dests; d++)
			ds.statics.push_back(addr_of(c.ipv6, 2, d + 1));
		for (uint32_t d = 0; d < c.resolved; d++)
			ds.peer_addrs.push_back(addr_of(c.ipv6, 3, d + 1));
	} else {
		const uint32_t nd = storm ? std::min(c.storm_dests, storm_n) : std::min(c.storm_dests, c.count);
		for (uint32_t d = 0; d < nd; d++) {
			const wire::gid g = addr_of(c.ipv6, storm && c.storm_resolve ? 3 : 2, d + 1);
			ds.storm.push_back(g);
			if (storm && c.storm_resolve)
				ds.peer_addrs.push_back(g);
			else
				ds.statics.push_back(g);
		}
	}
	return ds;
}

/* Opens both devices over a ring pair, the service and the worker. */
int bring_up(host &h, const std::vector<wire::gid> &static_dests, const std::vector<wire::gid> &peer_addrs)
{
	const ah_app_config &c = *h.c;
	rte_ring *r0 = rte_ring_create("rdgram_ah0", 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	rte_ring *r1 = rte_ring_create("rdgram_ah1", 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	const int pl = r0 && r1 ? rte_eth_from_rings("rdgram_ah_local", &r0, 1, &r1, 1, 0) : -1;
	const int pp = r0 && r1 ? rte_eth_from_rings("rdgram_ah_peer", &r1, 1, &r0, 1, 0) : -1;
	if (pl < 0 || pp < 0) {
		fprintf(stderr, "rdgram-ah: cannot create the net_ring pair\n");
		return 1;
	}
	auto lcores = h.rt.poll_lcores(rte_eth_dev_socket_id(uint16_t(pl)));
	const unsigned main_l = rte_get_main_lcore();
	const lcore_cpu *w = nullptr;
	for (const auto &l : lcores)
		if (l.lcore != main_l) {
			w = &l;
			break;
		}
	if (w == nullptr) {
		fprintf(stderr, "rdgram-ah: needs two lcores (EAL -l with two CPUs): one polls the queues\n");
		return 2;
	}
	h.worker = *w;
	const std::vector<int> nodes = replica_nodes(h.rt.topology(), {h.worker});
	rte_ether_addr mac_l, mac_p;
	parse_mac("02:00:00:00:a0:01", &mac_l);
	parse_mac("02:00:00:00:a0:02", &mac_p);

	soft::soft_config pc;
	pc.port_id = uint16_t(pp);
	pc.set_mac = true;
	pc.mac = mac_p;
	pc.addresses = peer_addrs;
	pc.neighbours = {{addr_of(c.ipv6, 1, 1), mac_l}};
	pc.qsbr = h.rt.qsbr();
	pc.av_nodes = nodes;
	pc.nb_mbufs = 4095;
	soft::soft_config lc;
	lc.port_id = uint16_t(pl);
	lc.set_mac = true;
	lc.mac = mac_l;
	lc.addresses = {addr_of(c.ipv6, 1, 1)};
	lc.max_ah = c.max_ah;
	lc.neigh_ttl_ms = c.neigh_ttl_ms;
	lc.qsbr = h.rt.qsbr();
	lc.av_nodes = nodes;
	lc.nb_mbufs = 8191;
	for (const auto &d : static_dests)
		lc.neighbours.push_back({d, mac_p});
	if (h.peer.open(pc) != 0) {
		fprintf(stderr, "rdgram-ah: peer port: %s\n", h.peer.error().c_str());
		return 1;
	}
	if (h.local.open(lc) != 0) {
		fprintf(stderr, "rdgram-ah: local port: %s\n", h.local.error().c_str());
		return 1;
	}
	if (h.local.create_queue({.index = 0, .socket = nodes[0]}, h.ql) != 0) {
		fprintf(stderr, "rdgram-ah: local port: %s\n", h.local.error().c_str());
		return 1;
	}
	h.ql.add_qp(local_qpn, qkey);
	if (h.peer.create_queue({.index = 0, .socket = nodes[0]}, h.qp) != 0) {
		fprintf(stderr, "rdgram-ah: peer port: %s\n", h.peer.error().c_str());
		return 1;
	}
	h.qp.add_qp(peer_qpn, qkey);
	/* The peer answers ARP/ND from its control poller; the local device's
	 * housekeeping runs in the AH service's poller. */
	h.peer_polled = h.rt.ctl().add_poller(&soft::soft_device::control_poller, &h.peer) == 0;
	ah_service_config sc;
	sc.capacity = c.capacity;
	sc.qsbr = h.rt.qsbr();
	sc.socket = nodes[0];
	sc.app_timeout_us = uint64_t(c.timeout_s * 1e6);
	if (int rc = h.svc.start(h.local, h.rt.ctl(), sc); rc != 0) {
		fprintf(stderr, "rdgram-ah: AH service: %s\n", strerror(rc));
		return 1;
	}
	h.svc_up = true;
	ah_client_config cc;
	cc.mp = h.local.mempool();
	cc.socket = nodes[0];
	if (int rc = h.svc.add_client(h.cl, cc); rc != 0) {
		fprintf(stderr, "rdgram-ah: AH client: %s\n", strerror(rc));
		return 1;
	}
	h.client_up = true;

	telemetry::attachment a;
	a.app = "rdgram-ah";
	a.ctl = &h.rt.ctl();
	a.service = &h.svc;
	a.ah_devices = {&h.local};
	a.lcores = {{h.worker.lcore, h.worker.cpu, numa_of_cpu(h.rt.topology(), h.worker.cpu), "poll"},
		    {main_l, unsigned(std::max(0, rte_lcore_to_cpu_id(int(main_l)))),
		     numa_of_cpu(h.rt.topology(), unsigned(std::max(0, rte_lcore_to_cpu_id(int(main_l))))), "app"}};
	char ml[RTE_ETHER_ADDR_FMT_SIZE], mp[RTE_ETHER_ADDR_FMT_SIZE];
	rte_ether_format_addr(ml, sizeof(ml), &h.local.mac());
	rte_ether_format_addr(mp, sizeof(mp), &h.peer.mac());
	a.ports = {{&h.local, pl, "local", ml}, {&h.peer, pp, "peer", mp}};
	a.qps = {{"local_qp0", h.worker.lcore, pl, local_qpn, &h.pub_l},
		 {"peer_qp0", h.worker.lcore, pp, peer_qpn, &h.pub_p}};
	if (int rc = telemetry::attach(std::move(a)); rc != 0)
		fprintf(stderr, "rdgram-ah: telemetry not attached: %s\n", strerror(rc));

	if (launch_on_lcore(worker_main, &h, h.worker.lcore) != 0) {
		fprintf(stderr, "rdgram-ah: cannot launch the worker on lcore %u\n", h.worker.lcore);
		return 1;
	}
	h.worker_running = true;
	return 0;
}

void tear_down(host &h)
{
	telemetry::detach();
	if (h.worker_running) {
		h.stop.store(true, std::memory_order_release);
		wait_on_lcore(h.worker.lcore);
		h.worker_running = false;
	}
	if (h.client_up) {
		h.svc.remove_client(h.cl);
		h.cl.fini();
	}
	if (h.svc_up)
		h.svc.stop();
	if (h.peer_polled)
		h.rt.ctl().remove_poller(&soft::soft_device::control_poller, &h.peer);
	h.local.close();
	h.peer.close();
}

/* Drops the references the app API took, in one control-thread call
 * (destroy_ah is one round trip per AH: seconds for a storm). The same
 * registry release destroy_ah does, without its app_destroys count. */
void release_all(host &h, const std::vector<ah_handle> &hs, const std::vector<int> &errs, unsigned times)
{
	h.rt.ctl().call([&] {
		for (size_t i = 0; i < hs.size(); i++)
			if (errs[i] == 0)
				for (unsigned k = 0; k < times; k++)
					h.svc.registry().release(hs[i]);
	});
}

} // namespace rdgram::ahtool
