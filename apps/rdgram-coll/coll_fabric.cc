/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "coll_fabric.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>

#include "ah_attr.h"
#include "port.h"

namespace rdgram::coll {

rte_ether_addr mac_of(uint32_t r)
{
	return rte_ether_addr{{0x02, 0x00, 0x00, 0xc0, uint8_t(r >> 8), uint8_t(r)}};
}

wire::gid gid_of(uint32_t r)
{
	wire::gid g{};
	g.raw[10] = g.raw[11] = 0xff;
	g.raw[12] = 10;
	g.raw[13] = 200;
	g.raw[14] = uint8_t((r + 1) >> 8);
	g.raw[15] = uint8_t(r + 1);
	return g;
}

int make_ring_port(eth_switch &sw, uint32_t r, int node, uint16_t *port)
{
	const std::string n = "coll" + std::to_string(r);
	rte_ring *rx = rte_ring_create((n + "rx").c_str(), 1024, node, RING_F_SP_ENQ | RING_F_SC_DEQ);
	rte_ring *tx = rte_ring_create((n + "tx").c_str(), 1024, node, RING_F_SP_ENQ | RING_F_SC_DEQ);
	const int p = rx && tx ? rte_eth_from_rings(("net_ring_" + n).c_str(), &rx, 1, &tx, 1, unsigned(std::max(node, 0)))
			       : -1;
	if (p < 0) {
		fprintf(stderr, "rdgram-coll: cannot create the net_ring port of rank %u\n", r);
		return 1;
	}
	*port = uint16_t(p);
	if (sw.ports.size() <= r)
		sw.ports.resize(r + 1);
	sw.ports[r].from = tx;
	sw.ports[r].to = rx;
	return 0;
}

int open_user_port(const std::string &devargs, uint32_t rank, uint16_t *port, bool *probed)
{
	std::string args = devargs;
	for (size_t at; (at = args.find("{rank}")) != std::string::npos;)
		args.replace(at, 6, std::to_string(rank));
	if (std::string err; apps::probe_port(args, port, &err, probed) != 0) {
		fprintf(stderr, "rdgram-coll: rank %u: --port: %s\n", rank, err.c_str());
		return 1;
	}
	return 0;
}

int open_rank(const coll_config &c, runtime &rt, uint32_t nranks, local_rank &lr,
	      const std::vector<rank_addr> &statics, int node)
{
	const bool fixed_mac = !statics.empty() || nranks == 1;
	soft::soft_config sc;
	sc.port_id = lr.port;
	sc.set_mac = fixed_mac; /* threads: the switch forwards by rank MAC */
	sc.mac = fixed_mac ? mac_of(lr.rank) : rte_ether_addr{};
	sc.addresses = {gid_of(lr.rank)};
	sc.max_ah = std::max<uint32_t>(64, 2 * nranks);
	sc.qsbr = rt.qsbr();
	sc.av_nodes = {node};
	/* procs: net_af_xdp fills its fill queue (2048 descriptors) from
	 * the pool at queue set-up, so the pool holds more than that. */
	sc.nb_mbufs = fixed_mac ? 2047 : 4095;
	sc.rx_desc = sc.tx_desc = 512;
	sc.mtu = c.mtu;
	if (fixed_mac) {
		sc.resolve = false;
		for (const rank_addr &a : statics)
			if (a.rank != lr.rank) {
				soft::neighbour nb{};
				memcpy(nb.ip.raw, a.gid, 16);
				memcpy(nb.mac.addr_bytes, a.mac, 6);
				sc.neighbours.push_back(nb);
			}
	} else {
		/* ARP through the fabric. Every rank asks for every peer at
		 * once (N (N - 1) broadcasts, each delivered to all N ports):
		 * requests are repeated every second (Linux's retrans_time_ms)
		 * until the phase's deadline. At 100 ms, 32 ranks on 2 cores
		 * answered too late, repeated, and the storm took 40 s (1 s at
		 * 1000 ms, tests/integration/coll_bridge.sh). */
		sc.resolve = true;
		sc.neigh_retry_ms = 1000;
		sc.neigh_retries = uint32_t(std::clamp(c.timeout_s, 3.0, 36000.0));
	}
	if (lr.dev.open(sc) != 0) {
		fprintf(stderr, "rdgram-coll: rank %u: %s\n", lr.rank, lr.dev.error().c_str());
		return 1;
	}
	lr.opened = true;
	/* What the port's queues took from the pool at start (its RX ring
	 * or fill queue): not the application's to give back. */
	lr.pmd_held = rte_mempool_in_use_count(lr.dev.mempool());
	if (lr.dev.create_queue({.index = 0, .socket = node}, lr.q) != 0) {
		fprintf(stderr, "rdgram-coll: rank %u: %s\n", lr.rank, lr.dev.error().c_str());
		return 1;
	}
	lr.q.add_qp(qpn_base + lr.rank, c.qkey);
	ah_service_config svc;
	svc.capacity = std::max<uint32_t>(64, 2 * nranks);
	svc.qsbr = rt.qsbr();
	svc.socket = node;
	svc.app_timeout_us = uint64_t(c.timeout_s * 1e6);
	if (int rc = lr.svc.start(lr.dev, rt.ctl(), svc); rc != 0) {
		fprintf(stderr, "rdgram-coll: rank %u: AH service: %s\n", lr.rank, strerror(rc));
		return 1;
	}
	lr.svc_up = true;
	return 0;
}

rank_addr rank_record(const coll_config &c, const local_rank &lr)
{
	rank_addr a{};
	a.rank = lr.rank;
	memcpy(a.gid, gid_of(lr.rank).raw, 16);
	a.qpn = qpn_base + lr.rank;
	a.qkey = c.qkey;
	memcpy(a.mac, lr.dev.mac().addr_bytes, 6);
	return a;
}

void storm(local_rank &lr, const std::vector<rank_addr> &table)
{
	std::vector<ibv_ah_attr> attrs;
	std::vector<uint32_t> who;
	for (const rank_addr &a : table)
		if (a.rank != lr.rank) {
			attrs.push_back(apps::gid_ah_attr(a.gid));
			who.push_back(a.rank);
		}
	std::vector<ah_handle> hs(attrs.size(), ah_null);
	std::vector<int> errs(attrs.size(), 0);
	const uint64_t t0 = rte_get_tsc_cycles();
	lr.storm_ok = attrs.empty() ? 0
				    : lr.svc.create_ah_batch(attrs.data(), unsigned(attrs.size()), hs.data(), errs.data());
	lr.storm_end = rte_get_tsc_cycles();
	lr.storm_ms = double(lr.storm_end - t0) * 1e3 / double(rte_get_tsc_hz());
	lr.ahs.assign(table.size(), ah_null);
	for (size_t i = 0; i < who.size(); i++) {
		lr.ahs[who[i]] = hs[i];
		if (errs[i] != 0)
			lr.storm_err = errs[i];
	}
}

unsigned count_arp_matches(runtime &rt, local_rank &lr, const std::vector<rank_addr> &table)
{
	unsigned n = 0;
	rt.ctl().call([&] {
		for (const rank_addr &a : table) {
			if (a.rank == lr.rank)
				continue;
			wire::gid g;
			memcpy(g.raw, a.gid, 16);
			soft::neigh_info ni{};
			if (lr.dev.neighbour_info(g, &ni) && ni.state != soft::neigh_state::static_ &&
			    memcmp(ni.mac.addr_bytes, a.mac, 6) == 0)
				n++;
		}
	});
	return n;
}

void close_rank(local_rank &lr, unsigned *in_use)
{
	if (lr.svc_up) {
		lr.svc.stop();
		lr.svc_up = false;
	}
	*in_use = 0;
	if (rte_mempool *mp = lr.dev.mempool()) {
		/* A port probed here is closed first: some PMDs keep mbufs in
		 * their queues until then (net_af_xdp's fill queue). A port
		 * the EAL was given is only stopped (most PMDs give their RX
		 * rings back at stop). ARP/ND frames still in the device's
		 * control rings are given back by close(). */
		/* Sent frames the PMD still holds until it reaps their
		 * completions (net_af_xdp: at its next TX burst). */
		if (lr.opened) {
			rte_eth_tx_done_cleanup(lr.port, 0, 0);
			rte_eth_tx_burst(lr.port, 0, nullptr, 0);
		}
		rte_eth_dev_stop(lr.port);
		if (lr.port_probed) {
			rte_eth_dev_close(lr.port);
			lr.port_probed = false;
		}
		*in_use = rte_mempool_in_use_count(mp) - lr.dev.control_frames();
	}
	lr.dev.close();
	if (lr.port_probed) {
		rte_eth_dev_close(lr.port);
		lr.port_probed = false;
	}
}

} // namespace rdgram::coll
