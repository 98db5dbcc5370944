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

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "ah_attr.h"
#include "ah_engine.h"
#include "ah_host.h"
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

int pick_lcores(host &h, std::vector<lcore_cpu> *out)
{
	std::string err;
	if (apps::pick_workers(h.rt, SOCKET_ID_ANY, h.c->workers, out, &err) != 0) {
		fprintf(stderr, "rdgram-ah: %s\n", err.c_str());
		return 2;
	}
	return 0;
}

/* Opens both devices over a ring pair (per worker), the service, the
 * clients and telemetry. */
int bring_up(host &h, const std::vector<lcore_cpu> &lcores, const std::vector<wire::gid> &static_dests,
	     const std::vector<wire::gid> &peer_addrs)
{
	const ah_app_config &c = *h.c;
	const unsigned nw = unsigned(lcores.size());
	/* Ring i carries queue i's frames: local -> peer (lp) and back (pl).
	 * A frame a device sends on queue i arrives on the other's queue i,
	 * served by the same worker. */
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
	}
	const int pl_id = rte_eth_from_rings("rdgram_ah_local", pl.data(), nw, lp.data(), nw, 0);
	const int pp_id = rte_eth_from_rings("rdgram_ah_peer", lp.data(), nw, pl.data(), nw, 0);
	if (pl_id < 0 || pp_id < 0) {
		fprintf(stderr, "rdgram-ah: cannot create the net_ring pair\n");
		return 1;
	}
	for (unsigned i = 0; i < nw; i++) {
		auto w = std::make_unique<ah_worker>();
		w->index = i;
		w->where = lcores[i];
		w->ring_lp = lp[i];
		w->ring_pl = pl[i];
		h.workers.push_back(std::move(w));
	}
	const std::vector<int> nodes = replica_nodes(h.rt.topology(), lcores);
	rte_ether_addr mac_l, mac_p;
	parse_mac("02:00:00:00:a0:01", &mac_l);
	parse_mac("02:00:00:00:a0:02", &mac_p);

	soft::soft_config pc;
	pc.port_id = uint16_t(pp_id);
	pc.nb_queues = uint16_t(nw);
	pc.set_mac = true;
	pc.mac = mac_p;
	pc.addresses = peer_addrs;
	pc.neighbours = {{addr_of(c.ipv6, 1, 1), mac_l}};
	pc.qsbr = h.rt.qsbr();
	pc.av_nodes = nodes;
	pc.nb_mbufs = 4095;
	pc.vlan = c.vlan;
	pc.ecn = c.ecn;
	soft::soft_config lc;
	lc.port_id = uint16_t(pl_id);
	lc.nb_queues = uint16_t(nw);
	lc.set_mac = true;
	lc.mac = mac_l;
	lc.addresses = {addr_of(c.ipv6, 1, 1)};
	lc.max_ah = c.max_ah;
	lc.neigh_ttl_ms = c.neigh_ttl_ms;
	lc.qsbr = h.rt.qsbr();
	lc.av_nodes = nodes;
	lc.nb_mbufs = 8191;
	lc.vlan = c.vlan;
	lc.ecn = c.ecn;
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
	for (auto &w : h.workers) {
		const uint16_t qi = uint16_t(w->index);
		const int node = numa_of_cpu(h.rt.topology(), w->where.cpu);
		const int sock = node >= 0 ? node : nodes[0];
		if (h.local.create_queue({.index = qi, .socket = sock}, w->ql) != 0) {
			fprintf(stderr, "rdgram-ah: local port: %s\n", h.local.error().c_str());
			return 1;
		}
		w->ql_up = true;
		w->ql.add_qp(local_qpn + 0x10 * qi, qkey);
		if (h.peer.create_queue({.index = qi, .socket = sock}, w->qp) != 0) {
			fprintf(stderr, "rdgram-ah: peer port: %s\n", h.peer.error().c_str());
			return 1;
		}
		w->qp_up = true;
		w->qp.add_qp(peer_qpn + 0x10 * qi, qkey);
	}
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
	for (auto &w : h.workers) {
		ah_client_config cc;
		cc.mp = h.local.mempool();
		cc.socket = nodes[0];
		if (int rc = h.svc.add_client(w->cl, cc); rc != 0) {
			fprintf(stderr, "rdgram-ah: AH client of worker %u: %s\n", w->index, strerror(rc));
			return 1;
		}
		w->client_up = true;
	}

	const unsigned main_l = rte_get_main_lcore();
	telemetry::attachment a;
	a.app = "rdgram-ah";
	a.ctl = &h.rt.ctl();
	a.service = &h.svc;
	a.ah_devices = {&h.local};
	bool main_polls = false;
	for (auto &w : h.workers) {
		a.lcores.push_back({w->where.lcore, w->where.cpu, numa_of_cpu(h.rt.topology(), w->where.cpu), "poll"});
		main_polls |= w->where.lcore == main_l;
	}
	if (!main_polls)
		a.lcores.push_back({main_l, lcore_os_cpu(main_l), numa_of_cpu(h.rt.topology(), lcore_os_cpu(main_l)),
				    "app"});
	char ml[RTE_ETHER_ADDR_FMT_SIZE], mp[RTE_ETHER_ADDR_FMT_SIZE];
	rte_ether_format_addr(ml, sizeof(ml), &h.local.mac());
	rte_ether_format_addr(mp, sizeof(mp), &h.peer.mac());
	a.ports = {{&h.local, pl_id, "local", ml}, {&h.peer, pp_id, "peer", mp}};
	for (auto &w : h.workers) {
		const unsigned i = w->index;
		a.qps.push_back({"local_qp" + std::to_string(i), w->where.lcore, pl_id, local_qpn + 0x10 * i, &w->pub_l});
		a.qps.push_back({"peer_qp" + std::to_string(i), w->where.lcore, pp_id, peer_qpn + 0x10 * i, &w->pub_p});
	}
	if (int rc = telemetry::attach(std::move(a)); rc != 0)
		fprintf(stderr, "rdgram-ah: telemetry not attached: %s\n", strerror(rc));
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

void tear_down(host &h)
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
	if (h.peer_polled)
		h.rt.ctl().remove_poller(&soft::soft_device::control_poller, &h.peer);
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
