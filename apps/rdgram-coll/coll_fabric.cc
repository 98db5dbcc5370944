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
#include "soft_port.h"
#include "open_device.h"

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

int make_ring_port(eth_switch &sw, uint32_t r, int node, const soft::port_config &pc, soft::port &owner)
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
	if (sw.ports.size() <= r)
		sw.ports.resize(r + 1);
	sw.ports[r].from = tx;
	sw.ports[r].to = rx;
	soft::port_config t = pc;
	t.name = "rank" + std::to_string(r);
	t.queues = 0;
	if (std::string err; owner.adopt(t, uint16_t(p), 1, &err) != 0) {
		fprintf(stderr, "rdgram-coll: %s\n", err.c_str());
		return 1;
	}
	return 0;
}

int open_user_port(const soft::port_config &pc, uint32_t rank, soft::port &owner)
{
	soft::port_config t = pc;
	for (size_t at; (at = t.devargs.find("{rank}")) != std::string::npos;)
		t.devargs.replace(at, 6, std::to_string(rank));
	t.queues = 0;
	if (std::string err; owner.probe(t, 1, &err) != 0) {
		fprintf(stderr, "rdgram-coll: rank %u: --port: %s\n", rank, err.c_str());
		return 1;
	}
	return 0;
}

namespace {

/* Soft: the rank's device on its port, its queue and QP. */
int open_soft(const coll_config &c, runtime &rt, uint32_t nranks, local_rank<soft::soft_device> &lr,
	      const std::vector<rank_addr> &statics, int node)
{
	const bool fixed_mac = !statics.empty() || nranks == 1;
	soft::port_setup ps; /* its control poller: the rank's AH service runs it */
	ps.qsbr = rt.qsbr();
	ps.av_nodes = {node};
	std::vector<wire::gid> addrs;
	ps.adjust = [&](soft::soft_config &sc) {
		sc.set_mac = fixed_mac; /* threads: the switch forwards by rank MAC */
		sc.mac = fixed_mac ? mac_of(lr.rank) : rte_ether_addr{};
		sc.addresses = {gid_of(lr.rank)};
		sc.neighbours.clear();
		if (c.mode == "procs") {
			/* The rank's own port: its table's MAC and addresses
			 * when it gives them (the exchange tells the others). */
			if (c.port.set_mac) {
				sc.set_mac = true;
				sc.mac = c.port.mac;
			}
			if (!c.port.addresses.empty())
				sc.addresses = c.port.addresses;
			sc.neighbours = c.port.neighbours;
			sc.nb_mbufs = std::max<uint32_t>(c.port.nb_mbufs, 4095);
		}
		sc.max_ah = std::max<uint32_t>(64, 2 * nranks);
		/* procs: net_af_xdp fills its fill queue (2048 descriptors)
		 * from the pool at queue set-up, so the pool holds more than
		 * that. */
		if (c.mode != "procs")
			sc.nb_mbufs = fixed_mac ? 2047 : 4095;
		sc.rx_desc = sc.tx_desc = 512;
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
			/* ARP through the fabric. Every rank asks for every peer
			 * at once (N (N - 1) broadcasts, each delivered to all N
			 * ports): requests are repeated every second (Linux's
			 * retrans_time_ms) until the phase's deadline. At 100 ms,
			 * 32 ranks on 2 cores answered too late, repeated, and
			 * the storm took 40 s (1 s at 1000 ms,
			 * tests/integration/coll_bridge.sh). */
			sc.resolve = true;
			sc.neigh_retry_ms = 1000;
			sc.neigh_retries = uint32_t(std::clamp(c.timeout_s, 3.0, 36000.0));
		}
		addrs = sc.addresses;
	};
	if (std::string err; apps::open_device<soft::soft_device>(rt, {.port = &c.port, .setup = ps}, lr.owner, &err) != 0) {
		fprintf(stderr, "rdgram-coll: rank %u: %s\n", lr.rank, err.c_str());
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
	lr.q_up = true;
	lr.qpn = qpn_base + lr.rank;
	lr.gid = addrs[0];
	if (int rc = lr.q.add_qp(lr.qpn, c.qkey); rc != 0) {
		fprintf(stderr, "rdgram-coll: rank %u: QP 0x%x: %s\n", lr.rank, lr.qpn, strerror(rc));
		return 1;
	}
	return 0;
}

/* The source GID of the rank's AHs: --gid-index, or the port's first
 * IPv4 GID (port().gids holds the RoCE v2 ones on Ethernet, index =
 * sgid_index), else its first non-zero one. -1 when there is none. */
int pick_gid(const coll_config &c, const port_attr &pa)
{
	const wire::gid zero{};
	if (c.rdma.gid_index >= 0)
		return size_t(c.rdma.gid_index) < pa.gids.size() && pa.gids[size_t(c.rdma.gid_index)] != zero ? c.rdma.gid_index : -1;
	for (size_t i = 0; i < pa.gids.size(); i++)
		if (pa.gids[i].is_v4_mapped())
			return int(i);
	for (size_t i = 0; i < pa.gids.size(); i++)
		if (pa.gids[i] != zero)
			return int(i);
	return -1;
}

/* verbs, mlx5, EFA: the rank's own open of the RDMA device and its UD
 * queue (the device numbers the QP). */
template <class Dev> int open_rdma(const coll_config &c, runtime &rt, uint32_t nranks, local_rank<Dev> &lr)
{
	apps::rdma_open o{.max_ah = std::max<uint32_t>(64, 2 * nranks)};
#if RDGRAM_HAVE_DRIVER_VERBS
	if constexpr (std::is_same_v<Dev, verbs::verbs_device>)
		o.nb_mbufs = 2047; /* the receive ring (rq_depth 1024) and inline copies */
#endif
	int rc = 0;
	std::string err;
	rt.ctl().call([&] { rc = apps::open_device<Dev>(rt, {.rdma = &c.rdma, .rdma_opts = o}, lr.owner, &err); });
	if (rc != 0) {
		/* ENODEV: no such device here (or no active port): the
		 * setting cannot run on this host. The mlx5 model
		 * (tests/model) hosts one QP that loops back to itself, not
		 * a job of ranks; EFA has a model of its AH path only. */
		const bool modelled = strcmp(lr.dev.driver_name(), "verbs") != 0;
		const char *model = rc == ENODEV && modelled ? " (no model stands in: the mlx5 model hosts one QP "
							       "looping back to itself, EFA's only its AH path)"
							     : "";
		fprintf(stderr, "rdgram-coll: rank %u: %s%s\n", lr.rank, err.c_str(), model);
		return rc == ENODEV ? 2 : 1;
	}
	lr.opened = true;
	const int g = pick_gid(c, lr.dev.port());
	if (g < 0) {
		fprintf(stderr, "rdgram-coll: rank %u: %s has no GID%s to address its ranks by\n", lr.rank,
			c.rdma.device.empty() ? "the device" : c.rdma.device.c_str(),
			c.rdma.gid_index >= 0 ? (" at --gid-index " + std::to_string(c.rdma.gid_index)).c_str() : "");
		return 2;
	}
	const uint32_t need = uint32_t(sizeof(msg_hdr)) + c.size;
	if (lr.dev.port().active_mtu != 0 && lr.dev.port().active_mtu < need) {
		fprintf(stderr, "rdgram-coll: --size %u: a block and its 16-byte header need %u bytes; the port's MTU is "
				"%u\n", c.size, need, lr.dev.port().active_mtu);
		return 2;
	}
	lr.sgid_index = uint8_t(g);
	lr.gid = lr.dev.port().gids[size_t(g)];
	queue_params qp;
	qp.socket = lr.dev.port().numa_node >= 0 ? lr.dev.port().numa_node : SOCKET_ID_ANY;
	qp.qkey = c.qkey;
	/* The engine sends every message inline (a 16-byte header and a
	 * block): what the QP grants is used, the driver copies the rest. */
	qp.max_inline = 64;
	rt.ctl().call([&] { rc = lr.dev.create_queue(qp, lr.q); });
	if (rc != 0) {
		fprintf(stderr, "rdgram-coll: rank %u: driver %s: UD queue: %s\n", lr.rank, lr.dev.driver_name(),
			lr.dev.error().c_str());
		return 1;
	}
	lr.q_up = true;
	if constexpr (requires { lr.q.qpn(); })
		lr.qpn = lr.q.qpn();
	else
		lr.qpn = lr.q.qp_num(); /* efa_queue's name for it */
	return 0;
}

} // namespace

template <class Dev>
int open_rank(const coll_config &c, runtime &rt, uint32_t nranks, local_rank<Dev> &lr,
	      const std::vector<rank_addr> &statics, int node)
{
	int rc;
	if constexpr (apps::is_soft<Dev>)
		rc = open_soft(c, rt, nranks, lr, statics, node);
	else
		rc = open_rdma(c, rt, nranks, lr);
	if (rc != 0)
		return rc;
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

template <class Dev> rank_addr rank_record(const coll_config &c, const local_rank<Dev> &lr)
{
	rank_addr a{};
	a.rank = lr.rank;
	memcpy(a.gid, lr.gid.raw, 16);
	a.qpn = lr.qpn;
	a.qkey = c.qkey;
	if constexpr (apps::is_soft<Dev>)
		memcpy(a.mac, lr.dev.mac().addr_bytes, 6);
	return a;
}

template <class Dev> void storm(local_rank<Dev> &lr, const std::vector<rank_addr> &table)
{
	std::vector<ibv_ah_attr> attrs;
	std::vector<uint32_t> who;
	for (const rank_addr &a : table)
		if (a.rank != lr.rank) {
			attrs.push_back(apps::gid_ah_attr(a.gid, lr.sgid_index));
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

unsigned count_arp_matches(runtime &rt, local_rank<soft::soft_device> &lr, const std::vector<rank_addr> &table)
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

template <class Dev> void close_rank(local_rank<Dev> &lr, unsigned *in_use)
{
	if constexpr (apps::is_soft<Dev>) {
		if (lr.svc_up) {
			lr.svc.stop();
			lr.svc_up = false;
		}
		*in_use = 0;
		rte_mempool *mp = lr.dev.mempool();
		/* Sent frames the PMD still holds until it reaps their
		 * completions (net_af_xdp: at its next TX burst). */
		if (lr.opened) {
			rte_eth_tx_done_cleanup(lr.owner.port_id(), 0, 0);
			rte_eth_tx_burst(lr.owner.port_id(), 0, nullptr, 0);
		}
		/* The port goes first (soft::port::stop: stopped and closed,
		 * removed when probed here): some PMDs keep mbufs in their
		 * queues until then (net_af_xdp's fill queue). ARP/ND frames
		 * still in the device's control rings are given back by
		 * close(). */
		lr.owner.stop();
		if (mp != nullptr)
			*in_use = rte_mempool_in_use_count(mp) - lr.dev.control_frames();
		lr.owner.close();
		lr.opened = false;
		return;
	} else {
		if (lr.svc_up) {
			lr.svc.stop();
			lr.svc_up = false;
		}
		/* The QP's receive buffers and sends in flight come back
		 * when it is destroyed; then every mbuf of the device's pool
		 * must be home. */
		if (lr.q_up) {
			lr.dev.destroy_queue(lr.q);
			lr.q_up = false;
		}
		rte_mempool *mp = lr.dev.mempool();
		*in_use = mp != nullptr ? rte_mempool_in_use_count(mp) : 0;
		if (lr.opened)
			lr.dev.close();
		lr.opened = false;
	}
}

#define RDGRAM_COLL_FABRIC_INST(D)                                                                     \
	template int open_rank<D>(const coll_config &, runtime &, uint32_t, local_rank<D> &,           \
				  const std::vector<rank_addr> &, int);                                 \
	template rank_addr rank_record<D>(const coll_config &, const local_rank<D> &);                 \
	template void storm<D>(local_rank<D> &, const std::vector<rank_addr> &);                       \
	template void close_rank<D>(local_rank<D> &, unsigned *);
RDGRAM_COLL_DRIVERS(RDGRAM_COLL_FABRIC_INST)

} // namespace rdgram::coll
