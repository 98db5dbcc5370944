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
#include "rdgram/config.h"

namespace rdgram::perf {

int open_soft_endpoint(runtime &rt, const perf_config &c, soft_endpoint &e, uint16_t port_id)
{
	soft::soft_config sc(c); /* [port]: mtu, pkey, max_ah, neighbour resolution */
	sc.port_id = port_id;
	sc.set_mac = true;
	sc.mac = e.self->mac;
	sc.addresses = {e.self->address};
	/* The peer's MAC as a static neighbour when it is known (the config,
	 * or a soft peer's --oob record); a verbs peer does not know its MAC
	 * (its --oob record says 00:00:00:00:00:00): resolved by ARP/ND. */
	const bool peer_mac_known = !rte_is_zero_ether_addr(&e.other->mac);
	const bool with_dests = c.dests != 0 && c.test == "txonly" && e.self == &c.client;
	if (with_dests && !peer_mac_known) {
		fprintf(stderr, "rdgram-perf: --dests needs the peer's MAC (client.mac of the server's config)\n");
		return EINVAL;
	}
	if (with_dests) {
		/* One AH per destination plus the peer's own. */
		sc.neighbours = dest_neighbours(*e.other, *e.self, c.dests);
		sc.max_ah = std::max<uint32_t>(c.max_ah, c.dests + 1);
	} else if (peer_mac_known) {
		sc.neighbours = {{e.other->address, e.other->mac}};
	}
	sc.qsbr = rt.qsbr();
	/* The AV replica goes on the poll thread's NUMA node. */
	sc.av_nodes = replica_nodes(rt.topology(), {e.where});
	if (int rc = e.dev.open(sc); rc != 0) {
		fprintf(stderr, "rdgram-perf: %s port: %s\n", e.role, e.dev.error().c_str());
		return rc;
	}
	/* The control thread answers ARP/ND for our address and reclaims AH
	 * slots (the poll thread of queue 0 carries the frames). */
	e.polled.add(rt, &soft::soft_device::control_poller, &e.dev);
	if (int rc = e.dev.create_queue({.index = 0, .socket = sc.av_nodes[0]}, e.q); rc != 0) {
		fprintf(stderr, "rdgram-perf: %s queue: %s\n", e.role, e.dev.error().c_str());
		return rc;
	}
	e.q.add_qp(e.self->qpn, e.self->qkey);
	e.inline_max = c.inline_size;

	/* A static neighbour answers at once; an unknown MAC is resolved,
	 * this thread polling the queue meanwhile (ARP/ND answers come in on
	 * it), bounded by the run's timeout. */
	const auto pump = [&e] {
		recv_wc wcs[32];
		const uint16_t k = e.q.rx_burst(wcs, 32);
		for (uint16_t i = 0; i < k; i++)
			rte_pktmbuf_free(wcs[i].mbuf);
		e.q.tx_flush();
	};
	const uint64_t until = rte_rdtsc() + uint64_t(c.timeout_s * double(rte_get_tsc_hz()));
	ah_handle h = ah_null;
	std::string why;
	if (int err = soft_ah(rt, e.dev, e.other->address, pump, until, &h, &why); err != 0) {
		fprintf(stderr, "rdgram-perf: %s: %s\n", e.role, why.c_str());
		return err;
	}
	e.to = peer{h, e.other->qpn, e.other->qkey};
	if (with_dests)
		return create_dests(rt, e.dev, sc.neighbours, c.dest_order == "random", &e.dests);
	return 0;
}

int open_loopback(runtime &rt, uint16_t *srv_port, uint16_t *cli_port, lcore_cpu *srv, lcore_cpu *cli)
{
	rte_ring *r0 = rte_ring_create("rdgram_lo0", 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	rte_ring *r1 = rte_ring_create("rdgram_lo1", 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
	int ps = r0 && r1 ? rte_eth_from_rings("rdgram_srv", &r0, 1, &r1, 1, 0) : -1;
	int pc = r0 && r1 ? rte_eth_from_rings("rdgram_cli", &r1, 1, &r0, 1, 0) : -1;
	if (ps < 0 || pc < 0) {
		fprintf(stderr, "rdgram-perf: cannot create the net_ring loopback pair\n");
		return 1;
	}
	auto lcores = rt.poll_lcores(rte_eth_dev_socket_id(uint16_t(ps)));
	/* The client runs on the main lcore, the server on a worker. */
	lcore_cpu main_l{rte_get_main_lcore(), unsigned(rte_lcore_to_cpu_id(int(rte_get_main_lcore())))};
	const lcore_cpu *worker = nullptr;
	for (const auto &l : lcores)
		if (l.lcore != main_l.lcore) {
			worker = &l;
			break;
		}
	if (worker == nullptr) {
		fprintf(stderr, "rdgram-perf: loopback needs two lcores (EAL -l with two CPUs)\n");
		return 2;
	}
	*srv_port = uint16_t(ps);
	*cli_port = uint16_t(pc);
	*srv = *worker;
	*cli = main_l;
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

void exposure::start(const std::vector<soft_endpoint *> &eps)
{
	telemetry::attachment a;
	a.app = "rdgram-perf";
	a.ctl = &rt_.ctl();
	for (soft_endpoint *e : eps) {
		const bool is_srv = strcmp(e->role, "server") == 0;
		telemetry::qp_publisher *pub = is_srv ? &srv_pub_ : &cli_pub_;
		a.lcores.push_back({e->where.lcore, e->where.cpu, numa_of_cpu(rt_.topology(), e->where.cpu), e->role});
		char mac[RTE_ETHER_ADDR_FMT_SIZE];
		rte_ether_format_addr(mac, sizeof(mac), &e->dev.mac());
		a.ports.push_back({&e->dev, int(e->dev.port_id()), e->role, mac});
		a.qps.push_back({std::string(e->role) + "_qp0", e->where.lcore, int(e->dev.port_id()), e->self->qpn, pub});
		a.ah_devices.push_back(&e->dev);
		line_.qps.push_back(pub);
		if (!is_srv)
			line_.prog = &prog_;
	}
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
