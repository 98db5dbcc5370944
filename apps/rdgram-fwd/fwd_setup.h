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
#include "rdgram/ah_service.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "open_device.h"
#include "soft_port.h"
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
	static constexpr bool soft_drv = apps::is_soft<Dev>;
	const port_config *cfg = nullptr;
	/* soft: the DPDK port and the device on it (soft_port.h); the RDMA
	 * drivers: the [rdma] device. */
	apps::device_owner<Dev> owner;
	Dev &dev() { return apps::device_of<Dev>(owner); }
	uint16_t port_id() const
	{
		if constexpr (soft_drv)
			return owner.port_id();
		else
			return 0;
	}
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
				dev().destroy_queue(st[w]->q);
				queue_up[w] = false;
			}
		if (open || soft_drv)
			owner.close();
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

/* Opens every port of c (soft: each [[port]], with c.workers queue pairs;
 * the RDMA drivers: the [rdma] device) and picks the workers' lcores
 * (apps/common/workers.h: NUMA order of the first port, the main lcore
 * last). 0, or 1/2 (printed). (Main thread.) */
template <class Dev> int open_ports(runtime &rt, const fwd_config &c, fwd_app<Dev> &a)
{
	const unsigned nw = c.workers;
	std::string err;
	for (size_t p = 0; p < c.ports.size(); p++) {
		auto pr = std::make_unique<port_rt<Dev>>();
		pr->cfg = &c.ports[p];
		for (unsigned w = 0; w < nw; w++)
			pr->st.push_back(std::make_unique<port_state<typename Dev::queue_type>>());
		pr->queue_up.assign(nw, false);
		pr->clients.assign(nw, 0);
		a.ports.push_back(std::move(pr));
	}
	if constexpr (apps::is_soft<Dev>) {
		for (auto &pr : a.ports)
			if (int rc = pr->owner.probe(*pr->cfg, uint16_t(nw), &err); rc != 0) {
				fprintf(stderr, "rdgram-fwd: %s\n", err.c_str());
				return rc == EINVAL ? 2 : 1;
			}
		/* The workers first: the AV replicas go on their NUMA nodes. */
		if (apps::pick_workers(rt, a.ports[0]->owner.socket(), nw, &a.workers, &err) != 0) {
			fprintf(stderr, "rdgram-fwd: %s\n", err.c_str());
			return 2;
		}
		soft::port_setup s;
		s.qsbr = rt.qsbr();
		s.av_nodes = replica_nodes(rt.topology(), a.workers);
		for (size_t p = 0; p < a.ports.size(); p++) {
			/* A peer's configured MAC is a static neighbour of its egress port. */
			s.neighbours.clear();
			for (const auto &pe : c.peers)
				if (pe.mac && (pe.port == c.ports[p].name || (pe.port.empty() && p == 0)))
					s.neighbours.push_back({pe.ip, *pe.mac});
			if (apps::open_device<Dev>(rt, {.port = &c.ports[p], .setup = s}, a.ports[p]->owner, &err) != 0) {
				fprintf(stderr, "rdgram-fwd: %s\n", err.c_str());
				return 1;
			}
			a.ports[p]->open = true;
		}
		return 0;
	} else {
		port_rt<Dev> &pr = *a.ports[0];
		const apps::rdma_open o{.max_ah = pr.cfg->max_ah, .qkey = c.rdma.qkey};
		if (apps::open_device<Dev>(rt, {.rdma = &c.rdma, .rdma_opts = o}, pr.owner, &err) != 0) {
			fprintf(stderr, "rdgram-fwd: %s\n", err.c_str());
			return 1;
		}
		pr.open = true;
		if (apps::pick_workers(rt, pr.owner.port().numa_node, nw, &a.workers, &err) != 0) {
			fprintf(stderr, "rdgram-fwd: %s\n", err.c_str());
			return 2;
		}
		return 0;
	}
}

/* Port pr's AH service (its control-thread poller also runs the device's
 * housekeeping: ARP/ND, reclamation), and worker w's queue on it with the
 * QPs placed there and their reply paths, for every worker. 0 or 1
 * (printed). (Main thread.) */
template <class Dev> int open_queues(runtime &rt, const fwd_config &c, int socket, port_rt<Dev> &pr)
{
	const port_config &pc = *pr.cfg;
	ah_service_config asc;
	asc.capacity = pc.max_ah;
	asc.qsbr = rt.qsbr();
	asc.socket = socket;
	if (int rc = pr.svc.start(pr.dev(), rt.ctl(), asc); rc != 0) {
		fprintf(stderr, "rdgram-fwd: port %s: AH service: %s\n", pc.name.c_str(), strerror(rc));
		return 1;
	}
	pr.svc_up = true;
	for (unsigned w = 0; w < c.workers; w++) {
		auto &st = *pr.st[w];
		queue_params qp;
		qp.index = uint16_t(w);
		qp.socket = socket;
		if constexpr (!apps::is_soft<Dev>)
			qp.qkey = c.rdma.qkey;
		if (pr.dev().create_queue(qp, st.q) != 0) {
			fprintf(stderr, "rdgram-fwd: port %s: queue %u: %s\n", pc.name.c_str(), w, pr.dev().error().c_str());
			return 1;
		}
		pr.queue_up[w] = true;
		for (size_t k = 0; k < pc.qps.size(); k++) {
			if (qp_worker(pc, k, c.workers) != w)
				continue;
			const unsigned i = st.nqp;
			if constexpr (apps::is_soft<Dev>) {
				if (int rc = st.q.add_qp(pc.qps[k].qpn, pc.qps[k].qkey); rc != 0) {
					fprintf(stderr, "rdgram-fwd: port %s: QP 0x%x: %s\n", pc.name.c_str(), pc.qps[k].qpn,
						strerror(rc));
					return 1;
				}
				st.qpn[i] = pc.qps[k].qpn;
				st.qkey[i] = pc.qps[k].qkey;
			} else {
				st.qpn[i] = queue_qpn(st.q);
				st.qkey[i] = c.rdma.qkey;
			}
			ah_client_config cc;
			cc.max_dests = c.pending_dests;
			cc.max_per_dest = c.pending_per_dest;
			cc.max_total = c.pending_total;
			cc.timeout_us = uint64_t(c.pending_timeout_ms) * 1000;
			cc.mp = pr.dev().mempool();
			cc.socket = socket;
			if (int rc = pr.svc.add_client(st.cl[i], cc); rc != 0) {
				fprintf(stderr, "rdgram-fwd: port %s: reply path: %s\n", pc.name.c_str(), strerror(rc));
				return 1;
			}
			pr.clients[w]++;
			st.nqp++;
		}
	}
	return 0;
}

/* The peers: the key the poll threads send to; with a configured MAC
 * (soft) the AH is created now and held, so the first packet hits. 0 or 1
 * (printed). (Main thread.) */
template <class Dev> int make_peers(const fwd_config &c, fwd_app<Dev> &a, peer_state *peers)
{
	for (size_t i = 0; i < c.peers.size(); i++) {
		const peer_config &pe = c.peers[i];
		unsigned e = 0;
		for (size_t p = 0; p < c.ports.size(); p++)
			if (c.ports[p].name == pe.port)
				e = unsigned(p);
		ibv_ah_attr at{};
		at.is_global = 1;
		at.port_num = 1;
		at.grh.sgid_index = apps::is_soft<Dev> ? uint8_t(detail::sgid_for(c.ports[e], pe.ip)) : c.rdma.sgid_index();
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
			ah_handle h = a.ports[e]->svc.create_ah(at, &ae);
			if (ae != 0) {
				fprintf(stderr, "rdgram-fwd: peer %s (%s): creating its AH failed: %s\n", pe.name.c_str(),
					format_gid(pe.ip).c_str(), strerror(ae));
				return 1;
			}
			a.ports[e]->held.push_back(h);
		}
	}
	return 0;
}

/* The rules, in the poll threads' form. */
inline void make_rules(const fwd_config &c, rule_state *rules)
{
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
}

/* Opens every port (open_ports), each worker's queue, QPs and reply paths
 * on it (open_queues), the peers' AHs and the rules, and fills one loop
 * context per worker. 0, or 1/2 (printed). (Main thread.) */
template <class Dev> int set_up(runtime &rt, const fwd_config &c, fwd_app<Dev> &a)
{
	if (int rc = open_ports(rt, c, a); rc != 0)
		return rc;
	const std::vector<int> nodes =
		apps::is_soft<Dev> ? replica_nodes(rt.topology(), a.workers) : std::vector<int>{};
	const int socket = nodes.empty() ? SOCKET_ID_ANY : nodes[0];
	for (auto &pr : a.ports)
		if (int rc = open_queues(rt, c, socket, *pr); rc != 0)
			return rc;
	peer_state peers[max_peers]{};
	if (int rc = make_peers(c, a, peers); rc != 0)
		return rc;
	rule_state rules[max_rules]{};
	make_rules(c, rules);
	a.budget.max = c.max_packets;
	const double hz = double(rte_get_tsc_hz());
	for (unsigned w = 0; w < c.workers; w++) {
		auto x = std::make_unique<loop_ctx<typename Dev::queue_type>>();
		x->worker = w;
		for (size_t p = 0; p < a.ports.size(); p++)
			x->ports[p] = a.ports[p]->st[w].get();
		x->nports = unsigned(a.ports.size());
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
				pr->dev().destroy_queue(pr->st[w]->q);
				pr->queue_up[w] = false;
			}
		int64_t out = -1;
		if constexpr (apps::is_soft<Dev>) {
			rt.ctl().call([&] {
				pr->dev().drain_control_frames();
				out = int64_t(rte_mempool_in_use_count(pr->dev().mempool()));
			});
		} else {
			out = int64_t(rte_mempool_in_use_count(pr->dev().mempool()));
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
