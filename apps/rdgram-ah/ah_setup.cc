/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-ah's set-up and tear-down (main thread): the net_ring pair, both
 * soft devices and their queues (one per worker), the AH service and a
 * client per worker, telemetry, and the run of the poll threads
 * (ah_engine.h) beside the mode.
 */
#include <algorithm>
#include <string>
#include <utility>
#include <cstdio>
#include <cstring>

#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "ah_attr.h"
#include "ah_engine.h"
#include "ah_host.h"
#include "open_device.h"
#include "rdgram/config.h"
#include "workers.h"

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

ibv_ah_attr attr_to(const host &h, const wire::gid &dst, uint32_t flow)
{
	const int sgid = dst.is_v4_mapped() ? h.sgid_v4 : h.sgid_v6;
	return apps::gid_ah_attr(dst.raw, uint8_t(sgid < 0 ? 0 : sgid), 64, flow);
}

/* Destinations: static ones on 10.2/16 (fd02::), resolved ones on
 * 10.3/16 (fd03::), which the peer owns and answers ARP/ND for. On a DPDK
 * port: c.to (or the table's static neighbours), whatever owns them. */
ah_dests plan_dests(const ah_app_config &c, bool inspect, bool storm, uint32_t storm_n)
{
	ah_dests ds;
	if (!c.port.devargs.empty()) {
		std::vector<wire::gid> to = c.to;
		if (to.empty())
			for (const auto &n : c.port.neighbours)
				to.push_back(n.ip);
		(inspect ? ds.inspect : ds.storm) = to;
		return ds;
	}
	ds.peer_addrs = {addr_of(c.ipv6, 1, 2)};
	if (inspect) {
		for (uint32_t d = 0; d < c.dests; d++)
			ds.statics.push_back(addr_of(c.ipv6, 2, d + 1));
		for (uint32_t d = 0; d < c.resolved; d++)
			ds.peer_addrs.push_back(addr_of(c.ipv6, 3, d + 1));
		ds.inspect = ds.statics;
		ds.inspect.insert(ds.inspect.end(), ds.peer_addrs.begin() + 1, ds.peer_addrs.end());
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

int pick_lcores(host &h, std::vector<lcore_cpu> *out)
{
	std::string err;
	if (apps::pick_workers(h.rt, SOCKET_ID_ANY, h.c->workers, out, &err) != 0) {
		fprintf(stderr, "rdgram-ah: %s\n", err.c_str());
		return 2;
	}
	return 0;
}

namespace {

/* The local GID table's first address of each family (attr_to's
 * sgid_index); 2 when the destinations' family is missing (printed). */
int index_gids(host &h, const std::vector<wire::gid> &addrs, const std::vector<wire::gid> &dests)
{
	for (size_t i = addrs.size(); i-- > 0;)
		(addrs[i].is_v4_mapped() ? h.sgid_v4 : h.sgid_v6) = int(i);
	for (const auto &d : dests)
		if ((d.is_v4_mapped() ? h.sgid_v4 : h.sgid_v6) < 0) {
			fprintf(stderr, "rdgram-ah: %s: the local port has no %s address (its addresses: the port "
					"table's 'addresses')\n",
				format_gid(d).c_str(), d.is_v4_mapped() ? "IPv4" : "IPv6");
			return 2;
		}
	return 0;
}

/* The in-process net_ring pair (ring i carries queue i's frames: local
 * -> peer (lp) and back (pl); a frame a device sends on queue i arrives
 * on the other's queue i, served by the same worker), and both devices:
 * the local one with the port table's settings, the peer with its vlan
 * and ecn. */
int open_ring_pair(host &h, const std::vector<wire::gid> &static_dests, const std::vector<wire::gid> &peer_addrs,
		   const std::vector<wire::gid> &dests, const std::vector<int> &nodes, int *local_id, int *peer_id)
{
	const ah_app_config &c = *h.c;
	const soft::port_config &pt = c.port;
	const unsigned nw = unsigned(h.workers.size());
	std::vector<rte_ring *> lp(nw), pl(nw);
	for (unsigned i = 0; i < nw; i++) {
		lp[i] = rte_ring_create(("rdgram_ah_lp" + std::to_string(i)).c_str(), 4096, SOCKET_ID_ANY,
					RING_F_SP_ENQ | RING_F_SC_DEQ);
		pl[i] = rte_ring_create(("rdgram_ah_pl" + std::to_string(i)).c_str(), 4096, SOCKET_ID_ANY,
					RING_F_SP_ENQ | RING_F_SC_DEQ);
		if (lp[i] == nullptr || pl[i] == nullptr) {
			fprintf(stderr, "rdgram-ah: cannot create the net_ring pair\n");
			return 1;
		}
		h.workers[i]->ring_lp = lp[i];
		h.workers[i]->ring_pl = pl[i];
	}
	*local_id = rte_eth_from_rings("rdgram_ah_local", pl.data(), nw, lp.data(), nw, 0);
	*peer_id = rte_eth_from_rings("rdgram_ah_peer", lp.data(), nw, pl.data(), nw, 0);
	if (*local_id < 0 || *peer_id < 0) {
		fprintf(stderr, "rdgram-ah: cannot create the net_ring pair\n");
		return 1;
	}
	rte_ether_addr mac_l = pt.mac, mac_p;
	if (!pt.set_mac)
		parse_mac("02:00:00:00:a0:01", &mac_l);
	parse_mac("02:00:00:00:a0:02", &mac_p);

	/* The local port: the port table's settings (mtu, pkey, max_ah,
	 * neigh_*, vlan, ecn, steer); its housekeeping runs in the AH
	 * service's poller. */
	soft::port_config lt = pt;
	lt.name = "local";
	lt.queues = 0;
	lt.set_mac = true;
	lt.mac = mac_l;
	if (lt.addresses.empty())
		lt.addresses = {addr_of(c.ipv6, 1, 1)};
	soft::port_setup ls;
	ls.qsbr = h.rt.qsbr();
	ls.av_nodes = nodes;
	for (const auto &d : static_dests)
		ls.neighbours.push_back({d, mac_p});
	/* The peer: the table's vlan and ecn, the local port its neighbour;
	 * it answers ARP/ND from its control poller. */
	soft::port_config pc;
	pc.name = "peer";
	pc.set_mac = true;
	pc.mac = mac_p;
	pc.addresses = peer_addrs;
	for (const auto &a : lt.addresses)
		pc.neighbours.push_back({a, mac_l});
	pc.nb_mbufs = 4095;
	pc.mtu = pt.mtu;
	pc.pkey = pt.pkey;
	pc.vlan = pt.vlan;
	pc.ecn = pt.ecn;
	soft::port_setup ps;
	ps.qsbr = h.rt.qsbr();
	ps.av_nodes = nodes;
	ps.control = apps::control_host(h.rt);
	if (int rc = index_gids(h, lt.addresses, dests); rc != 0)
		return rc;
	std::string err;
	using apps::open_device;
	if (open_device<soft::soft_device>(h.rt, {.port = &pc, .adopt = *peer_id, .queues = uint16_t(nw), .setup = ps},
					   h.peer_port, &err) != 0 ||
	    open_device<soft::soft_device>(h.rt, {.port = &lt, .adopt = *local_id, .queues = uint16_t(nw), .setup = ls},
					   h.ring_port, &err) != 0) {
		fprintf(stderr, "rdgram-ah: %s\n", err.c_str());
		return 1;
	}
	return 0;
}

/* The local device on the DPDK port of the table's devargs. */
int open_port(host &h, const std::vector<wire::gid> &dests, const std::vector<int> &nodes)
{
	const soft::port_config &pt = h.c->port;
	if (pt.addresses.empty()) {
		const std::string where = pt.where.empty() ? "--port" : pt.where + ": key 'port.addresses'";
		fprintf(stderr, "rdgram-ah: %s: expected the port's IPv4 and IPv6 addresses (its GID table), the "
				"sources of its AHs\n",
			where.c_str());
		return 2;
	}
	if (int rc = index_gids(h, pt.addresses, dests); rc != 0)
		return rc;
	std::string err;
	soft::port_setup s; /* its housekeeping runs in the AH service's poller */
	s.av_nodes = nodes;
	if (apps::open_device<soft::soft_device>(h.rt, {.port = &pt, .queues = uint16_t(h.workers.size()), .setup = s},
						 h.port, &err) != 0) {
		fprintf(stderr, "rdgram-ah: %s\n", err.c_str());
		return 1;
	}
	h.local = &h.port.device();
	h.on_port = true;
	h.local_qkey = h.c->ping_qkey;
	/* The mode's first ARP/ND request would go nowhere before the link
	 * is up (a memif peer that has not connected yet). */
	const uint64_t end = rte_get_timer_cycles() + uint64_t(h.c->timeout_s * double(rte_get_timer_hz()));
	rte_eth_link l{};
	while (rte_eth_link_get_nowait(h.port.port_id(), &l) != 0 || l.link_status != RTE_ETH_LINK_UP) {
		if (rte_get_timer_cycles() >= end) {
			fprintf(stderr, "rdgram-ah: port %s: the link never came up (is the peer running?)\n",
				pt.name.c_str());
			return 1;
		}
		rte_delay_us_sleep(10000);
	}
	return 0;
}

/* Telemetry (/rdgram/): the devices, their queues' QPs, the lcores. */
void attach_telemetry(host &h, int local_id, int peer_id)
{
	const unsigned main_l = rte_get_main_lcore();
	telemetry::attachment a;
	a.app = "rdgram-ah";
	a.ctl = &h.rt.ctl();
	a.service = &h.svc;
	a.ah_devices = {h.local};
	bool main_polls = false;
	for (auto &w : h.workers) {
		a.lcores.push_back({w->where.lcore, w->where.cpu, numa_of_cpu(h.rt.topology(), w->where.cpu), "poll"});
		main_polls |= w->where.lcore == main_l;
	}
	if (!main_polls)
		a.lcores.push_back({main_l, lcore_os_cpu(main_l), numa_of_cpu(h.rt.topology(), lcore_os_cpu(main_l)),
				    "app"});
	char ml[RTE_ETHER_ADDR_FMT_SIZE], mp[RTE_ETHER_ADDR_FMT_SIZE];
	rte_ether_format_addr(ml, sizeof(ml), &h.local->mac());
	a.ports = {{h.local, local_id, "local", ml}};
	if (!h.on_port) {
		rte_ether_format_addr(mp, sizeof(mp), &h.peer.mac());
		a.ports.push_back({&h.peer, peer_id, "peer", mp});
	}
	for (auto &w : h.workers) {
		const unsigned i = w->index;
		a.qps.push_back({"local_qp" + std::to_string(i), w->where.lcore, local_id, local_qpn + 0x10 * i,
				 &w->pub_l});
		if (w->qp_up)
			a.qps.push_back({"peer_qp" + std::to_string(i), w->where.lcore, peer_id, peer_qpn + 0x10 * i,
					 &w->pub_p});
	}
	if (int rc = telemetry::attach(std::move(a)); rc != 0)
		fprintf(stderr, "rdgram-ah: telemetry not attached: %s\n", strerror(rc));
}

} // namespace

/* Opens the device(s), their queues, the service, the clients and
 * telemetry. */
int bring_up(host &h, const std::vector<lcore_cpu> &lcores, const std::vector<wire::gid> &static_dests,
	     const std::vector<wire::gid> &peer_addrs, const std::vector<wire::gid> &dests)
{
	const ah_app_config &c = *h.c;
	const unsigned nw = unsigned(lcores.size());
	if (c.port.queues != 0 && c.port.queues != nw) {
		fprintf(stderr, "rdgram-ah: %s: key 'port.queues': expected %u, one queue per worker (--workers)\n",
			c.port.where.c_str(), nw);
		return 2;
	}
	for (unsigned i = 0; i < nw; i++) {
		auto w = std::make_unique<ah_worker>();
		w->index = i;
		w->where = lcores[i];
		h.workers.push_back(std::move(w));
	}
	const std::vector<int> nodes = replica_nodes(h.rt.topology(), lcores);
	int local_id = -1, peer_id = -1;
	if (!c.port.devargs.empty()) {
		if (int rc = open_port(h, dests, nodes); rc != 0)
			return rc;
		local_id = h.port.port_id();
	} else if (int rc = open_ring_pair(h, static_dests, peer_addrs, dests, nodes, &local_id, &peer_id); rc != 0) {
		return rc;
	}
	for (auto &w : h.workers) {
		const uint16_t qi = uint16_t(w->index);
		const int node = numa_of_cpu(h.rt.topology(), w->where.cpu);
		const int sock = node >= 0 ? node : nodes[0];
		if (h.local->create_queue({.index = qi, .socket = sock}, w->ql) != 0) {
			fprintf(stderr, "rdgram-ah: local port: %s\n", h.local->error().c_str());
			return 1;
		}
		w->ql_up = true;
		w->ql.add_qp(local_qpn + 0x10 * qi, h.local_qkey);
		if (h.on_port)
			continue;
		if (h.peer.create_queue({.index = qi, .socket = sock}, w->qp) != 0) {
			fprintf(stderr, "rdgram-ah: peer port: %s\n", h.peer.error().c_str());
			return 1;
		}
		w->qp_up = true;
		w->qp.add_qp(peer_qpn + 0x10 * qi, qkey);
	}
	ah_service_config sc;
	sc.capacity = c.capacity;
	sc.qsbr = h.rt.qsbr();
	sc.socket = nodes[0];
	sc.app_timeout_us = uint64_t(c.timeout_s * 1e6);
	if (int rc = h.svc.start(*h.local, h.rt.ctl(), sc); rc != 0) {
		fprintf(stderr, "rdgram-ah: AH service: %s\n", strerror(rc));
		return 1;
	}
	h.svc_up = true;
	for (auto &w : h.workers) {
		ah_client_config cc;
		cc.mp = h.local->mempool();
		cc.socket = nodes[0];
		cc.timeout_us = uint64_t(c.timeout_s * 1e6);
		if (int rc = h.svc.add_client(w->cl, cc); rc != 0) {
			fprintf(stderr, "rdgram-ah: AH client of worker %u: %s\n", w->index, strerror(rc));
			return 1;
		}
		w->client_up = true;
	}
	attach_telemetry(h, local_id, peer_id);
	return 0;
}

int run_with_workers(host &h, const std::function<int()> &fn)
{
	std::vector<worker_arg> args;
	std::vector<lcore_cpu> lcores;
	for (auto &w : h.workers) {
		args.push_back(worker_arg{&h, w.get()});
		lcores.push_back(w->where);
	}
	std::vector<void *> ptrs;
	for (auto &a : args)
		ptrs.push_back(&a);
	int status = 0;
	const int rc = apps::run_workers(lcores, worker_main, ptrs, [&](const std::atomic<unsigned> &running) {
		status = fn();
		h.stop.store(true, std::memory_order_release);
		while (running.load(std::memory_order_acquire) != 0)
			rte_delay_us_sleep(1000);
	});
	if (rc < 0) {
		fprintf(stderr, "rdgram-ah: cannot launch a poll thread: %s\n", strerror(-rc));
		return 1;
	}
	return status != 0 ? status : rc != 0 ? 1 : 0;
}

unsigned tear_down(host &h)
{
	telemetry::detach();
	for (auto &w : h.workers)
		if (w->client_up) {
			h.svc.remove_client(w->cl);
			w->cl.fini();
			w->client_up = false;
		}
	if (h.svc_up)
		h.svc.stop();
	/* What no queue received before the workers stopped: counted per
	 * worker (the frame accounting), then freed. */
	for (auto &w : h.workers)
		for (auto [r, n] : {std::pair{w->ring_lp, &w->left_lp}, std::pair{w->ring_pl, &w->left_pl}}) {
			rte_mbuf *m[32];
			unsigned k;
			while (r != nullptr && (k = rte_ring_dequeue_burst(r, (void **)m, 32, nullptr)) != 0) {
				rte_pktmbuf_free_bulk(m, k);
				*n += k;
			}
		}
	if (!h.on_port) {
		h.ring_port.close();
		h.peer_port.close();
		return 0;
	}
	/* A DPDK port: the queues, then the port (the device and its pool
	 * stay), then every mbuf must be back in the pool before it goes. */
	for (auto &w : h.workers)
		if (w->ql_up) {
			w->ql.tx_flush();
			h.local->destroy_queue(w->ql);
			w->ql_up = false;
		}
	h.port.stop();
	unsigned missing = 0;
	if (rte_mempool *mp = h.local->mempool(); mp != nullptr)
		missing = rte_mempool_in_use_count(mp);
	if (missing != 0)
		fprintf(stderr, "rdgram-ah: %u mbufs did not come back to the port's pool\n", missing);
	h.port.close();
	return missing;
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
