/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-fwd's set-up and tear-down (main thread), one template over the
 * driver's device (Dev: soft::soft_device, verbs::verbs_device,
 * mlx5::mlx5_device, efa::efa_device; apps/common/driver.h picks it once):
 * every port's device, AH service, one queue per worker with that worker's
 * QPs and reply paths, the peers' AHs created ahead, the rules, and each
 * worker's loop context (fwd_loop.h); fwd_run.h then runs the workers.
 *
 * soft: every [[port]] is a DPDK port opened with `workers` queue pairs;
 * worker w polls queue w and owns the QPs placed there (qp_worker). The
 * RDMA drivers: the one [rdma] device (main.cc gives it as ports[0]) and
 * one UD QP per worker, numbered by the device.
 */
#ifndef RDGRAM_FWD_SETUP_H
#define RDGRAM_FWD_SETUP_H

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include "driver.h"
#include "fwd_config.h"
#include "fwd_loop.h"
#include "port.h"
#include "rdgram/ah_service.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "rdma_open.h"
#include "workers.h"

namespace rdgram::fwd {

/* A queue's QP number, whatever the driver calls it. */
template <class Q> uint32_t queue_qpn(const Q &q)
{
	if constexpr (requires { q.qpn(); })
		return q.qpn();
	else
		return q.qp_num();
}

/* Everything one port needs; lives until every worker has stopped. */
template <class Dev> struct port_rt {
	using Q = typename Dev::queue_type;
	const port_config *cfg = nullptr;
	uint16_t port_id = 0; /* soft: the ethdev port */
	Dev dev;
	ah_service svc;
	/* st[w]: worker w's queue of this port, its QPs and reply paths. */
	std::vector<std::unique_ptr<port_state<Q>>> st;
	std::vector<bool> queue_up;    /* by worker: create_queue succeeded */
	std::vector<unsigned> clients; /* by worker: reply paths added */
	bool open = false;
	bool svc_up = false;
	std::vector<ah_handle> held; /* peers' AHs created ahead */

	/* Reply paths, then queues, then the AH service and the device: what
	 * set-up built, in reverse. Idempotent. */
	void tear_down()
	{
		for (size_t w = 0; w < clients.size(); w++) {
			for (unsigned i = 0; i < clients[w]; i++) {
				svc.remove_client(st[w]->cl[i]);
				st[w]->cl[i].fini();
			}
			clients[w] = 0;
		}
		for (ah_handle h : held)
			svc.destroy_ah(h);
		held.clear();
		if (svc_up)
			svc.stop();
		svc_up = false;
		for (size_t w = 0; w < queue_up.size(); w++)
			if (queue_up[w]) {
				st[w]->q.tx_flush();
				dev.destroy_queue(st[w]->q);
				queue_up[w] = false;
			}
		if (open)
			dev.close();
		open = false;
	}
	~port_rt() { tear_down(); }
};

/* The appliance: each worker's loop context, the ports they run, and the
 * lcores they run on. ports goes first on destruction: its members free
 * what the loops used. */
template <class Dev> struct fwd_app {
	using Q = typename Dev::queue_type;
	std::vector<std::unique_ptr<loop_ctx<Q>>> ctx; /* by worker */
	shared_budget budget;
	std::vector<std::unique_ptr<port_rt<Dev>>> ports;
	std::vector<lcore_cpu> workers; /* by worker: lcore and CPU */
};

namespace detail {

inline int sgid_for(const port_config &p, const wire::gid &dst)
{
	for (size_t i = 0; i < p.addresses.size(); i++)
		if (p.addresses[i].is_v4_mapped() == dst.is_v4_mapped())
			return int(i);
	return -1;
}

} // namespace detail

/* Opens every port of c with c.workers queues, picks the workers' lcores
 * (apps/common/workers.h: NUMA order of the first port, the main lcore
 * last), creates each worker's QPs and reply paths and the peers' AHs, and
 * fills one loop context per worker. 0, or 1/2 (printed). (Main thread.) */
template <class Dev> int set_up(runtime &rt, const fwd_config &c, fwd_app<Dev> &a)
{
	using Q = typename Dev::queue_type;
	constexpr bool soft_drv = apps::is_soft<Dev>;
	const unsigned nw = c.workers;
	auto &ports = a.ports;
	std::string err;
	std::vector<int> nodes;

	for (size_t p = 0; p < c.ports.size(); p++) {
		auto pr = std::make_unique<port_rt<Dev>>();
		pr->cfg = &c.ports[p];
		for (unsigned w = 0; w < nw; w++)
			pr->st.push_back(std::make_unique<port_state<Q>>());
		pr->queue_up.assign(nw, false);
		pr->clients.assign(nw, 0);
		if constexpr (soft_drv) {
			if (apps::probe_port(c.ports[p].device, &pr->port_id, &err) != 0) {
				fprintf(stderr, "rdgram-fwd: %s\n", err.c_str());
				return 1;
			}
			/* One queue pair per worker: say so before the PMD
			 * refuses the configuration in its own words. */
			rte_eth_dev_info di{};
			if (rte_eth_dev_info_get(pr->port_id, &di) == 0 &&
			    (di.max_rx_queues < nw || di.max_tx_queues < nw)) {
				fprintf(stderr,
					"rdgram-fwd: port %s: --workers %u needs %u queue pairs, the port offers %u RX and "
					"%u TX (PMD %s; net_pcap opens one queue per rx_pcap= and tx_pcap=)\n",
					c.ports[p].name.c_str(), nw, nw, unsigned(di.max_rx_queues),
					unsigned(di.max_tx_queues), di.driver_name ? di.driver_name : "?");
				return 2;
			}
		}
		ports.push_back(std::move(pr));
	}
	if constexpr (soft_drv) {
		/* The workers first: the AV replicas go on their NUMA nodes. */
		if (apps::pick_workers(rt, rte_eth_dev_socket_id(ports[0]->port_id), nw, &a.workers, &err) != 0) {
			fprintf(stderr, "rdgram-fwd: %s\n", err.c_str());
			return 2;
		}
		nodes = replica_nodes(rt.topology(), a.workers);
	}

	for (size_t p = 0; p < c.ports.size(); p++) {
		port_rt<Dev> &pr = *ports[p];
		const port_config &pc = c.ports[p];
		if constexpr (soft_drv) {
			soft::soft_config sc(pc); /* mtu, pkey, max_ah, neighbour resolution */
			sc.port_id = pr.port_id;
			sc.set_mac = pc.set_mac;
			sc.mac = pc.mac;
			sc.addresses = pc.addresses;
			sc.nb_mbufs = pc.nb_mbufs;
			sc.nb_queues = uint16_t(nw);
			for (const auto &n : pc.neighbours)
				sc.neighbours.push_back({n.ip, n.mac});
			/* A peer's configured MAC is a static neighbour of its egress port. */
			for (const auto &pe : c.peers)
				if (pe.mac && (pe.port == pc.name || (pe.port.empty() && p == 0)))
					sc.neighbours.push_back({pe.ip, *pe.mac});
			sc.qsbr = rt.qsbr();
			sc.av_nodes = nodes;
			if (pr.dev.open(sc) != 0) {
				fprintf(stderr, "rdgram-fwd: port %s: %s\n", pc.name.c_str(), pr.dev.error().c_str());
				return 1;
			}
		} else {
			const apps::rdma_open o{.max_ah = pc.max_ah, .qkey = c.rdma.qkey};
			if (int rc = apps::open_rdma_device(rt, c.rdma, o, pr.dev); rc != 0) {
				fprintf(stderr, "rdgram-fwd: %s\n", apps::rdma_open_error(pr.dev, c.rdma, rc).c_str());
				return 1;
			}
			const int numa = pr.dev.port().numa_node;
			if (apps::pick_workers(rt, numa, nw, &a.workers, &err) != 0) {
				fprintf(stderr, "rdgram-fwd: %s\n", err.c_str());
				pr.open = true;
				return 2;
			}
		}
		pr.open = true;
		/* The AH service's control-thread poller also runs the
		 * device's housekeeping (ARP/ND, reclamation). */
		ah_service_config asc;
		asc.capacity = pc.max_ah;
		asc.qsbr = rt.qsbr();
		asc.socket = nodes.empty() ? SOCKET_ID_ANY : nodes[0];
		if (int rc = pr.svc.start(pr.dev, rt.ctl(), asc); rc != 0) {
			fprintf(stderr, "rdgram-fwd: port %s: AH service: %s\n", pc.name.c_str(), strerror(rc));
			return 1;
		}
		pr.svc_up = true;
		for (unsigned w = 0; w < nw; w++) {
			port_state<Q> &st = *pr.st[w];
			queue_params qp;
			qp.index = uint16_t(w);
			qp.socket = asc.socket;
			if constexpr (!soft_drv)
				qp.qkey = c.rdma.qkey;
			if (pr.dev.create_queue(qp, st.q) != 0) {
				fprintf(stderr, "rdgram-fwd: port %s: queue %u: %s\n", pc.name.c_str(), w,
					pr.dev.error().c_str());
				return 1;
			}
			pr.queue_up[w] = true;
			for (size_t k = 0; k < pc.qps.size(); k++) {
				if (qp_worker(pc, k, nw) != w)
					continue;
				const qp_config &q = pc.qps[k];
				const unsigned i = st.nqp;
				if constexpr (soft_drv) {
					if (int rc = st.q.add_qp(q.qpn, q.qkey); rc != 0) {
						fprintf(stderr, "rdgram-fwd: port %s: QP 0x%x: %s\n", pc.name.c_str(), q.qpn,
							strerror(rc));
						return 1;
					}
					st.qpn[i] = q.qpn;
					st.qkey[i] = q.qkey;
				} else {
					st.qpn[i] = queue_qpn(st.q);
					st.qkey[i] = c.rdma.qkey;
				}
				ah_client_config cc;
				cc.max_dests = c.pending_dests;
				cc.max_per_dest = c.pending_per_dest;
				cc.max_total = c.pending_total;
				cc.timeout_us = uint64_t(c.pending_timeout_ms) * 1000;
				cc.mp = pr.dev.mempool();
				cc.socket = asc.socket;
				if (int rc = pr.svc.add_client(st.cl[i], cc); rc != 0) {
					fprintf(stderr, "rdgram-fwd: port %s: reply path: %s\n", pc.name.c_str(),
						strerror(rc));
					return 1;
				}
				pr.clients[w]++;
				st.nqp++;
			}
		}
	}

	/* Peers: the key the poll threads send to; with a configured MAC
	 * (soft) the AH is created now and held, so the first packet hits. */
	peer_state peers[max_peers]{};
	for (size_t i = 0; i < c.peers.size(); i++) {
		const peer_config &pe = c.peers[i];
		unsigned e = 0;
		for (size_t p = 0; p < c.ports.size(); p++)
			if (c.ports[p].name == pe.port)
				e = unsigned(p);
		ibv_ah_attr at{};
		at.is_global = 1;
		at.port_num = 1;
		at.grh.sgid_index = soft_drv ? uint8_t(detail::sgid_for(c.ports[e], pe.ip)) : c.rdma.sgid_index();
		at.grh.hop_limit = pe.hop_limit;
		at.grh.traffic_class = pe.traffic_class;
		memcpy(at.grh.dgid.raw, pe.ip.raw, 16);
		peer_state &ps = peers[i];
		ps.key = ah_key::of(at);
		ps.port = e;
		ps.qpn = pe.qpn;
		ps.keep_qkey = !pe.qkey.has_value();
		ps.qkey = pe.qkey.value_or(0);
		if (pe.mac) {
			int ae = 0;
			ah_handle h = ports[e]->svc.create_ah(at, &ae);
			if (ae != 0) {
				fprintf(stderr, "rdgram-fwd: peer %s (%s): creating its AH failed: %s\n", pe.name.c_str(),
					format_gid(pe.ip).c_str(), strerror(ae));
				return 1;
			}
			ports[e]->held.push_back(h);
		}
	}
	rule_state rules[max_rules]{};
	for (size_t r = 0; r < c.rules.size(); r++) {
		const rule_config &ru = c.rules[r];
		rule_state &rs = rules[r];
		rs.has_qpn = ru.match_qpn.has_value();
		rs.qpn = ru.match_qpn.value_or(0);
		rs.has_qkey = ru.match_qkey.has_value();
		rs.qkey = ru.match_qkey.value_or(0);
		rs.rewrite = ru.rewrite_qkey.has_value();
		rs.new_qkey = ru.rewrite_qkey.value_or(0);
		for (size_t i = 0; i < c.peers.size(); i++)
			if (c.peers[i].name == ru.to)
				rs.peer = unsigned(i);
	}
	a.budget.max = c.max_packets;
	const double hz = double(rte_get_tsc_hz());
	for (unsigned w = 0; w < nw; w++) {
		auto x = std::make_unique<loop_ctx<Q>>();
		x->worker = w;
		for (size_t p = 0; p < ports.size(); p++)
			x->ports[p] = ports[p]->st[w].get();
		x->nports = unsigned(ports.size());
		memcpy(x->peers, peers, sizeof(peers));
		x->npeers = unsigned(c.peers.size());
		memcpy(x->rules, rules, sizeof(rules));
		x->nrules = unsigned(c.rules.size());
		x->reflect = c.mode == "reflect";
		x->qsbr = rt.qsbr();
		x->budget = &a.budget;
		x->duration_cyc = uint64_t(c.duration_s * hz);
		x->idle_cyc = uint64_t(c.idle_exit_s * hz);
		x->drain_cyc = uint64_t(double(c.pending_timeout_ms) * 1e-3 * hz) + uint64_t(0.1 * hz);
		a.ctx.push_back(std::move(x));
	}
	return 0;
}

/* Once every worker stopped: the reply paths go, and replies still waiting
 * are dropped (counted as pend_timeout). (Main thread.) */
template <class Dev> void stop_reply_paths(fwd_app<Dev> &a)
{
	for (auto &pr : a.ports)
		for (size_t w = 0; w < pr->clients.size(); w++) {
			for (unsigned i = 0; i < pr->clients[w]; i++) {
				pr->svc.remove_client(pr->st[w]->cl[i]);
				pr->st[w]->cl[i].fini();
			}
			pr->clients[w] = 0;
		}
}

/* Once every worker stopped and its last copy is taken: each queue sends
 * what it still held and is destroyed (what could not be sent is freed),
 * the ARP/ND frames in flight to or from the control thread are freed, and
 * what is then still out of each port's pool is counted into mbufs_out
 * (by port): 0 unless the PMD keeps receive buffers posted until the port
 * stops (a NIC's ring; not net_pcap, net_ring, net_memif in copy mode or
 * net_af_packet). (Main thread.) */
template <class Dev> void close_queues(runtime &rt, fwd_app<Dev> &a, std::vector<int64_t> *mbufs_out)
{
	mbufs_out->clear();
	for (auto &pr : a.ports) {
		for (size_t w = 0; w < pr->queue_up.size(); w++)
			if (pr->queue_up[w]) {
				pr->st[w]->q.tx_flush();
				pr->dev.destroy_queue(pr->st[w]->q);
				pr->queue_up[w] = false;
			}
		int64_t out = -1;
		if constexpr (apps::is_soft<Dev>) {
			rt.ctl().call([&] {
				pr->dev.drain_control_frames();
				out = int64_t(rte_mempool_in_use_count(pr->dev.mempool()));
			});
		} else {
			out = int64_t(rte_mempool_in_use_count(pr->dev.mempool()));
		}
		mbufs_out->push_back(out);
	}
}

/* After the last report: the peers' AHs, the AH services, the queues, the
 * devices. (Main thread.) */
template <class Dev> void close_ports(fwd_app<Dev> &a)
{
	for (auto &pr : a.ports)
		pr->tear_down();
}

} // namespace rdgram::fwd

#endif
