/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-ah: the operators' AH tool.
 *
 *   rdgram-ah [EAL args --] inspect|bench|storm [options]
 *
 * It runs the AH registry and service of one host (a soft RoCEv2 device,
 * "local") whose peer (a second soft device, "peer") sits on the other end
 * of an in-process net_ring pair and answers ARP/ND for the addresses that
 * are resolved dynamically. One worker lcore polls both queues (neighbour
 * frames travel through them) and, in storm, watches the destination cache
 * for each new AH becoming visible to the data path.
 *
 *   inspect  creates a set of AHs (static and resolved destinations, a few
 *            released again) and prints the registry: destination, state,
 *            refcount, generation, ahn, neighbour, AV bytes
 *   bench    create rate one by one and batched, reuse rate, dest_cache
 *            bulk lookup rate
 *   storm N  creates N AHs in batches; time until all are ready, p50/p99 of
 *            each AH's readiness, registry memory
 */
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_ring.h>

#include "ah_app.h"
#include "cli.h"
#include "rdgram/ah_service.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"
#include "rdgram/telemetry.h"
#include "soft_device.h"

using namespace rdgram;
using namespace rdgram::ahtool;

namespace {

std::atomic<bool> g_hold_stop{false};
void on_hold_signal(int) { g_hold_stop.store(true); }

constexpr uint32_t local_qpn = 0x300, peer_qpn = 0x301, qkey = 0x2222;

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
	ibv_ah_attr a{};
	a.is_global = 1;
	a.port_num = 1;
	a.grh.sgid_index = 0;
	a.grh.hop_limit = 64;
	a.grh.flow_label = flow;
	memcpy(a.grh.dgid.raw, dst.raw, 16);
	return a;
}

/* Everything the modes share. */
struct host {
	host(runtime &r, const ah_app_config &cfg) : c(&cfg), rt(r) {}
	const ah_app_config *c;
	runtime &rt; /* outlives the host: its devices free EAL memory */
	soft::soft_device local, peer;
	soft::soft_queue ql, qp;
	ah_service svc;
	ah_client cl;
	bool svc_up = false, client_up = false, peer_polled = false;
	telemetry::qp_publisher pub_l, pub_p;
	lcore_cpu worker{};
	bool worker_running = false;

	/* Worker state. */
	std::atomic<bool> stop{false};
	/* Storm readiness watch: set up by main before watching is raised. */
	const ah_key *watch_keys = nullptr;
	uint64_t *ready_tsc = nullptr;   /* per key; written by the worker */
	uint32_t *watch_idx = nullptr;   /* keys not yet seen, compacted */
	uint32_t watch_n = 0;
	uint64_t scans = 0;              /* full passes over the pending keys */
	std::atomic<bool> watching{false}, watch_done{false};
	std::atomic<uint64_t> loops{0}; /* worker iterations, for the hand-off */
};

/* The worker lcore: a poll thread for both queues (and the AH client). No
 * syscall, no lock, no allocation in the loop. */
int worker_main(void *arg)
{
	auto *h = static_cast<host *>(arg);
	h->rt.bind_this_thread(h->worker.cpu);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(h->rt.qsbr(), tid);
	recv_wc wc[32];
	uint32_t rd = 0, wr = 0; /* watch: read and write positions in this pass */
	while (!h->stop.load(std::memory_order_acquire)) {
		const uint64_t now = rte_get_tsc_cycles();
		for (soft::soft_queue *q : {&h->ql, &h->qp}) {
			const uint16_t n = q->rx_burst(wc, 32);
			for (uint16_t i = 0; i < n; i++)
				rte_pktmbuf_free(wc[i].mbuf);
			q->tx_flush();
		}
		h->cl.poll(h->ql, now);
		if (h->watching.load(std::memory_order_acquire) && !h->watch_done.load(std::memory_order_relaxed)) {
			/* One bulk lookup per loop: the queues stay polled while a
			 * large storm is watched. */
			const unsigned n = std::min<uint32_t>(dest_cache::max_bulk, h->watch_n - rd);
			ah_key keys[dest_cache::max_bulk];
			ah_handle out[dest_cache::max_bulk];
			for (unsigned i = 0; i < n; i++)
				keys[i] = h->watch_keys[h->watch_idx[rd + i]];
			uint64_t hit = 0;
			h->svc.cache().lookup_bulk(keys, n, out, &hit);
			const uint64_t t = rte_get_tsc_cycles();
			/* Compacted in place as the pass goes: hits leave the
			 * pending list, the rest move down to wr. */
			for (unsigned i = 0; i < n; i++) {
				const uint32_t k = h->watch_idx[rd + i];
				if (hit >> i & 1)
					h->ready_tsc[k] = t;
				else
					h->watch_idx[wr++] = k;
			}
			rd += n;
			if (rd >= h->watch_n) {
				h->watch_n = wr;
				rd = wr = 0;
				h->scans++;
			}
			if (h->watch_n == 0)
				h->watch_done.store(true, std::memory_order_release);
		}
		h->pub_l.maybe_publish(h->ql.counters(), &h->cl, now);
		h->pub_p.maybe_publish(h->qp.counters(), nullptr, now);
		rte_rcu_qsbr_quiescent(h->rt.qsbr(), tid);
		/* A plain store (one writer): main waits on it to know the
		 * worker has left the watch arrays. */
		h->loops.store(h->loops.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
	}
	h->pub_l.publish(h->ql.counters(), &h->cl, rte_get_tsc_cycles());
	h->pub_p.publish(h->qp.counters(), nullptr, rte_get_tsc_cycles());
	poll_thread_offline(h->rt.qsbr(), tid);
	return 0;
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
	h.local.init_queue(0, h.ql, nodes[0]);
	h.ql.add_qp(local_qpn, qkey);
	h.peer.init_queue(0, h.qp, nodes[0]);
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
void release_all(host &h, const std::vector<ah_handle> &hs, const std::vector<int> &errs, unsigned times = 1)
{
	h.rt.ctl().call([&] {
		for (size_t i = 0; i < hs.size(); i++)
			if (errs[i] == 0)
				for (unsigned k = 0; k < times; k++)
					h.svc.registry().release(hs[i]);
	});
}

double tsc_us(uint64_t d)
{
	return double(d) * 1e6 / double(rte_get_tsc_hz());
}

std::string hex(const uint8_t *p, size_t n)
{
	static const char *x = "0123456789abcdef";
	std::string s;
	for (size_t i = 0; i < n; i++) {
		s += x[p[i] >> 4];
		s += x[p[i] & 15];
	}
	return s;
}

struct reg_summary {
	uint64_t live, capacity, unref, memory, created, reused, evicted, failed, device_live;
};

reg_summary summary(host &h)
{
	reg_summary s{};
	h.rt.ctl().call([&] {
		ah_registry &r = h.svc.registry();
		s.live = r.size();
		s.capacity = r.capacity();
		s.unref = r.unreferenced();
		s.memory = r.memory_bytes();
		s.created = r.stats().created;
		s.reused = r.stats().reused;
		s.evicted = r.stats().evicted;
		s.failed = r.stats().failed;
		s.device_live = h.local.live_ahs();
	});
	return s;
}

std::string summary_json(const reg_summary &s)
{
	char b[512];
	snprintf(b, sizeof(b),
		 "{\"live\":%lu,\"capacity\":%lu,\"referenced\":%lu,\"unreferenced\":%lu,\"memory_bytes\":%lu,"
		 "\"created\":%lu,\"reused\":%lu,\"evicted\":%lu,\"failed\":%lu,\"device_live_ahs\":%lu}",
		 (unsigned long)s.live, (unsigned long)s.capacity, (unsigned long)(s.live - s.unref),
		 (unsigned long)s.unref, (unsigned long)s.memory, (unsigned long)s.created, (unsigned long)s.reused,
		 (unsigned long)s.evicted, (unsigned long)s.failed, (unsigned long)s.device_live);
	return b;
}

/* ---- inspect ------------------------------------------------------------ */

struct row {
	ah_key key;
	ah_handle h;
	uint32_t refs;
	bool have_neigh;
	soft::neigh_info n;
	std::string av;
};

int run_inspect(host &h)
{
	const ah_app_config &c = *h.c;
	std::vector<ibv_ah_attr> attrs;
	for (uint32_t f = 0; f < c.flows; f++) {
		for (uint32_t d = 0; d < c.dests; d++)
			attrs.push_back(attr_to(addr_of(c.ipv6, 2, d + 1), f));
		for (uint32_t d = 0; d < c.resolved; d++)
			attrs.push_back(attr_to(addr_of(c.ipv6, 3, d + 1), f));
	}
	const unsigned n = unsigned(attrs.size());
	std::vector<ah_handle> hs(n);
	std::vector<int> errs(n);
	const unsigned ok = h.svc.create_ah_batch(attrs.data(), n, hs.data(), errs.data());
	int status = 0;
	for (unsigned i = 0; i < n; i++)
		if (errs[i] != 0) {
			wire::gid g;
			memcpy(g.raw, attrs[i].grh.dgid.raw, 16);
			fprintf(stderr, "rdgram-ah: creating the AH to %s failed: %s\n", format_gid(g).c_str(),
				strerror(errs[i]));
			status = 1;
		}
	/* The last `release` AHs are destroyed again: the registry keeps them
	 * cached (refcount 0, evictable in LRU order). */
	uint32_t released = 0;
	for (unsigned i = n; i-- > 0 && released < c.release;)
		if (errs[i] == 0 && h.svc.destroy_ah(hs[i]) == 0)
			released++;

	std::vector<row> rows;
	h.rt.ctl().call([&] {
		h.svc.registry().for_each([&](const ah_key &k, ah_handle ah, uint32_t refs) {
			row r{k, ah, refs, false, {}, {}};
			wire::gid g;
			memcpy(g.raw, k.dgid, 16);
			r.have_neigh = h.local.neighbour_info(g, &r.n);
			const soft::soft_av &av = h.local.ahs().av_at(ah.slot);
			r.av = hex(av.hdr, std::min<size_t>(av.addr_len, sizeof(av.hdr)));
			rows.push_back(std::move(r));
		});
	});
	std::sort(rows.begin(), rows.end(), [](const row &a, const row &b) { return a.h.slot < b.h.slot; });
	const reg_summary s = summary(h);
	auto neigh_str = [&](const row &r) -> std::string {
		if (!r.have_neigh)
			return "-";
		return soft::neigh_state_name(r.n.state);
	};
	auto ttl_str = [&](const row &r) -> std::string {
		if (!r.have_neigh || r.n.state == soft::neigh_state::static_)
			return "-";
		return std::to_string(c.neigh_ttl_ms);
	};
	/* What is left of it: reachable entries only (stale ones are being
	 * re-resolved, static ones never expire). */
	auto left_str = [&](const row &r) -> std::string {
		if (!r.have_neigh || r.n.state != soft::neigh_state::reachable)
			return "-";
		return std::to_string(r.n.ttl_left_ms);
	};
	if (c.json) {
		printf("{\"mode\":\"inspect\",\"created\":%u,\"requested\":%u,\"released\":%u,\"registry\":%s,"
		       "\"entries\":[",
		       ok, n, released, summary_json(s).c_str());
		for (size_t i = 0; i < rows.size(); i++) {
			const row &r = rows[i];
			wire::gid g;
			memcpy(g.raw, r.key.dgid, 16);
			char mac[RTE_ETHER_ADDR_FMT_SIZE] = "";
			if (r.have_neigh)
				rte_ether_format_addr(mac, sizeof(mac), &r.n.mac);
			printf("%s{\"slot\":%u,\"generation\":%u,\"ahn\":%u,\"dest\":\"%s\",\"flow_label\":%u,"
			       "\"hop_limit\":%u,\"state\":\"%s\",\"refcount\":%u,\"neighbour\":\"%s\",\"mac\":\"%s\","
			       "\"ttl_config_ms\":%s,\"ttl_left_ms\":%s,\"av_bytes\":%zu,\"av\":\"%s\"}",
			       i ? "," : "", r.h.slot, r.h.gen, r.h.slot, format_gid(g).c_str(), r.key.flow_label,
			       r.key.hop_limit, r.refs ? "held" : "cached", r.refs, neigh_str(r).c_str(), mac,
			       ttl_str(r) == "-" ? "null" : ttl_str(r).c_str(),
			       left_str(r) == "-" ? "null" : left_str(r).c_str(), r.av.size() / 2, r.av.c_str());
		}
		printf("]}\n");
	} else {
		printf(" registry: %lu live of %lu (%lu held, %lu cached), %lu bytes, created %lu, reused %lu, "
		       "evicted %lu, failed %lu\n",
		       (unsigned long)s.live, (unsigned long)s.capacity, (unsigned long)(s.live - s.unref),
		       (unsigned long)s.unref, (unsigned long)s.memory, (unsigned long)s.created,
		       (unsigned long)s.reused, (unsigned long)s.evicted, (unsigned long)s.failed);
		printf(" %5s %4s %5s  %-22s %6s %4s %-6s %4s  %-10s %8s %8s  %s\n", "slot", "gen", "ahn", "destination",
		       "flow", "hop", "state", "refs", "neighbour", "ttl_cfg", "ttl_left", "AV (wire header template)");
		for (const row &r : rows) {
			wire::gid g;
			memcpy(g.raw, r.key.dgid, 16);
			printf(" %5u %4u %5u  %-22s %6u %4u %-6s %4u  %-10s %8s %8s  %s\n", r.h.slot, r.h.gen, r.h.slot,
			       format_gid(g).c_str(), r.key.flow_label, r.key.hop_limit, r.refs ? "held" : "cached",
			       r.refs, neigh_str(r).c_str(), ttl_str(r).c_str(), left_str(r).c_str(), r.av.c_str());
		}
	}
	/* Release what inspect still holds (the registry keeps them cached). */
	for (unsigned i = 0; i < n; i++)
		if (errs[i] == 0)
			h.svc.destroy_ah(hs[i]);
	return status;
}

/* ---- bench -------------------------------------------------------------- */

int run_bench(host &h)
{
	const ah_app_config &c = *h.c;
	const uint32_t n = c.count;
	const uint32_t ndest = std::max<uint32_t>(1, std::min(c.storm_dests, n));
	if (uint64_t(3) * n > c.capacity) {
		fprintf(stderr, "rdgram-ah: bench creates 3 x --count AHs: raise --capacity to %lu\n",
			(unsigned long)(uint64_t(3) * n));
		return 2;
	}
	/* Three disjoint key sets: flow labels 0.., n/ndest.., 2n/ndest.. */
	auto make = [&](uint32_t set) {
		std::vector<ibv_ah_attr> a(n);
		const uint32_t per = (n + ndest - 1) / ndest;
		for (uint32_t i = 0; i < n; i++)
			a[i] = attr_to(addr_of(c.ipv6, 2, i % ndest + 1), set * per + i / ndest);
		return a;
	};
	std::vector<ah_handle> hs(n);
	std::vector<int> errs(n);
	const double hz = double(rte_get_tsc_hz());
	struct figure {
		const char *name;
		double per_s;
		unsigned ok;
	};
	std::vector<figure> out;

	/* 1. One by one: one control-thread round trip per AH. */
	std::vector<ibv_ah_attr> a1 = make(0);
	uint64_t t0 = rte_get_tsc_cycles();
	unsigned ok = 0;
	for (uint32_t i = 0; i < n; i++) {
		hs[i] = h.svc.create_ah(a1[i], &errs[i]);
		ok += errs[i] == 0;
	}
	uint64_t t1 = rte_get_tsc_cycles();
	out.push_back({"create one-by-one", double(ok) / (double(t1 - t0) / hz), ok});
	release_all(h, hs, errs);

	/* 2. Batched: create_ah_batch in --batch chunks. */
	std::vector<ibv_ah_attr> a2 = make(1);
	auto batched = [&](const std::vector<ibv_ah_attr> &a) {
		unsigned k = 0;
		for (uint32_t off = 0; off < n; off += c.batch) {
			const uint32_t m = std::min(c.batch, n - off);
			k += h.svc.create_ah_batch(a.data() + off, m, hs.data() + off, errs.data() + off);
		}
		return k;
	};
	t0 = rte_get_tsc_cycles();
	ok = batched(a2);
	t1 = rte_get_tsc_cycles();
	out.push_back({"create batched", double(ok) / (double(t1 - t0) / hz), ok});
	release_all(h, hs, errs);

	/* 3. Batched again on the same keys: registry hits (reuse). */
	t0 = rte_get_tsc_cycles();
	ok = batched(a2);
	t1 = rte_get_tsc_cycles();
	out.push_back({"reacquire batched (hits)", double(ok) / (double(t1 - t0) / hz), ok});

	/* 4. dest_cache bulk lookups of set 2, as a poll thread does them:
	 * this thread goes online on the QSBR variable meanwhile. */
	std::vector<ah_key> keys(n);
	for (uint32_t i = 0; i < n; i++)
		keys[i] = ah_key::of(a2[i]);
	const unsigned tid = rte_lcore_id();
	poll_thread_online(h.rt.qsbr(), tid);
	uint64_t lookups = 0, hits = 0;
	const uint64_t end = rte_get_tsc_cycles() + uint64_t(c.lookup_s * hz);
	t0 = rte_get_tsc_cycles();
	ah_handle res[dest_cache::max_bulk];
	do {
		for (uint32_t off = 0; off < n; off += dest_cache::max_bulk) {
			const unsigned m = std::min<uint32_t>(dest_cache::max_bulk, n - off);
			uint64_t hit;
			hits += h.svc.cache().lookup_bulk(keys.data() + off, m, res, &hit);
			lookups += m;
		}
		rte_rcu_qsbr_quiescent(h.rt.qsbr(), tid);
	} while (rte_get_tsc_cycles() < end);
	t1 = rte_get_tsc_cycles();
	poll_thread_offline(h.rt.qsbr(), tid);
	out.push_back({"dest_cache lookup_bulk", double(lookups) / (double(t1 - t0) / hz), unsigned(lookups)});
	release_all(h, hs, errs, 1);
	const reg_summary s = summary(h);
	if (c.json) {
		printf("{\"mode\":\"bench\",\"count\":%u,\"batch\":%u,\"destinations\":%u,\"lookup_hits\":%lu,"
		       "\"lookups\":%lu,\"results\":[",
		       n, c.batch, ndest, (unsigned long)hits, (unsigned long)lookups);
		for (size_t i = 0; i < out.size(); i++)
			printf("%s{\"test\":\"%s\",\"per_second\":%.0f,\"ok\":%u}", i ? "," : "", out[i].name,
			       out[i].per_s, out[i].ok);
		printf("],\"registry\":%s}\n", summary_json(s).c_str());
	} else {
		printf(" bench: %u AHs per phase to %u destinations, batches of %u\n", n, ndest, c.batch);
		for (const figure &f : out)
			printf("  %-28s %12.0f /s  (%u)\n", f.name, f.per_s, f.ok);
		printf("  lookups hit: %lu of %lu\n", (unsigned long)hits, (unsigned long)lookups);
		printf(" registry: %lu live of %lu, %lu bytes (allocated for its capacity: %.1f bytes per AH)\n",
		       (unsigned long)s.live, (unsigned long)s.capacity, (unsigned long)s.memory,
		       s.capacity ? double(s.memory) / double(s.capacity) : 0.0);
	}
	return hits == lookups ? 0 : 1;
}

/* ---- storm -------------------------------------------------------------- */

int run_storm(host &h, uint32_t n, const std::vector<wire::gid> &dests)
{
	const ah_app_config &c = *h.c;
	const uint32_t nd = uint32_t(dests.size());
	std::vector<ibv_ah_attr> attrs(n);
	std::vector<ah_key> keys(n);
	for (uint32_t i = 0; i < n; i++) {
		attrs[i] = attr_to(dests[i % nd], i / nd);
		keys[i] = ah_key::of(attrs[i]);
	}
	std::vector<uint64_t> ready(n, 0);
	std::vector<uint32_t> idx(n);
	for (uint32_t i = 0; i < n; i++)
		idx[i] = i;
	std::vector<ah_handle> hs(n);
	std::vector<int> errs(n, 0);
	h.watch_keys = keys.data();
	h.ready_tsc = ready.data();
	h.watch_idx = idx.data();
	h.watch_n = n;
	h.watch_done.store(false, std::memory_order_relaxed);

	const uint64_t t0 = rte_get_tsc_cycles();
	h.watching.store(true, std::memory_order_release);
	unsigned ok = 0;
	for (uint32_t off = 0; off < n; off += c.batch) {
		const uint32_t m = std::min(c.batch, n - off);
		ok += h.svc.create_ah_batch(attrs.data() + off, m, hs.data() + off, errs.data() + off);
	}
	const uint64_t t_created = rte_get_tsc_cycles();
	/* Failed ones never become ready: wait for the others. */
	const uint64_t give_up = t_created + uint64_t(c.timeout_s * double(rte_get_tsc_hz()));
	bool all = ok == n;
	if (all) {
		while (!h.watch_done.load(std::memory_order_acquire) && rte_get_tsc_cycles() < give_up)
			rte_delay_us_sleep(200);
		all = h.watch_done.load(std::memory_order_acquire);
	} else {
		rte_delay_us_sleep(10000);
	}
	h.watching.store(false, std::memory_order_seq_cst);
	/* The arrays stay valid until the worker has begun an iteration after
	 * the store above (two increments: the current one may predate it). */
	const uint64_t l0 = h.loops.load(std::memory_order_seq_cst);
	while (h.loops.load(std::memory_order_seq_cst) < l0 + 2)
		rte_delay_us_sleep(50);
	const reg_summary s = summary(h);

	std::vector<double> lat;
	lat.reserve(n);
	uint64_t last = 0;
	for (uint32_t i = 0; i < n; i++)
		if (errs[i] == 0 && ready[i] != 0) {
			lat.push_back(tsc_us(ready[i] - t0));
			last = std::max(last, ready[i]);
		}
	std::sort(lat.begin(), lat.end());
	auto q = [&](double p) {
		return lat.empty() ? 0.0 : lat[std::min(lat.size() - 1, size_t(p * double(lat.size())))];
	};
	std::vector<unsigned> by_errno(256, 0);
	for (uint32_t i = 0; i < n; i++)
		if (errs[i] != 0)
			by_errno[std::min(errs[i], 255)]++;
	const double created_s = tsc_us(t_created - t0) / 1e6;
	const double all_ready_ms = last ? tsc_us(last - t0) / 1e3 : 0;
	const uint64_t grown = s.memory;
	if (c.json) {
		printf("{\"mode\":\"storm\",\"requested\":%u,\"created\":%u,\"destinations\":%u,\"batch\":%u,"
		       "\"resolved\":%s,\"all_ready\":%s,\"ready\":%zu,\"create_seconds\":%.6f,\"creates_per_second\":"
		       "%.0f,\"all_ready_ms\":%.3f,\"ready_p50_ms\":%.3f,\"ready_p99_ms\":%.3f,\"watch_scans\":%lu,"
		       "\"registry_memory_bytes\":%lu,\"bytes_per_ah_full\":%.1f,\"failed\":{",
		       n, ok, nd, c.batch, c.storm_resolve ? "true" : "false", all ? "true" : "false", lat.size(),
		       created_s, created_s > 0 ? ok / created_s : 0.0, all_ready_ms, q(0.5) / 1e3, q(0.99) / 1e3,
		       (unsigned long)h.scans, (unsigned long)grown, s.capacity ? double(grown) / double(s.capacity) : 0.0);
		bool first = true;
		for (int e = 1; e < 256; e++)
			if (by_errno[e]) {
				printf("%s\"%s\":%u", first ? "" : ",", strerrorname_np(e) ? strerrorname_np(e) : "?",
				       by_errno[e]);
				first = false;
			}
		printf("},\"registry\":%s}\n", summary_json(s).c_str());
	} else {
		printf(" storm: %u AHs to %u destinations (%s), batches of %u\n", n, nd,
		       c.storm_resolve ? "resolved by ARP/ND" : "static neighbours", c.batch);
		printf("  created %u in %.3f s (%.0f /s)\n", ok, created_s, created_s > 0 ? ok / created_s : 0.0);
		printf("  ready in the destination cache: %zu of %u; all ready after %.3f ms\n", lat.size(), n,
		       all_ready_ms);
		printf("  per-AH readiness since the storm began: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
		       q(0.5) / 1e3, q(0.99) / 1e3, lat.empty() ? 0.0 : lat.back() / 1e3);
		printf("  registry: %lu live of %lu, %lu bytes allocated for its capacity (%.1f bytes per AH "
		       "when full)\n",
		       (unsigned long)s.live, (unsigned long)s.capacity, (unsigned long)grown,
		       s.capacity ? double(grown) / double(s.capacity) : 0.0);
		for (int e = 1; e < 256; e++)
			if (by_errno[e])
				printf("  failed: %u with %s\n", by_errno[e], strerror(e));
	}
	release_all(h, hs, errs);
	return all ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
	split_args sa = split_command_line(argc, argv);
	ah_app_config c;

	cli::parser app{"rdgram-ah",
			"rdgram-ah: inspect the AH registry, measure AH creation and lookup, and run an AH storm, "
			"on the soft RoCEv2 driver (an in-process net_ring pair: this host and a peer that "
			"answers ARP/ND).\nUsage: rdgram-ah [EAL args --] inspect|bench|storm N [options]",
			34};
	app.require_subcommand(1);
	std::string cfg_path;
	app.add("-c,--config", cfg_path, "TOML config file (see config/rdgram-ah.toml); options override it");
	app.flag("--json", c.json, "print one JSON object instead of tables [off]");
	app.flag("--ipv6", c.ipv6, "use IPv6 addresses (fd00::/16) instead of IPv4 (10/8) [off]");
	app.add("--capacity", c.capacity, "AH registry capacity [65536]").range(1u, 1u << 24);
	app.add("--max-ah", c.max_ah, "the soft device's AH table size (max_ah) [1048576]").range(1u, 1u << 24);
	app.add("--neigh-ttl-ms", c.neigh_ttl_ms, "lifetime of a resolved neighbour before re-resolution [30000]")
		.range(1u, 86400000u);
	app.add("--hold", c.hold_s, "seconds to keep running after the report, e.g. to read /rdgram/ telemetry; "
		"SIGINT/SIGTERM end it sooner [0]")
		.range(0.0, 86400.0);

	cli::command ins = app.subcommand("inspect", "create a set of AHs and print the registry table");
	ins.add("--dests", c.dests, "destinations with a static neighbour entry [4]").range(0u, 65536u);
	ins.add("--resolved", c.resolved, "destinations resolved by ARP/ND (the peer answers) [2]").range(0u, 1024u);
	ins.add("--flows", c.flows, "AHs per destination, each with its own flow label [1]").range(1u, 1u << 20);
	ins.add("--release", c.release, "of the AHs created, destroy this many again (cached, refcount 0) [1]")
		.range(0u, 1u << 24);

	cli::command ben = app.subcommand("bench", "AH create rates (one by one, batched, reuse) and lookup rate");
	ben.add("--count", c.count, "AHs per phase (three disjoint sets: needs capacity >= 3 x count) [10000]")
		.range(1u, 1u << 22);
	ben.add("--batch", c.batch, "AHs per create_ah_batch call [4096]").range(1u, 1u << 24);
	ben.add("--dests", c.storm_dests, "distinct destination addresses (the rest differ by flow label) [1024]")
		.range(1u, 1u << 24);
	ben.add("--lookup-seconds", c.lookup_s, "how long to run dest_cache bulk lookups [0.5]").range(0.01, 600.0);

	uint32_t storm_n = 0;
	cli::command sto = app.subcommand("storm", "create N AHs at once; time to all-ready, readiness p50/p99, memory");
	sto.add("N", storm_n, "AHs to create (no default: required)").required().range(1u, 1u << 24);
	sto.add("--batch", c.batch, "AHs per create_ah_batch call [4096]").range(1u, 1u << 24);
	sto.add("--dests", c.storm_dests, "distinct destination addresses (the rest differ by flow label) [1024]")
		.range(1u, 1u << 24);
	sto.flag("--resolve", c.storm_resolve,
		 "resolve the destinations by ARP/ND through the peer (at most 1024) instead of static "
		 "neighbours [off]");
	sto.add("--timeout", c.timeout_s, "seconds to wait for readiness (and for neighbours) [30]").range(0.1, 3600.0);

	/* Global options may also follow the subcommand. */
	for (cli::command *sub : {&ins, &ben, &sto})
		sub->fallthrough();

	/* A config file is applied first, so options (which CLI11 writes into c
	 * while parsing) must win: parse twice, the second time over the
	 * file's values. */
	if (int rc = app.parse(sa.app); rc >= 0)
		return rc;
	if (!cfg_path.empty()) {
		try {
			load_ah_config(cfg_path, c);
		} catch (const config_error &e) {
			fprintf(stderr, "rdgram-ah: %s\n", e.what());
			return 2;
		}
		if (int rc = app.parse(sa.app); rc >= 0)
			return rc;
	}
	if (ins.parsed() && c.dests + c.resolved == 0) {
		fprintf(stderr, "rdgram-ah: nothing to create\n");
		return 2;
	}
	if (sto.parsed() && c.storm_resolve && c.storm_dests > 1024) {
		fprintf(stderr, "rdgram-ah: storm --resolve takes at most 1024 destinations (--dests)\n");
		return 2;
	}
	if (sto.parsed() && uint64_t(storm_n) > c.capacity) {
		fprintf(stderr, "rdgram-ah: storm of %u AHs above the registry capacity %u (--capacity)\n", storm_n,
			c.capacity);
		return 2;
	}

	/* Destinations: static ones on 10.2/16 (fd02::), resolved ones on
	 * 10.3/16 (fd03::), which the peer owns and answers ARP/ND for. */
	std::vector<wire::gid> statics, peer_addrs{addr_of(c.ipv6, 1, 2)}, storm_dests;
	if (ins.parsed()) {
		for (uint32_t d = 0; d < c.dests; d++)
			statics.push_back(addr_of(c.ipv6, 2, d + 1));
		for (uint32_t d = 0; d < c.resolved; d++)
			peer_addrs.push_back(addr_of(c.ipv6, 3, d + 1));
	} else {
		const uint32_t nd = sto.parsed() ? std::min(c.storm_dests, storm_n) : std::min(c.storm_dests, c.count);
		for (uint32_t d = 0; d < nd; d++) {
			const wire::gid g = addr_of(c.ipv6, sto.parsed() && c.storm_resolve ? 3 : 2, d + 1);
			storm_dests.push_back(g);
			if (sto.parsed() && c.storm_resolve)
				peer_addrs.push_back(g);
			else
				statics.push_back(g);
		}
	}

	runtime rt;
	int init_rc;
	{
		telemetry::private_umask um; /* runtime dir and socket owner-only */
		init_rc = rt.init(sa.eal_given ? sa.eal : c.eal_args, argv[0]);
	}
	if (init_rc != 0) {
		fprintf(stderr, "rdgram-ah: %s\n", rt.error().c_str());
		return 1;
	}
	telemetry::register_log_types();
	int status = 0;
	{
		std::string err;
		if (int rc = telemetry::secure_socket(&err); rc != 0 && rc != ENOENT) {
			fprintf(stderr, "rdgram-ah: %s\n", err.c_str());
			status = 1;
		}
	}
	{
	host h(rt, c);
	if (status == 0)
		status = bring_up(h, statics, peer_addrs);
	if (status == 0) {
		if (ins.parsed())
			status = run_inspect(h);
		else if (ben.parsed())
			status = run_bench(h);
		else
			status = run_storm(h, storm_n, storm_dests);
		fflush(stdout);
		if (c.hold_s > 0) { /* SIGINT or SIGTERM ends the hold early */
			std::signal(SIGINT, on_hold_signal);
			std::signal(SIGTERM, on_hold_signal);
			const uint64_t end = rte_get_timer_cycles() + uint64_t(c.hold_s * double(rte_get_timer_hz()));
			while (!g_hold_stop.load() && rte_get_timer_cycles() < end)
				rte_delay_us_sleep(10000);
		}
	}
	tear_down(h);
	}
	rt.fini();
	return status;
}
