/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-ah's reports on stdout: a table per mode, or one JSON object with
 * --json.
 */
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ring.h>

#include "ah_report.h"
#include "latency_hist.h"
#include "soft_port.h"
#include "rdgram/config.h"

namespace rdgram::ahtool {

namespace {

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

} // namespace

std::vector<worker_frames> worker_accounting(const host &h)
{
	std::vector<worker_frames> out;
	auto in_of = [](const soft::soft_counters &k) { return k.rx_pkts + k.rx_to_control + k.rx_drops(); };
	auto out_of = [](const soft::soft_counters &k) { return k.tx_pkts + k.tx_control; };
	rte_eth_stats st{};
	if (h.on_port && soft::port_stats(h.port.port_id(), &st) != 0)
		fprintf(stderr, "rdgram-ah: the port's statistics cannot be read: the accounting below is open\n");
	for (const auto &w : h.workers) {
		worker_frames f{};
		f.index = w->index;
		f.lcore = w->where.lcore;
		f.on_port = h.on_port;
		f.client_drops = w->cl.counters().drops();
		f.client_waiting = w->cl.waiting_messages();
		f.local_sent = out_of(w->ql.counters());
		f.local_in = in_of(w->ql.counters());
		if (h.on_port) {
			/* One queue: the port's totals (a PMD need not fill the
			 * per-queue figures); several: queue i's. */
			const bool one = h.workers.size() == 1;
			const unsigned q = w->index;
			const bool have_q = q < RTE_ETHDEV_QUEUE_STAT_CNTRS;
			f.peer_in = one ? st.opackets : have_q ? st.q_opackets[q] : 0;
			f.peer_sent = one ? st.ipackets : have_q ? st.q_ipackets[q] : 0;
			f.left_lp = w->ql.counters().tx_control_dropped;
			f.closed = f.local_sent == f.peer_in && f.peer_sent == f.local_in;
		} else {
			f.peer_in = in_of(w->qp.counters());
			f.left_lp = w->ring_lp ? rte_ring_count(w->ring_lp) : 0;
			f.peer_sent = out_of(w->qp.counters());
			f.left_pl = w->ring_pl ? rte_ring_count(w->ring_pl) : 0;
			f.closed = f.local_sent == f.peer_in + f.left_lp && f.peer_sent == f.local_in + f.left_pl;
		}
		out.push_back(f);
	}
	return out;
}

namespace {

std::string frames_json(const std::vector<worker_frames> &wf)
{
	std::string js = "\"workers\":[";
	char b[512];
	for (size_t i = 0; i < wf.size(); i++) {
		const worker_frames &f = wf[i];
		if (f.on_port)
			snprintf(b, sizeof(b),
				 "%s{\"worker\":%u,\"lcore\":%u,\"sent\":%lu,\"port_took\":%lu,"
				 "\"tx_control_dropped\":%lu,\"port_gave\":%lu,\"received\":%lu,\"client_dropped\":%lu,"
				 "\"client_waiting\":%lu,\"accounting\":\"%s\"}",
				 i ? "," : "", f.index, f.lcore, (unsigned long)f.local_sent, (unsigned long)f.peer_in,
				 (unsigned long)f.left_lp, (unsigned long)f.peer_sent, (unsigned long)f.local_in,
				 (unsigned long)f.client_drops, (unsigned long)f.client_waiting,
				 f.closed ? "closed" : "open");
		else
			snprintf(b, sizeof(b),
				 "%s{\"worker\":%u,\"lcore\":%u,\"local_sent\":%lu,\"peer_received\":%lu,"
				 "\"left_to_peer\":%lu,\"peer_sent\":%lu,\"local_received\":%lu,\"left_to_local\":%lu,"
				 "\"client_dropped\":%lu,\"client_waiting\":%lu,\"accounting\":\"%s\"}",
				 i ? "," : "", f.index, f.lcore, (unsigned long)f.local_sent, (unsigned long)f.peer_in,
				 (unsigned long)f.left_lp, (unsigned long)f.peer_sent, (unsigned long)f.local_in,
				 (unsigned long)f.left_pl, (unsigned long)f.client_drops,
				 (unsigned long)f.client_waiting, f.closed ? "closed" : "open");
		js += b;
	}
	return js + "]";
}

void print_frames(const std::vector<worker_frames> &wf)
{
	for (const worker_frames &f : wf) {
		if (f.on_port)
			printf(" worker %u (lcore %u): frames sent %lu = %lu the port took (+ %lu control frames it "
			       "refused, freed); the port gave %lu = %lu received: %s\n",
			       f.index, f.lcore, (unsigned long)f.local_sent, (unsigned long)f.peer_in,
			       (unsigned long)f.left_lp, (unsigned long)f.peer_sent, (unsigned long)f.local_in,
			       f.closed ? "closed" : "OPEN");
		else
			printf(" worker %u (lcore %u): frames local -> peer %lu = %lu received + %lu left; peer -> "
			       "local %lu = %lu received + %lu left: %s\n",
			       f.index, f.lcore, (unsigned long)f.local_sent, (unsigned long)f.peer_in,
			       (unsigned long)f.left_lp, (unsigned long)f.peer_sent, (unsigned long)f.local_in,
			       (unsigned long)f.left_pl, f.closed ? "closed" : "OPEN");
		if (f.client_drops != 0 || f.client_waiting != 0)
			printf(" worker %u: AH client dropped %lu messages, %lu still waiting\n", f.index,
			       (unsigned long)f.client_drops, (unsigned long)f.client_waiting);
	}
}

} // namespace

void print_inspect(const ah_app_config &c, const inspect_result &res, const std::vector<worker_frames> &wf)
{
	const reg_summary &s = res.reg;
	auto neigh_str = [&](const inspect_row &r) -> std::string {
		if (!r.have_neigh)
			return "-";
		return soft::neigh_state_name(r.n.state);
	};
	auto ttl_str = [&](const inspect_row &r) -> std::string {
		if (!r.have_neigh || r.n.state == soft::neigh_state::static_)
			return "-";
		return std::to_string(c.port.neigh_ttl_ms);
	};
	/* What is left of it: reachable entries only (stale ones are being
	 * re-resolved, static ones never expire). */
	auto left_str = [&](const inspect_row &r) -> std::string {
		if (!r.have_neigh || r.n.state != soft::neigh_state::reachable)
			return "-";
		return std::to_string(r.n.ttl_left_ms);
	};
	if (c.json) {
		printf("{\"mode\":\"inspect\",\"created\":%u,\"requested\":%u,\"released\":%u,\"registry\":%s,"
		       "\"entries\":[",
		       res.created, res.requested, res.released, summary_json(s).c_str());
		for (size_t i = 0; i < res.rows.size(); i++) {
			const inspect_row &r = res.rows[i];
			const std::string av = hex(r.av.data(), r.av.size());
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
			       left_str(r) == "-" ? "null" : left_str(r).c_str(), av.size() / 2, av.c_str());
		}
		printf("]");
		if (res.pinged != 0)
			printf(",\"datagrams\":{\"to_qpn\":%u,\"asked\":%u,\"given\":%u,\"replies\":%lu}",
			       c.ping_qpn, res.pinged, res.ping_given, (unsigned long)res.replies);
		printf(",%s}\n", frames_json(wf).c_str());
	} else {
		printf(" registry: %lu live of %lu (%lu held, %lu cached), %lu bytes, created %lu, reused %lu, "
		       "evicted %lu, failed %lu\n",
		       (unsigned long)s.live, (unsigned long)s.capacity, (unsigned long)(s.live - s.unref),
		       (unsigned long)s.unref, (unsigned long)s.memory, (unsigned long)s.created,
		       (unsigned long)s.reused, (unsigned long)s.evicted, (unsigned long)s.failed);
		printf(" %5s %4s %5s  %-22s %6s %4s %-6s %4s  %-10s %8s %8s  %s\n", "slot", "gen", "ahn", "destination",
		       "flow", "hop", "state", "refs", "neighbour", "ttl_cfg", "ttl_left", "AV (wire header template)");
		for (const inspect_row &r : res.rows) {
			wire::gid g;
			memcpy(g.raw, r.key.dgid, 16);
			printf(" %5u %4u %5u  %-22s %6u %4u %-6s %4u  %-10s %8s %8s  %s\n", r.h.slot, r.h.gen, r.h.slot,
			       format_gid(g).c_str(), r.key.flow_label, r.key.hop_limit, r.refs ? "held" : "cached",
			       r.refs, neigh_str(r).c_str(), ttl_str(r).c_str(), left_str(r).c_str(),
			       hex(r.av.data(), r.av.size()).c_str());
		}
		if (res.pinged != 0)
			printf(" datagrams: %u to the peer's QP 0x%x (one per AH), %u handed to the AH client, %lu "
			       "replies received\n",
			       res.pinged, c.ping_qpn, res.ping_given, (unsigned long)res.replies);
		print_frames(wf);
	}
}

void print_bench(const ah_app_config &c, const bench_result &res, const std::vector<worker_frames> &wf)
{
	const reg_summary &s = res.reg;
	if (c.json) {
		printf("{\"mode\":\"bench\",\"count\":%u,\"batch\":%u,\"destinations\":%u,\"lookup_hits\":%lu,"
		       "\"lookups\":%lu,\"results\":[",
		       res.count, c.batch, res.dests, (unsigned long)res.hits, (unsigned long)res.lookups);
		for (size_t i = 0; i < res.figures.size(); i++)
			printf("%s{\"test\":\"%s\",\"per_second\":%.0f,\"ok\":%u}", i ? "," : "", res.figures[i].name,
			       res.figures[i].per_s, res.figures[i].ok);
		printf("],\"lookup_workers\":[");
		for (size_t i = 0; i < res.per_worker.size(); i++) {
			const bench_worker &w = res.per_worker[i];
			printf("%s{\"worker\":%u,\"lcore\":%u,\"lookups\":%lu,\"hits\":%lu,\"per_second\":%.0f}",
			       i ? "," : "", w.index, w.lcore, (unsigned long)w.lookups, (unsigned long)w.hits, w.per_s);
		}
		printf("],%s,\"registry\":%s}\n", frames_json(wf).c_str(), summary_json(s).c_str());
	} else {
		printf(" bench: %u AHs per phase to %u destinations, batches of %u\n", res.count, res.dests, c.batch);
		for (const bench_figure &f : res.figures)
			printf("  %-28s %12.0f /s  (%u)\n", f.name, f.per_s, f.ok);
		printf("  lookups hit: %lu of %lu\n", (unsigned long)res.hits, (unsigned long)res.lookups);
		if (res.per_worker.size() > 1)
			for (const bench_worker &w : res.per_worker)
				printf("  worker %u (lcore %u): %lu lookups, %lu hits, %.0f /s\n", w.index, w.lcore,
				       (unsigned long)w.lookups, (unsigned long)w.hits, w.per_s);
		print_frames(wf);
		printf(" registry: %lu live of %lu, %lu bytes (allocated for its capacity: %.1f bytes per AH)\n",
		       (unsigned long)s.live, (unsigned long)s.capacity, (unsigned long)s.memory,
		       s.capacity ? double(s.memory) / double(s.capacity) : 0.0);
	}
}

void print_storm(const ah_app_config &c, const storm_result &res, const std::vector<worker_frames> &wf)
{
	const reg_summary &s = res.reg;
	const std::vector<double> &lat = res.ready_us;
	auto q = [&](double p) { return apps::percentile(lat, p); };
	const uint32_t n = res.requested, nd = res.dests;
	const unsigned ok = res.created;
	const double created_s = res.created_s;
	const uint64_t grown = s.memory;
	if (c.json) {
		printf("{\"mode\":\"storm\",\"requested\":%u,\"created\":%u,\"destinations\":%u,\"batch\":%u,"
		       "\"resolved\":%s,\"all_ready\":%s,\"ready\":%zu,\"create_seconds\":%.6f,\"creates_per_second\":"
		       "%.0f,\"all_ready_ms\":%.3f,\"ready_p50_ms\":%.3f,\"ready_p99_ms\":%.3f,\"watch_scans\":%lu,"
		       "\"registry_memory_bytes\":%lu,\"bytes_per_ah_full\":%.1f,\"failed\":{",
		       n, ok, nd, c.batch, c.storm_resolve || !c.port.devargs.empty() ? "true" : "false",
		       res.all_ready ? "true" : "false",
		       lat.size(), created_s, created_s > 0 ? ok / created_s : 0.0, res.all_ready_ms, q(0.5) / 1e3,
		       q(0.99) / 1e3, (unsigned long)res.scans, (unsigned long)grown,
		       s.capacity ? double(grown) / double(s.capacity) : 0.0);
		bool first = true;
		for (int e = 1; e < 256; e++)
			if (res.by_errno[e]) {
				printf("%s\"%s\":%u", first ? "" : ",", strerrorname_np(e) ? strerrorname_np(e) : "?",
				       res.by_errno[e]);
				first = false;
			}
		printf("},\"watch_workers\":[");
		for (size_t i = 0; i < res.per_worker.size(); i++) {
			const storm_worker &w = res.per_worker[i];
			printf("%s{\"worker\":%u,\"lcore\":%u,\"watched\":%u,\"seen_ready\":%u,\"pending\":%u,"
			       "\"scans\":%lu}",
			       i ? "," : "", w.index, w.lcore, w.watched, w.seen, w.pending, (unsigned long)w.scans);
		}
		printf("],%s,\"registry\":%s}\n", frames_json(wf).c_str(), summary_json(s).c_str());
	} else {
		printf(" storm: %u AHs to %u destinations (%s), batches of %u\n", n, nd,
		       !c.port.devargs.empty() ? "on the port: ARP/ND, or the table's static neighbours"
		       : c.storm_resolve       ? "resolved by ARP/ND"
					       : "static neighbours",
		       c.batch);
		printf("  created %u in %.3f s (%.0f /s)\n", ok, created_s, created_s > 0 ? ok / created_s : 0.0);
		printf("  ready in the destination cache: %zu of %u; all ready after %.3f ms\n", lat.size(), n,
		       res.all_ready_ms);
		printf("  per-AH readiness since the storm began: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
		       q(0.5) / 1e3, q(0.99) / 1e3, lat.empty() ? 0.0 : lat.back() / 1e3);
		printf("  registry: %lu live of %lu, %lu bytes allocated for its capacity (%.1f bytes per AH "
		       "when full)\n",
		       (unsigned long)s.live, (unsigned long)s.capacity, (unsigned long)grown,
		       s.capacity ? double(grown) / double(s.capacity) : 0.0);
		for (int e = 1; e < 256; e++)
			if (res.by_errno[e])
				printf("  failed: %u with %s\n", res.by_errno[e], strerror(e));
		/* Each poll thread watched its share of the keys: what it
		 * saw ready plus what it still waited for is its share. */
		if (res.per_worker.size() > 1)
			for (const storm_worker &w : res.per_worker)
				printf("  worker %u (lcore %u): watched %u, saw ready %u, still pending %u, %lu scans: %s\n",
				       w.index, w.lcore, w.watched, w.seen, w.pending, (unsigned long)w.scans,
				       w.seen + w.pending == w.watched ? "closed" : "OPEN");
		print_frames(wf);
	}
}

} // namespace rdgram::ahtool
