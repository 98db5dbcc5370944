/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "fwd_setup.h"

#include <cstdio>
#include <cstring>
#include <string>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>

#include "port.h"
#include "rdgram/config.h"

namespace rdgram::fwd {

namespace {

int sgid_for(const port_config &p, const wire::gid &dst)
{
	for (size_t i = 0; i < p.addresses.size(); i++)
		if (p.addresses[i].is_v4_mapped() == dst.is_v4_mapped())
			return int(i);
	return -1;
}

} // namespace

int set_up(runtime &rt, const fwd_config &c, fwd_app &a)
{
	const unsigned main_lcore = rte_get_main_lcore();
	const lcore_cpu *worker = nullptr;
	std::vector<std::unique_ptr<port_rt>> &ports = a.ports;
	loop_ctx *ctx = a.ctx.get();
	for (size_t p = 0; p < c.ports.size(); p++) {
		auto pr = std::make_unique<port_rt>();
		pr->cfg = &c.ports[p];
		if (std::string err; apps::probe_port(c.ports[p].device, &pr->port_id, &err) != 0) {
			fprintf(stderr, "rdgram-fwd: %s\n", err.c_str());
			return 1;
		}
		ports.push_back(std::move(pr));
	}
	/* The poll lcore: the first worker in NUMA order of the first port. */
	const std::vector<lcore_cpu> lcores = rt.poll_lcores(rte_eth_dev_socket_id(ports[0]->port_id));
	for (const auto &l : lcores)
		if (l.lcore != main_lcore) {
			worker = &l;
			break;
		}
	if (worker == nullptr) {
		fprintf(stderr, "rdgram-fwd: needs two lcores (EAL -l with two CPUs): the poll loop runs on a "
				"worker\n");
		return 2;
	}
	a.worker = *worker;
	const std::vector<int> nodes = replica_nodes(rt.topology(), {*worker});

	for (size_t p = 0; p < c.ports.size(); p++) {
		port_rt &pr = *ports[p];
		const port_config &pc = c.ports[p];
		soft::soft_config sc(pc); /* mtu, pkey, max_ah, neighbour resolution */
		sc.port_id = pr.port_id;
		sc.set_mac = pc.set_mac;
		sc.mac = pc.mac;
		sc.addresses = pc.addresses;
		sc.nb_mbufs = pc.nb_mbufs;
		for (const auto &n : pc.neighbours)
			sc.neighbours.push_back({n.ip, n.mac});
		/* A peer's configured MAC is a static neighbour of its egress port. */
		for (const auto &pe : c.peers)
			if (pe.mac && (pe.port == pc.name || (pe.port.empty() && p == 0)))
				sc.neighbours.push_back({pe.ip, *pe.mac});
		sc.qsbr = rt.qsbr();
		sc.av_nodes = nodes;
		if (int rc = pr.dev.open(sc); rc != 0) {
			fprintf(stderr, "rdgram-fwd: port %s: %s\n", pc.name.c_str(), pr.dev.error().c_str());
			return 1;
		}
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
		if (pr.dev.create_queue({.index = 0, .socket = asc.socket}, pr.st.q) != 0) {
			fprintf(stderr, "rdgram-fwd: port %s: %s\n", pc.name.c_str(), pr.dev.error().c_str());
			return 1;
		}
		for (const auto &q : pc.qps) {
			const unsigned i = pr.st.nqp;
			if (int rc = pr.st.q.add_qp(q.qpn, q.qkey); rc != 0) {
				fprintf(stderr, "rdgram-fwd: port %s: QP 0x%x: %s\n", pc.name.c_str(), q.qpn,
					strerror(rc));
				return 1;
			}
			pr.st.qpn[i] = q.qpn;
			pr.st.qkey[i] = q.qkey;
			ah_client_config cc;
			cc.max_dests = c.pending_dests;
			cc.max_per_dest = c.pending_per_dest;
			cc.max_total = c.pending_total;
			cc.timeout_us = uint64_t(c.pending_timeout_ms) * 1000;
			cc.mp = pr.dev.mempool();
			cc.socket = asc.socket;
			if (int rc = pr.svc.add_client(pr.st.cl[i], cc); rc != 0) {
				fprintf(stderr, "rdgram-fwd: port %s: reply path: %s\n", pc.name.c_str(), strerror(rc));
				return 1;
			}
			pr.nclients++;
			pr.st.nqp++;
		}
		ctx->ports[p] = &pr.st;
	}
	ctx->nports = unsigned(ports.size());

	/* Peers: the key the poll thread sends to; with a configured MAC
	 * the AH is created now and held, so the first packet hits. */
	for (size_t i = 0; i < c.peers.size(); i++) {
		const peer_config &pe = c.peers[i];
		unsigned e = 0;
		for (size_t p = 0; p < c.ports.size(); p++)
			if (c.ports[p].name == pe.port)
				e = unsigned(p);
		ibv_ah_attr a{};
		a.is_global = 1;
		a.port_num = 1;
		a.grh.sgid_index = uint8_t(sgid_for(c.ports[e], pe.ip));
		a.grh.hop_limit = pe.hop_limit;
		a.grh.traffic_class = pe.traffic_class;
		memcpy(a.grh.dgid.raw, pe.ip.raw, 16);
		peer_state &ps = ctx->peers[i];
		ps.key = ah_key::of(a);
		ps.port = e;
		ps.qpn = pe.qpn;
		ps.keep_qkey = !pe.qkey.has_value();
		ps.qkey = pe.qkey.value_or(0);
		if (pe.mac) {
			int err = 0;
			ah_handle h = ports[e]->svc.create_ah(a, &err);
			if (err != 0) {
				fprintf(stderr, "rdgram-fwd: peer %s (%s): creating its AH failed: %s\n",
					pe.name.c_str(), format_gid(pe.ip).c_str(), strerror(err));
				return 1;
			}
			ports[e]->held.push_back(h);
		}
	}
	ctx->npeers = unsigned(c.peers.size());
	for (size_t r = 0; r < c.rules.size(); r++) {
		const rule_config &ru = c.rules[r];
		rule_state &rs = ctx->rules[r];
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
	ctx->nrules = unsigned(c.rules.size());
	ctx->reflect = c.mode == "reflect";
	ctx->qsbr = rt.qsbr();
	ctx->max_packets = c.max_packets;
	const double hz = double(rte_get_tsc_hz());
	ctx->duration_cyc = uint64_t(c.duration_s * hz);
	ctx->idle_cyc = uint64_t(c.idle_exit_s * hz);
	ctx->drain_cyc = uint64_t(double(c.pending_timeout_ms) * 1e-3 * hz) + uint64_t(0.1 * hz);
	return 0;
}

void stop_reply_paths(fwd_app &a)
{
	for (auto &pr : a.ports) {
		for (unsigned i = 0; i < pr->nclients; i++) {
			pr->svc.remove_client(pr->st.cl[i]);
			pr->st.cl[i].fini();
		}
		pr->nclients = 0;
	}
}

void close_ports(fwd_app &a)
{
	for (auto &pr : a.ports) {
		for (ah_handle h : pr->held)
			pr->svc.destroy_ah(h);
		pr->held.clear();
		pr->svc.stop();
		pr->svc_up = false;
		pr->dev.close();
	}
}

} // namespace rdgram::fwd
