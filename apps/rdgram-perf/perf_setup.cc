/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "perf_setup.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "perf_dests.h"
#include "perf_oob.h"
#include "perf_port.h"
#include "workers.h"
#include "rdgram/config.h"

namespace rdgram::perf {

int open_soft_side(runtime &rt, const perf_config &c, soft_side &s, bool peer_mode)
{
	/* The peer's MAC as a static neighbour when it is known (the config,
	 * or a soft peer's --oob record); a verbs peer does not know its MAC
	 * (its --oob record says 00:00:00:00:00:00) and the standard tools
	 * exchange none: resolved by ARP/ND. */
	const bool peer_mac_known = !peer_mode && !rte_is_zero_ether_addr(&s.other->mac);
	const bool with_dests = c.dests != 0 && c.test == "txonly" && strcmp(s.role, "client") == 0;
	if (with_dests && !peer_mac_known) {
		fprintf(stderr, "rdgram-perf: --dests needs the peer's MAC (client.mac of the server's config)\n");
		return EINVAL;
	}
	std::vector<soft::neighbour> statics;
	soft::port_setup ps;
	ps.control = apps::control_host(rt); /* ARP/ND answers, AH slots reclaimed */
	ps.qsbr = rt.qsbr();
	/* The AV replicas go on the poll threads' NUMA nodes. */
	std::vector<lcore_cpu> where;
	for (const auto &e : s.w)
		where.push_back(e->where);
	ps.av_nodes = replica_nodes(rt.topology(), where);
	ps.adjust = [&](soft::soft_config &sc) {
		static_cast<soft::soft_port_params &>(sc) = c; /* [port] with the command line's */
		sc.set_mac = true;
		sc.mac = s.self->mac;
		sc.addresses = {s.self->address};
		sc.neighbours.clear();
		if (c.mode != "loopback") {
			/* The side's port table: its GID table, self->address
			 * first (sgid_index 0 of every AH here; select_port took
			 * it from the table), and its static neighbours. */
			for (const auto &a : c.port.addresses)
				if (!(a == s.self->address))
					sc.addresses.push_back(a);
			sc.neighbours = c.port.neighbours;
		}
		if (with_dests) {
			/* One AH per destination plus the peers' own. */
			for (const auto &d : dest_neighbours(*s.other, *s.self, c.dests))
				sc.neighbours.push_back(d);
			sc.max_ah = std::max<uint32_t>(c.max_ah, c.dests + uint32_t(s.w.size()));
		} else if (peer_mac_known) {
			sc.neighbours.push_back({s.other->address, s.other->mac});
		}
		if (peer_mode)
			sc.resolve = true;
		statics = sc.neighbours;
	};
	if (std::string err; apps::open_device<soft::soft_device>(rt, {.port = &c.port, .setup = ps}, s.owner, &err) != 0) {
		fprintf(stderr, "rdgram-perf: %s: %s\n", s.role, err.c_str());
		return 1;
	}
	const std::vector<int> &av_nodes = ps.av_nodes;
	for (auto &e : s.w) {
		const int node = numa_of_cpu(rt.topology(), e->where.cpu);
		if (int rc = s.dev.create_queue({.index = uint16_t(e->index), .socket = node >= 0 ? node : av_nodes[0]}, e->q);
		    rc != 0) {
			fprintf(stderr, "rdgram-perf: %s queue %u: %s\n", s.role, e->index, s.dev.error().c_str());
			return rc;
		}
		e->qpn = s.self->qpn + e->index;
		e->q.add_qp(e->qpn, s.self->qkey);
		e->inline_max = c.inline_size;
	}
	if (peer_mode)
		return 0;

	/* A static neighbour answers at once; an unknown MAC is resolved,
	 * this thread polling the queues meanwhile (ARP/ND answers come in
	 * on any of them), bounded by the run's timeout. */
	const auto pump = [&s] {
		recv_wc wcs[32];
		for (auto &e : s.w) {
			const uint16_t k = e->q.rx_burst(wcs, 32);
			for (uint16_t i = 0; i < k; i++)
				rte_pktmbuf_free(wcs[i].mbuf);
			e->q.tx_flush();
		}
	};
	const uint64_t until = rte_rdtsc() + uint64_t(c.timeout_s * double(rte_get_tsc_hz()));
	for (auto &e : s.w) {
		ah_handle h = ah_null;
		std::string why;
		if (int err = soft_ah(rt, s.dev, s.other->address, pump, until, &h, &why); err != 0) {
			fprintf(stderr, "rdgram-perf: %s: %s\n", s.role, why.c_str());
			return err;
		}
		e->to = peer{h, s.other->qpn + e->index, s.other->qkey};
	}
	if (with_dests)
		return create_dests(rt, s.dev, statics, c.dest_order == "random", &s.dests);
	return 0;
}

int open_loopback(runtime &rt, unsigned n, uint16_t *srv_port, uint16_t *cli_port, std::vector<lcore_cpu> *srv,
		  std::vector<lcore_cpu> *cli)
{
	/* Queue i of one port sends into ring r[2i], which queue i of the
	 * other receives from, and the other way round on r[2i + 1]. */
	std::vector<rte_ring *> a(n), b(n);
	bool ok = true;
	for (unsigned i = 0; i < n; i++) {
		const std::string na = "rdgram_lo" + std::to_string(2 * i), nb = "rdgram_lo" + std::to_string(2 * i + 1);
		a[i] = rte_ring_create(na.c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
		b[i] = rte_ring_create(nb.c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
		ok &= a[i] != nullptr && b[i] != nullptr;
	}
	int ps = ok ? rte_eth_from_rings("rdgram_srv", a.data(), n, b.data(), n, 0) : -1;
	int pc = ok ? rte_eth_from_rings("rdgram_cli", b.data(), n, a.data(), n, 0) : -1;
	if (ps < 0 || pc < 0) {
		fprintf(stderr, "rdgram-perf: cannot create the net_ring loopback pair\n");
		return 1;
	}
	/* n server workers, then n clients, the main lcore (last) a client. */
	std::vector<lcore_cpu> lcores;
	std::string err;
	const auto all = rt.poll_lcores(rte_eth_dev_socket_id(uint16_t(ps)));
	if (all.size() < 2 * n || apps::pick_workers(rt, rte_eth_dev_socket_id(uint16_t(ps)), 2 * n, &lcores, &err) != 0) {
		if (n == 1)
			fprintf(stderr, "rdgram-perf: loopback needs two lcores (EAL -l with two CPUs)\n");
		else
			fprintf(stderr, "rdgram-perf: --workers %u in loopback runs %u poll threads (a server and a "
					"client per worker): only %zu lcore(s) given to the EAL (-l)\n",
				n, 2 * n, all.size());
		return 2;
	}
	*srv_port = uint16_t(ps);
	*cli_port = uint16_t(pc);
	srv->assign(lcores.begin(), lcores.begin() + n);
	cli->assign(lcores.begin() + n, lcores.end());
	return 0;
}

int oob_swap(const perf_config &c, const endpoint_config &self, endpoint_config *other)
{
	oob_addr me{}, peer{};
	memcpy(me.gid, self.address.raw, 16);
	me.qpn = self.qpn;
	me.qkey = self.qkey;
	memcpy(me.mac, self.mac.addr_bytes, 6);
	std::string err;
	if (int rc = oob_exchange(c.rdma.oob, c.mode == "server", me, c.timeout_s, &peer, &err); rc != 0) {
		fprintf(stderr, "rdgram-perf: --oob %s: %s\n", c.rdma.oob.c_str(), err.c_str());
		return rc;
	}
	memcpy(other->address.raw, peer.gid, 16);
	other->qpn = peer.qpn;
	other->qkey = peer.qkey;
	memcpy(other->mac.addr_bytes, peer.mac, 6);
	if (!c.json)
		printf(" rdgram-perf: --oob %s: peer QPN 0x%06x, GID %s, Q_Key 0x%x\n", c.rdma.oob.c_str(), other->qpn,
		       format_gid(other->address).c_str(), other->qkey);
	return 0;
}

void exposure::attach(telemetry::attachment a)
{
	if (int rc = telemetry::attach(std::move(a)); rc != 0)
		fprintf(stderr, "rdgram-perf: telemetry not attached: %s\n", strerror(rc));
	attached_ = true;
	if (o_.status_interval > 0) {
		line_.interval = uint64_t(o_.status_interval * double(rte_get_tsc_hz()));
		line_.start = rte_get_tsc_cycles();
		line_.next = line_.start + line_.interval;
		line_.last_tsc = line_.start;
		line_on_ = rt_.ctl().add_poller(&status_printer::poll, &line_) == 0;
	}
}

void exposure::stop()
{
	if (line_on_)
		rt_.ctl().remove_poller(&status_printer::poll, &line_);
	line_on_ = false;
	if (attached_)
		telemetry::detach();
	attached_ = false;
}

} // namespace rdgram::perf
