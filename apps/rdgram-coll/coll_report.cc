/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll's reports (main thread): the AH storm's table, then each
 * collective's latency, the counters and the accounting that must close in
 * every process, on stdout and, with --json, as one JSON object.
 */
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rte_cycles.h>
#include <rte_lcore.h>

#include "coll_job.h"
#include "latency_hist.h"
#include "rdgram/config.h"

namespace rdgram::coll {

namespace {

/* Sorts v; its nearest-rank p-quantile, as every app's (0 when empty). */
double pct(std::vector<double> &v, double p)
{
	std::sort(v.begin(), v.end());
	return apps::percentile(v, p);
}

} // namespace

template <class Dev> void print_storm(const coll_config &c, job<Dev> &j, const job_ctl &k)
{
	const bool procs = k.procs;
	const uint32_t nranks = k.nranks;
	job_bootstrap *boot = k.boot.get();
	const double exchange_ms = k.exchange_ms;
	const uint64_t t_start = k.t_start;
	std::vector<double> st;
	printf("rdgram-coll: %u ranks, mode %s (%s), exchange %.3f ms%s%s\n", nranks, c.mode.c_str(),
	       procs ? boot->launcher().c_str() : "in-memory", exchange_ms, procs ? ", bootstrap " : "",
	       procs ? boot->name().c_str() : "");
	printf("  driver %s, %zu poll thread(s)\n", j.ranks[0]->dev.driver_name(), j.workers.size());
	if (procs) {
		/* Where the lcores' threads run, as each read it of itself:
		 * beside the placement line printed before the EAL. */
		std::string on;
		const unsigned main_l = rte_get_main_lcore();
		bool main_polls = false;
		for (auto &w : j.workers)
			main_polls |= w->where.lcore == main_l;
		if (!main_polls) {
			on = std::to_string(main_l);
			on.append(" CPU ").append(k.main_cpus).append(" (main)");
		}
		for (auto &w : j.workers) {
			if (!on.empty())
				on.append(", ");
			on.append(std::to_string(w->where.lcore)).append(" CPU ").append(w->cpus).append(" (poll)");
		}
		printf("rdgram-coll: rank %u: lcores ran on: %s\n", k.my_rank, on.c_str());
	}
	if (!apps::is_soft<Dev>)
		for (auto &lr : j.ranks)
			printf("  address of rank %u: QPN 0x%06x, GID %s (index %u) on %s\n", lr->rank, lr->qpn,
			       format_gid(lr->gid).c_str(), unsigned(lr->sgid_index),
			       c.rdma.device.empty() ? "the first device" : c.rdma.device.c_str());
	printf("AH storm (create_ah_batch of %u AHs per rank):\n", nranks - 1);
	for (auto &lr : j.ranks) {
		printf("  rank %3u  %8.3f ms  %u/%u created%s%s\n", lr->rank, lr->storm_ms, lr->storm_ok,
		       nranks - 1, lr->storm_err ? ", error: " : "",
		       lr->storm_err ? strerror(lr->storm_err) : "");
		st.push_back(lr->storm_ms);
	}
	const double mn = *std::min_element(st.begin(), st.end());
	const double mx = *std::max_element(st.begin(), st.end());
	printf("  storm ms: min %.3f  median %.3f  max %.3f\n", mn, pct(st, 0.5), mx);
	if (procs)
		printf("  start barrier (%s) to AHs to all peers: %.3f ms\n",
		       boot->name() == "PMIx" ? "PMIx fence" : "rendezvous", ahs_ms(*j.ranks[0], t_start));
	fflush(stdout);
}

template <class Dev> int report_job(const coll_config &c, job<Dev> &j, const job_ctl &k, const close_stats<Dev> &cs)
{
	const bool procs = k.procs;
	const uint32_t nranks = k.nranks, my_rank = k.my_rank;
	job_bootstrap *boot = k.boot.get();
	const double exchange_ms = k.exchange_ms;
	const uint64_t t_start = k.t_start;
	const double hz = double(rte_get_tsc_hz());
	std::vector<double> storm_all = k.storm_all, ahs_all = k.ahs_all; /* pct() sorts them */
	const auto &qctr = cs.qctr;
	const std::vector<rte_eth_stats> &pstats = cs.pstats;
	const unsigned arp_matched = cs.arp_matched, in_use = cs.in_use, pmd_held = cs.pmd_held, leaked = cs.leaked;
	int status = 0;
uint64_t held_total = 0, held_overflow = 0;
poll_idle_stats is{};
for (auto &w : j.workers) {
	held_total += w->held_total;
	held_overflow += w->held_overflow;
	const poll_idle_stats &x = w->idle.stats();
	is.empty += x.empty;
	is.yields += x.yields;
	is.sleeps += x.sleeps;
	is.slept_ns += x.slept_ns;
}
rank_stats tot{};
bool all_fin = true;
for (auto &lr : j.ranks) {
	const rank_stats &s = lr->eng.stats();
	tot.data_sent += s.data_sent;
	tot.acks_sent += s.acks_sent;
	tot.retransmits += s.retransmits;
	tot.tx_refused += s.tx_refused;
	tot.data_recv += s.data_recv;
	tot.acks_recv += s.acks_recv;
	tot.duplicates += s.duplicates;
	tot.stale_acks += s.stale_acks;
	tot.dropped += s.dropped;
	tot.bad_msgs += s.bad_msgs;
	tot.verified += s.verified;
	tot.verify_fail += s.verify_fail;
	if (!lr->eng.finished()) {
		all_fin = false;
		fprintf(stderr, "rdgram-coll: rank %u stopped at collective %u of %u (%s)\n", lr->rank,
			lr->eng.cseq(), c.iters * nb_ops,
			op_name(lr->eng.op_of(std::min(lr->eng.cseq(), c.iters * nb_ops - 1))));
	}
}
/* The same results as JSON (--json). */
std::string js;
char b[512];
snprintf(b, sizeof(b),
	 "{\"ranks\":%u,\"local_ranks\":%zu,\"mode\":\"%s\",\"launcher\":\"%s\",\"bootstrap\":\"%s\","
	 "\"exchange_ms\":%.3f,"
	 "\"iters\":%u,\"size\":%u,\"rto_us\":%u,\"drop_rate\":%.4f,\"seed\":%lu,\"storm\":[",
	 nranks, j.ranks.size(), c.mode.c_str(), procs ? boot->launcher().c_str() : "in-memory",
	 procs ? boot->name().c_str() : "in-memory", exchange_ms,
	 c.iters, c.size, c.rto_us, c.drop_rate, (unsigned long)c.seed);
js += b;
for (size_t i = 0; i < j.ranks.size(); i++) {
	snprintf(b, sizeof(b), "%s{\"rank\":%u,\"ms\":%.3f,\"created\":%u,\"start_to_ahs_ms\":%.3f}",
		 i ? "," : "", j.ranks[i]->rank, j.ranks[i]->storm_ms, j.ranks[i]->storm_ok,
		 ahs_ms(*j.ranks[i], t_start));
	js += b;
}
/* Procs, rank 0: every rank's figures from the end barrier. */
js += "],\"job_storm\":[";
for (size_t r = 0; r < storm_all.size() && r < ahs_all.size(); r++) {
	snprintf(b, sizeof(b), "%s{\"rank\":%zu,\"ms\":%.3f,\"start_to_ahs_ms\":%.3f}", r ? "," : "", r,
		 storm_all[r], ahs_all[r]);
	js += b;
}
js += "],\"collectives\":{";
printf("collectives: %u iterations each, %u-byte blocks, rto %u us, drop rate %.3f (seed %lu)\n",
       c.iters, c.size, c.rto_us, c.drop_rate, (unsigned long)c.seed);
printf("  %-10s %10s %10s %10s %10s   (us per op per rank, %zu rank(s) here)\n", "op", "p50", "p99",
       "max", "verified", j.ranks.size());
for (unsigned o = 0; o < nb_ops && all_fin; o++) {
	std::vector<double> v;
	for (auto &lr : j.ranks)
		for (uint32_t i = 0; i < c.iters; i++)
			v.push_back(double(lr->eng.latency(o * c.iters + i)) * 1e6 / hz);
	const double p50 = pct(v, 0.5), p99 = pct(v, 0.99), mx = v.back();
	printf("  %-10s %10.1f %10.1f %10.1f %10zu\n", op_name(op_kind(o)), p50, p99, mx, v.size());
	snprintf(b, sizeof(b), "%s\"%s\":{\"p50_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,\"samples\":%zu}",
		 o ? "," : "", op_name(op_kind(o)), p50, p99, mx, v.size());
	js += b;
}
snprintf(b, sizeof(b),
	 "},\"verified\":%lu,\"verify_failed\":%lu,\"data_sent\":%lu,\"retransmits\":%lu,"
	 "\"dropped\":%lu,\"duplicates\":%lu,\"acks_sent\":%lu,\"acks_received\":%lu,"
	 "\"stale_acks\":%lu,\"tx_refused\":%lu,\"bad_messages\":%lu",
	 (unsigned long)tot.verified, (unsigned long)tot.verify_fail, (unsigned long)tot.data_sent,
	 (unsigned long)tot.retransmits, (unsigned long)tot.dropped, (unsigned long)tot.duplicates,
	 (unsigned long)tot.acks_sent, (unsigned long)tot.acks_recv, (unsigned long)tot.stale_acks,
	 (unsigned long)tot.tx_refused, (unsigned long)tot.bad_msgs);
js += b;
if (j.has_switch) {
	snprintf(b, sizeof(b), ",\"switch\":{\"forwarded\":%lu,\"unknown_destination\":%lu,\"output_full\":%lu,"
		 "\"in_flight_at_stop\":%lu}",
		 (unsigned long)j.sw.st.forwarded, (unsigned long)j.sw.st.unknown_dst,
		 (unsigned long)j.sw.st.full, (unsigned long)j.sw.st.in_flight_at_stop);
	js += b;
}
printf("  verified: %lu  failed: %lu\n", (unsigned long)tot.verified, (unsigned long)tot.verify_fail);
printf("  data sent: %lu  retransmits: %lu  dropped (--drop-rate): %lu  duplicates: %lu\n",
       (unsigned long)tot.data_sent, (unsigned long)tot.retransmits, (unsigned long)tot.dropped,
       (unsigned long)tot.duplicates);
printf("  acks sent: %lu  acks received: %lu  stale acks: %lu  tx refused: %lu  bad messages: %lu\n",
       (unsigned long)tot.acks_sent, (unsigned long)tot.acks_recv, (unsigned long)tot.stale_acks,
       (unsigned long)tot.tx_refused, (unsigned long)tot.bad_msgs);
if (procs && my_rank == 0 && storm_all.size() == nranks) {
	/* The storm times every rank brought to the final
	 * barrier. */
	printf("AH storm, all ranks (gathered at the end), ms:");
	for (uint32_t r = 0; r < nranks; r++)
		printf("%s %.3f", r % 8 ? "" : "\n ", storm_all[r]);
	const double mn = *std::min_element(storm_all.begin(), storm_all.end());
	const double mx = *std::max_element(storm_all.begin(), storm_all.end());
	printf("\n  storm ms: min %.3f  median %.3f  max %.3f\n", mn, pct(storm_all, 0.5), mx);
	/* The job's AH storm end to end: from the start
	 * barrier's return (PMIx: the fence) to this rank
	 * holding AHs to all peers; the job's figure is the
	 * last rank's. */
	printf("start barrier (%s) to AHs to all peers, all ranks, ms:",
	       boot->name() == "PMIx" ? "PMIx fence" : "rendezvous");
	for (uint32_t r = 0; r < nranks; r++)
		printf("%s %.3f", r % 8 ? "" : "\n ", ahs_all[r]);
	printf("\n  start to AHs ms: min %.3f  median %.3f  max %.3f\n",
	       *std::min_element(ahs_all.begin(), ahs_all.end()), pct(ahs_all, 0.5),
	       *std::max_element(ahs_all.begin(), ahs_all.end()));
}
if (j.has_switch)
	printf("  switch: forwarded %lu  unknown destination %lu  output full %lu  in flight at stop %lu\n",
	       (unsigned long)j.sw.st.forwarded, (unsigned long)j.sw.st.unknown_dst,
	       (unsigned long)j.sw.st.full, (unsigned long)j.sw.st.in_flight_at_stop);
/* The port's side of the same messages, and the
 * accounting that must close in every process: what the
 * app sent is what the port took plus what it refused or
 * dropped by name; what the port delivered is what the
 * app received plus its named drops; every mbuf back. */
queue_counters<Dev> q{};
uint64_t imissed = 0;
for (size_t i = 0; i < qctr.size(); i++) {
	q += qctr[i];
	imissed += pstats[i].imissed;
}
std::string reasons, jreasons;
q.for_each([&](const xstat_name &n, uint64_t v) {
	if (v == 0 || n.kind == counter_kind::traffic)
		return;
	const char *name = n.name;
	reasons += std::string(" ") + name + "=" + std::to_string(v);
	jreasons += std::string(jreasons.empty() ? "" : ",") + "\"" + name + "\":" + std::to_string(v);
});
const uint64_t app_tx = tot.data_sent + tot.acks_sent + tot.retransmits;
const uint64_t app_rx = tot.data_recv + tot.acks_recv + tot.dropped + tot.bad_msgs + held_overflow;
const bool tx_ok = app_tx == q.tx_pkts + tot.tx_refused + q.tx_drops();
const bool rx_ok = q.rx_pkts == app_rx;
const bool arp_ok = !procs || !apps::is_soft<Dev> || arp_matched == nranks - 1;
/* The same accounting for each poll thread alone: its ranks' messages
 * against its ranks' queues (a rank's queue is served by its worker
 * only), and what it held before the start. */
bool workers_ok = true;
std::string jworkers;
for (auto &w : j.workers) {
	rank_stats t{};
	queue_counters<Dev> wq{};
	std::string who;
	for (size_t i : w->ranks) {
		const rank_stats &s = j.ranks[i]->eng.stats();
		t.data_sent += s.data_sent;
		t.acks_sent += s.acks_sent;
		t.retransmits += s.retransmits;
		t.tx_refused += s.tx_refused;
		t.data_recv += s.data_recv;
		t.acks_recv += s.acks_recv;
		t.dropped += s.dropped;
		t.bad_msgs += s.bad_msgs;
		t.verified += s.verified;
		wq += qctr[i];
		if (!who.empty())
			who += ',';
		who += std::to_string(j.ranks[i]->rank);
	}
	const uint64_t wtx = t.data_sent + t.acks_sent + t.retransmits;
	const uint64_t wrx = t.data_recv + t.acks_recv + t.dropped + t.bad_msgs + w->held_overflow;
	const bool ok = wtx == wq.tx_pkts + t.tx_refused + wq.tx_drops() && wq.rx_pkts == wrx;
	workers_ok &= ok;
	if (j.workers.size() > 1)
		printf("  worker %u (lcore %u, ranks %s): verified %lu  app sent %lu = sent %lu + refused %lu + tx drops "
		       "%lu; received %lu = app received %lu + dropped %lu + bad %lu + held overflow %lu: %s\n",
		       w->index, w->where.lcore, who.c_str(), (unsigned long)t.verified, (unsigned long)wtx,
		       (unsigned long)wq.tx_pkts, (unsigned long)t.tx_refused, (unsigned long)wq.tx_drops(),
		       (unsigned long)wq.rx_pkts, (unsigned long)(t.data_recv + t.acks_recv), (unsigned long)t.dropped,
		       (unsigned long)t.bad_msgs, (unsigned long)w->held_overflow, ok ? "closed" : "OPEN");
	snprintf(b, sizeof(b),
		 "%s{\"worker\":%u,\"lcore\":%u,\"ranks\":[%s],\"verified\":%lu,\"app_sent\":%lu,\"sent\":%lu,"
		 "\"refused\":%lu,\"tx_drops\":%lu,\"received\":%lu,\"app_received\":%lu,\"dropped\":%lu,"
		 "\"bad_messages\":%lu,\"held_overflow\":%lu,\"empty_polls\":%lu,\"accounting\":\"%s\"}",
		 jworkers.empty() ? "" : ",", w->index, w->where.lcore, who.c_str(), (unsigned long)t.verified,
		 (unsigned long)wtx, (unsigned long)wq.tx_pkts, (unsigned long)t.tx_refused, (unsigned long)wq.tx_drops(),
		 (unsigned long)wq.rx_pkts, (unsigned long)(t.data_recv + t.acks_recv), (unsigned long)t.dropped,
		 (unsigned long)t.bad_msgs, (unsigned long)w->held_overflow, (unsigned long)w->idle.stats().empty,
		 ok ? "closed" : "open");
	jworkers += b;
}
const bool closed = tx_ok && rx_ok && leaked == 0 && workers_ok;
printf("  port: sent %lu  received %lu  rx drops %lu  tx drops %lu  missed by the port %lu  "
       "held before start %lu (overflow %lu)\n",
       (unsigned long)q.tx_pkts, (unsigned long)q.rx_pkts, (unsigned long)q.rx_drops(),
       (unsigned long)q.tx_drops(), (unsigned long)imissed, (unsigned long)held_total,
       (unsigned long)held_overflow);
printf("  port counters:%s\n", reasons.empty() ? " (none other than sent/received)" : reasons.c_str());
if (procs && apps::is_soft<Dev>)
	printf("  neighbours: %u/%u resolved by ARP to the MAC the peer published\n", arp_matched,
	       nranks - 1);
printf("  idle %s (after %u empty polls, naps up to %u us): empty polls %lu  yields %lu  sleeps %lu  "
       "asked to sleep %.1f ms\n",
       idle_mode_name(j.workers[0]->idle.config().mode), c.idle_spins, c.idle_sleep_us, (unsigned long)is.empty,
       (unsigned long)is.yields, (unsigned long)is.sleeps, double(is.slept_ns) / 1e6);
printf("  accounting: app sent %lu = port sent %lu + refused %lu + tx drops %lu%s; port received "
       "%lu = app received %lu + dropped %lu + bad %lu + held overflow %lu%s; mbufs in use after "
       "stop %u (the port's own at start %u), leaked %u: %s\n",
       (unsigned long)app_tx, (unsigned long)q.tx_pkts, (unsigned long)tot.tx_refused,
       (unsigned long)q.tx_drops(), tx_ok ? "" : " (NO)", (unsigned long)q.rx_pkts,
       (unsigned long)(tot.data_recv + tot.acks_recv), (unsigned long)tot.dropped,
       (unsigned long)tot.bad_msgs, (unsigned long)held_overflow, rx_ok ? "" : " (NO)", in_use,
       pmd_held, leaked, closed ? "closed" : "OPEN");
snprintf(b, sizeof(b),
	 ",\"port\":{\"sent\":%lu,\"received\":%lu,\"rx_drops\":%lu,\"tx_drops\":%lu,\"imissed\":%lu,"
	 "\"held\":%lu,\"held_overflow\":%lu,\"counters\":{",
	 (unsigned long)q.tx_pkts, (unsigned long)q.rx_pkts, (unsigned long)q.rx_drops(),
	 (unsigned long)q.tx_drops(), (unsigned long)imissed, (unsigned long)held_total,
	 (unsigned long)held_overflow);
js += b;
js += jreasons;
snprintf(b, sizeof(b),
	 "}},\"idle\":{\"mode\":\"%s\",\"spins\":%u,\"sleep_us\":%u,\"empty\":%lu,\"yields\":%lu,"
	 "\"sleeps\":%lu},\"arp_matched\":%u,\"mbufs_in_use\":%u,\"mbufs_port_held\":%u,\"mbufs_leaked\":%u,"
	 "\"accounting\":\"%s\"",
	 idle_mode_name(j.workers[0]->idle.config().mode), c.idle_spins, c.idle_sleep_us, (unsigned long)is.empty,
	 (unsigned long)is.yields, (unsigned long)is.sleeps, arp_matched, in_use, pmd_held, leaked,
	 closed ? "closed" : "open");
js += b;
js += ",\"driver\":\"" + std::string(j.ranks[0]->dev.driver_name()) + "\",\"workers\":[" + jworkers + "]";
if (!closed || !arp_ok)
	status = 1;
if (!arp_ok)
	fprintf(stderr, "rdgram-coll: rank %u: only %u of %u peers resolved by ARP to their published MAC\n",
		my_rank, arp_matched, nranks - 1);
if (j.timed_out())
	fprintf(stderr, "rdgram-coll: timed out after %.1f s\n", c.timeout_s);
if (status != 0 || !all_fin || tot.verify_fail != 0 || tot.verified != uint64_t(c.iters) * nb_ops * j.ranks.size())
	status = 1;
else
	printf("result: PASS\n");
js += status == 0 ? ",\"result\":\"PASS\"}\n" : ",\"result\":\"FAIL\"}\n";
if (!c.json.empty()) {
	/* Ranks of one launcher share the command line:
	 * {rank} in the name is this process's rank. */
	std::string path = c.json;
	if (const size_t at = path.find("{rank}"); at != std::string::npos)
		path.replace(at, 6, std::to_string(my_rank));
	FILE *f = path == "-" ? stdout : fopen(path.c_str(), "w");
	if (f == nullptr || fputs(js.c_str(), f) < 0 || (f != stdout && fclose(f) != 0)) {
		fprintf(stderr, "rdgram-coll: cannot write --json %s: %s\n", path.c_str(), strerror(errno));
		status = 1;
	}
}
	return status;
}

#define RDGRAM_COLL_REPORT_INST(D)                                                                     \
	template void print_storm<D>(const coll_config &, job<D> &, const job_ctl &);                  \
	template int report_job<D>(const coll_config &, job<D> &, const job_ctl &, const close_stats<D> &);
RDGRAM_COLL_DRIVERS(RDGRAM_COLL_REPORT_INST)

} // namespace rdgram::coll
