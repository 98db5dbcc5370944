/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "mcast_report.h"

#include <cstdio>
#include <cstring>

namespace rdgram::mcast {

namespace {

/* path with -subK before its suffix when there are several subscribers. */
std::string with_suffix(const std::string &path, size_t k, size_t n)
{
	if (n == 1)
		return path;
	const size_t dot = path.rfind('.');
	const std::string tag = "-sub" + std::to_string(k);
	return dot == std::string::npos || dot < path.rfind('/') + 1 ? path + tag : path.substr(0, dot) + tag + path.substr(dot);
}

/* The histogram's CSV and (--hist-plot) plot; 0, 1 or 3. */
int write_hist(const mcast_config &c, const sub_state &s, size_t i, size_t n)
{
	const std::string csv = with_suffix(c.hist_csv, i, n);
	if (int rc = apps::write_hist_csv(s.hist, csv); rc != 0) {
		fprintf(stderr, "rdgram-mcast: cannot write %s: %s\n", csv.c_str(), strerror(rc));
		return 1;
	}
	printf("sub%zu: latency histogram -> %s\n", i, csv.c_str());
	if (c.hist_plot.empty())
		return 0;
	const std::string out = with_suffix(c.hist_plot, i, n);
	std::string err;
	const std::string title =
		"rdgram-mcast sub" + std::to_string(i) + ": one-way latency, " + std::to_string(s.hist.count()) + " messages";
	if (apps::plot_hist(csv, out, title, &err) != 0) {
		fprintf(stderr, "rdgram-mcast: --hist-plot: %s\n", err.c_str());
		return 3;
	}
	printf("sub%zu: latency plot -> %s\n", i, out.c_str());
	return 0;
}

} // namespace

void print_status(const mcast_config &c, const pub_state *pub, const std::vector<std::unique_ptr<sub_state>> &subs,
		  uint64_t hz, uint64_t start, uint64_t now, std::vector<uint64_t> &last_rx, uint64_t &last_tsc)
{
	const double el = double(now - start) / double(hz);
	const double dt = last_tsc != 0 ? double(now - last_tsc) / double(hz) : 0;
	if (pub != nullptr)
		fprintf(stderr, " [%6.1f s] pub: seq %lu\n", el, (unsigned long)pub->sent.load(std::memory_order_relaxed));
	for (size_t k = 0; k < subs.size(); k++) {
		const sub_state &s = *subs[k];
		const uint64_t rx = s.received.load(std::memory_order_relaxed);
		uint64_t miss = 0, dups = 0;
		for (size_t g = 0; g < c.groups.size(); g++) {
			miss += s.trk[g].missing();
			dups += s.trk[g].dups();
		}
		char lat[128] = "p50/p99/p99.9/max -";
		if (s.hist.count() != 0)
			snprintf(lat, sizeof(lat), "p50 %.2f p99 %.2f p99.9 %.2f max %.2f us",
				 double(s.hist.quantile_ns(0.5)) / 1e3, double(s.hist.quantile_ns(0.99)) / 1e3,
				 double(s.hist.quantile_ns(0.999)) / 1e3,
				 double(s.max_ns.load(std::memory_order_relaxed)) / 1e3);
		fprintf(stderr, " [%6.1f s] sub%zu: %lu msgs, %.0f msg/s, missing %lu, dup %lu, %s\n", el, k,
			(unsigned long)rx, dt > 0 ? double(rx - last_rx[k]) / dt : 0.0, (unsigned long)miss,
			(unsigned long)dups, lat);
		last_rx[k] = rx;
	}
	last_tsc = now;
}

int report(const mcast_config &c, const pub_state *pub, const queue_totals &pub_q, std::vector<sub_report> &subs,
	   uint64_t switch_copy_fail)
{
	int st = 0;
	const size_t ng = c.groups.size();
	if (pub != nullptr)
		printf("pub: last_seq=%lu groups=%zu tx_pkts=%lu tx_drops=%lu refused=%lu skipped=%zu duplicated=%zu\n",
		       (unsigned long)pub->last_seq, ng, (unsigned long)pub_q.tx_pkts, (unsigned long)pub_q.tx_drops,
		       (unsigned long)pub->refused, c.skip_seq.size(), c.dup_seq.size());
	for (size_t i = 0; i < subs.size(); i++) {
		sub_state &s = *subs[i].s;
		const queue_totals &q = subs[i].q;
		uint64_t miss = 0, dups = 0, reord = 0, old = 0;
		for (size_t g = 0; g < ng; g++) {
			if (pub != nullptr)
				s.trk[g].tail(pub->last_seq); /* losses at the very end */
			miss += s.trk[g].missing();
			dups += s.trk[g].dups();
			reord += s.trk[g].reordered();
			old += s.trk[g].too_old();
		}
		printf("sub%zu: received=%lu missing=%lu dup=%lu reordered=%lu too_old=%lu malformed=%lu foreign=%lu "
		       "rx_drops=%lu\n",
		       i, (unsigned long)s.received.load(), (unsigned long)miss, (unsigned long)dups,
		       (unsigned long)reord, (unsigned long)old, (unsigned long)s.malformed.load(),
		       (unsigned long)s.foreign.load(), (unsigned long)q.rx_drops);
		if (q.rx_drops != 0) /* each reason by name: on a real link most are frames
				      * that are not RoCE at all (the kernel's ICMPv6, ...) */
			printf("sub%zu: rx_drops by reason:%s\n", i, q.rx_drop_reasons.c_str());
		printf("sub%zu: latency_ns samples=%lu p50=%lu p99=%lu p99.9=%lu max=%lu (one-way, TSC)\n", i,
		       (unsigned long)s.hist.count(), (unsigned long)s.hist.quantile_ns(0.5),
		       (unsigned long)s.hist.quantile_ns(0.99), (unsigned long)s.hist.quantile_ns(0.999),
		       (unsigned long)s.max_ns.load());
		if (const auto *mc = subs[i].sent; mc != nullptr)
			printf("sub%zu: driver sent igmp_report=%lu igmp_leave=%lu mld_report=%lu mld_leave=%lu "
			       "tx_failed=%lu\n",
			       i, (unsigned long)mc->igmp_reports, (unsigned long)mc->igmp_leaves,
			       (unsigned long)mc->mld_reports, (unsigned long)mc->mld_leaves, (unsigned long)mc->tx_failed);
		if (const membership_seen *w = subs[i].seen; w != nullptr)
			printf("sub%zu: switch saw igmp_report=%lu igmp_leave=%lu mld_join=%lu mld_leave=%lu other=%lu\n", i,
			       (unsigned long)w->igmp_report, (unsigned long)w->igmp_leave, (unsigned long)w->mld_join,
			       (unsigned long)w->mld_leave, (unsigned long)w->other);
		if (!c.hist_csv.empty())
			if (int rc = write_hist(c, s, i, subs.size()); rc != 0)
				st = rc;
	}
	if (switch_copy_fail != 0)
		printf("switch: %lu copies failed (mbuf pool or ring full)\n", (unsigned long)switch_copy_fail);
	return st;
}

} // namespace rdgram::mcast
