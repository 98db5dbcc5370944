/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "mcast_report.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

#include "rdgram/config.h"

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
int write_hist(const mcast_config &c, const apps::latency_hist &h, size_t i, size_t n)
{
	const std::string csv = with_suffix(c.hist_csv, i, n);
	if (int rc = apps::write_hist_csv(h, csv); rc != 0) {
		fprintf(stderr, "rdgram-mcast: cannot write %s: %s\n", csv.c_str(), strerror(rc));
		return 1;
	}
	printf("sub%zu: latency histogram -> %s\n", i, csv.c_str());
	if (c.hist_plot.empty())
		return 0;
	const std::string out = with_suffix(c.hist_plot, i, n);
	std::string err;
	const std::string title =
		"rdgram-mcast sub" + std::to_string(i) + ": one-way latency, " + std::to_string(h.count()) + " messages";
	if (apps::plot_hist(csv, out, title, &err) != 0) {
		fprintf(stderr, "rdgram-mcast: --hist-plot: %s\n", err.c_str());
		return 3;
	}
	printf("sub%zu: latency plot -> %s\n", i, out.c_str());
	return 0;
}

/* A subscriber's or worker's name in the output: sub0, or sub0/w1 with
 * several workers. */
std::string who(size_t k, size_t w, size_t nw)
{
	return "sub" + std::to_string(k) + (nw > 1 ? "/w" + std::to_string(w) : "");
}

std::string group_list(const mcast_config &c, const std::vector<uint32_t> &gs)
{
	std::string s;
	for (uint32_t g : gs) {
		if (!s.empty())
			s += ',';
		s += format_gid(c.groups[g]);
	}
	return s;
}

/* Sequence counters summed over groups. */
struct seq_sums {
	uint64_t miss = 0, dups = 0, reord = 0, old = 0;
	void add(const seq_tracker &t)
	{
		miss += t.missing();
		dups += t.dups();
		reord += t.reordered();
		old += t.too_old();
	}
};

void print_latency(const std::string &name, const apps::latency_hist &h, uint64_t max_ns)
{
	printf("%s: latency_ns samples=%lu p50=%lu p99=%lu p99.9=%lu max=%lu (one-way, TSC)\n", name.c_str(),
	       (unsigned long)h.count(), (unsigned long)h.quantile_ns(0.5), (unsigned long)h.quantile_ns(0.99),
	       (unsigned long)h.quantile_ns(0.999), (unsigned long)max_ns);
}

/* "closes", or how many deliveries nothing accounts for. */
std::string closes(uint64_t published, uint64_t received, uint64_t drops)
{
	if (published == received + drops)
		return "closes";
	const int64_t d = int64_t(published) - int64_t(received) - int64_t(drops);
	return "does NOT close: " + std::to_string(d) + " unaccounted";
}

} // namespace

void print_status(const mcast_config &c, const std::vector<const pub_state *> &pubs,
		  const std::vector<std::vector<const sub_state *>> &subs, uint64_t hz, uint64_t start, uint64_t now,
		  std::vector<uint64_t> &last_rx, uint64_t &last_tsc)
{
	const double el = double(now - start) / double(hz);
	const double dt = last_tsc != 0 ? double(now - last_tsc) / double(hz) : 0;
	if (!pubs.empty()) {
		/* The lowest of the workers' sequence numbers: every group got that far. */
		uint64_t seq = UINT64_MAX;
		for (const pub_state *p : pubs)
			seq = std::min(seq, p->sent.load(std::memory_order_relaxed));
		fprintf(stderr, " [%6.1f s] pub: seq %lu\n", el, (unsigned long)seq);
	}
	for (size_t k = 0; k < subs.size(); k++)
		for (size_t w = 0; w < subs[k].size(); w++) {
			const sub_state &s = *subs[k][w];
			const size_t at = k * subs[k].size() + w;
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
			fprintf(stderr, " [%6.1f s] %s: %lu msgs, %.0f msg/s, missing %lu, dup %lu, %s\n", el,
				who(k, w, subs[k].size()).c_str(), (unsigned long)rx,
				dt > 0 ? double(rx - last_rx[at]) / dt : 0.0, (unsigned long)miss, (unsigned long)dups, lat);
			last_rx[at] = rx;
		}
	last_tsc = now;
}

int report(const mcast_config &c, const std::vector<pub_report> &pubs, std::vector<sub_report> &subs,
	   uint64_t switch_copy_fail)
{
	int st = 0;
	const size_t ng = c.groups.size();
	/* The highest sequence number sent to each group (its publisher worker's). */
	std::vector<uint64_t> last(ng, 0);
	if (!pubs.empty()) {
		queue_totals sum;
		uint64_t last_seq = 0, refused = 0;
		for (size_t w = 0; w < pubs.size(); w++) {
			const pub_state &p = *pubs[w].p;
			for (uint32_t g : p.groups)
				last[g] = p.last_seq;
			if (pubs.size() > 1)
				printf("pub/w%zu: lcore=%u groups=%s last_seq=%lu tx_pkts=%lu tx_drops=%lu refused=%lu\n", w,
				       pubs[w].lcore, group_list(c, p.groups).c_str(), (unsigned long)p.last_seq,
				       (unsigned long)pubs[w].q.tx_pkts, (unsigned long)pubs[w].q.tx_drops,
				       (unsigned long)p.refused);
			last_seq = std::max(last_seq, p.last_seq);
			refused += p.refused;
			sum.tx_pkts += pubs[w].q.tx_pkts;
			sum.tx_drops += pubs[w].q.tx_drops;
		}
		printf("pub: last_seq=%lu groups=%zu tx_pkts=%lu tx_drops=%lu refused=%lu skipped=%zu duplicated=%zu\n",
		       (unsigned long)last_seq, ng, (unsigned long)sum.tx_pkts, (unsigned long)sum.tx_drops,
		       (unsigned long)refused, c.skip_seq.size(), c.dup_seq.size());
	}
	for (size_t i = 0; i < subs.size(); i++) {
		sub_report &r = subs[i];
		const size_t nw = r.w.size();
		seq_sums all;
		uint64_t received = 0, malformed = 0, foreign = 0, rx_drops = 0, max_ns = 0, published = 0;
		bool known = true;
		auto merged = std::make_unique<apps::latency_hist>(); /* several workers */
		for (size_t w = 0; w < nw; w++) {
			sub_worker_report &x = r.w[w];
			sub_state &s = *x.s;
			seq_sums one;
			for (uint32_t g : x.groups) {
				if (!pubs.empty())
					s.trk[g].tail(last[g]); /* losses at the very end */
				one.add(s.trk[g]);
			}
			all.miss += one.miss;
			all.dups += one.dups;
			all.reord += one.reord;
			all.old += one.old;
			received += s.received.load();
			malformed += s.malformed.load();
			foreign += s.foreign.load();
			rx_drops += x.q.rx_drops;
			max_ns = std::max(max_ns, s.max_ns.load());
			known &= x.published != UINT64_MAX;
			published += x.published;
			if (nw == 1)
				continue;
			/* The subscriber's histogram: its workers' buckets added
			 * up (each bucket's lower bound lands in that bucket). */
			for (unsigned b = 0; b < apps::latency_hist::nbuckets; b++)
				for (uint64_t n = s.hist.at(b); n != 0; n--)
					merged->record(apps::latency_hist::lower_of(b));
			const std::string name = who(i, w, nw);
			printf("%s: lcore=%u groups=%s received=%lu missing=%lu dup=%lu reordered=%lu too_old=%lu "
			       "malformed=%lu foreign=%lu rx_drops=%lu\n",
			       name.c_str(), x.lcore, group_list(c, x.groups).c_str(), (unsigned long)s.received.load(),
			       (unsigned long)one.miss, (unsigned long)one.dups, (unsigned long)one.reord,
			       (unsigned long)one.old, (unsigned long)s.malformed.load(), (unsigned long)s.foreign.load(),
			       (unsigned long)x.q.rx_drops);
			if (x.q.rx_drops != 0)
				printf("%s: rx_drops by reason:%s\n", name.c_str(), x.q.rx_drop_reasons.c_str());
			printf("%s: rx events:%s\n", name.c_str(), x.q.rx_events.empty() ? " none" : x.q.rx_events.c_str());
			if (x.published != UINT64_MAX)
				printf("%s: accounting published=%lu received=%lu rx_drops=%lu: %s\n", name.c_str(),
				       (unsigned long)x.published, (unsigned long)s.received.load(),
				       (unsigned long)x.q.rx_drops,
				       closes(x.published, s.received.load(), x.q.rx_drops).c_str());
			print_latency(name, s.hist, s.max_ns.load());
		}
		printf("sub%zu: received=%lu missing=%lu dup=%lu reordered=%lu too_old=%lu malformed=%lu foreign=%lu "
		       "rx_drops=%lu\n",
		       i, (unsigned long)received, (unsigned long)all.miss, (unsigned long)all.dups,
		       (unsigned long)all.reord, (unsigned long)all.old, (unsigned long)malformed,
		       (unsigned long)foreign, (unsigned long)rx_drops);
		if (nw == 1 && rx_drops != 0) /* each reason by name: on a real link most are frames
					       * that are not RoCE at all (the kernel's ICMPv6, ...) */
			printf("sub%zu: rx_drops by reason:%s\n", i, r.w[0].q.rx_drop_reasons.c_str());
		if (known) {
			/* Every delivery the publisher's queues took: received, or
			 * dropped by name (the queues' receive drops, the
			 * switch's failed copies, frames handed between the
			 * queues that were never taken). */
			const uint64_t named = rx_drops + switch_copy_fail + r.handoff_freed;
			printf("sub%zu: accounting published=%lu received=%lu named_drops=%lu: %s\n", i,
			       (unsigned long)published, (unsigned long)received, (unsigned long)named,
			       closes(published, received, named).c_str());
		}
		const apps::latency_hist &hist = nw == 1 ? r.w[0].s->hist : *merged;
		print_latency("sub" + std::to_string(i), hist, max_ns);
		if (r.has_sent)
			printf("sub%zu: driver sent igmp_report=%lu igmp_leave=%lu mld_report=%lu mld_leave=%lu "
			       "tx_failed=%lu\n",
			       i, (unsigned long)r.sent.igmp_reports, (unsigned long)r.sent.igmp_leaves,
			       (unsigned long)r.sent.mld_reports, (unsigned long)r.sent.mld_leaves,
			       (unsigned long)r.sent.tx_failed);
		if (const membership_seen *w = r.seen; w != nullptr)
			printf("sub%zu: switch saw igmp_report=%lu igmp_leave=%lu mld_join=%lu mld_leave=%lu other=%lu\n", i,
			       (unsigned long)w->igmp_report, (unsigned long)w->igmp_leave, (unsigned long)w->mld_join,
			       (unsigned long)w->mld_leave, (unsigned long)w->other);
		if (!c.hist_csv.empty())
			if (int rc = write_hist(c, hist, i, subs.size()); rc != 0)
				st = rc;
	}
	if (switch_copy_fail != 0)
		printf("switch: %lu copies failed (mbuf pool or ring full)\n", (unsigned long)switch_copy_fail);
	return st;
}

} // namespace rdgram::mcast
