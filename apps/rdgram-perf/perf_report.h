/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * perftest-style result tables (ib_send_lat / ib_send_bw layouts) and JSON;
 * what rdgram-perf prints while its tests run (the status line) and after
 * them (results, counters, the exit status they make; perf_report.cc).
 */
#ifndef RDGRAM_PERF_REPORT_H
#define RDGRAM_PERF_REPORT_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <rte_mempool.h>

#include "perf_config.h"
#include "perf_status.h"
#include "rdgram/stats.h"
#include "rdgram/telemetry.h"

namespace rdgram::perf {

struct lat_result {
	uint32_t bytes = 0;
	uint64_t iterations = 0; /* samples measured */
	uint64_t lost = 0;       /* pings that timed out and were re-sent */
	double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, p99 = 0, p999 = 0;
};

/* Summarizes RTT/2 samples in microseconds (sorts them in place). As
 * perftest: t_typical is the median, percentiles by rank. */
inline lat_result summarize_latency(std::vector<double> &us, uint32_t bytes)
{
	lat_result r;
	r.bytes = bytes;
	r.iterations = us.size();
	if (us.empty())
		return r;
	std::sort(us.begin(), us.end());
	double sum = 0, sq = 0;
	for (double v : us)
		sum += v;
	r.t_avg = sum / double(us.size());
	for (double v : us)
		sq += (v - r.t_avg) * (v - r.t_avg);
	r.t_stdev = std::sqrt(sq / double(us.size()));
	r.t_min = us.front();
	r.t_max = us.back();
	r.t_typical = us[us.size() / 2];
	auto rank = [&](double q) {
		size_t i = size_t(std::ceil(q * double(us.size()))) ;
		if (i > 0)
			i--;
		return us[std::min(i, us.size() - 1)];
	};
	r.p99 = rank(0.99);
	r.p999 = rank(0.999);
	return r;
}

struct bw_result {
	uint32_t bytes = 0;
	uint64_t iterations = 0;
	double bw_peak_mib = 0, bw_avg_mib = 0, msg_rate_mpps = 0;
	double seconds = 0; /* the sending loop's, first to last message */
	/* Messages per second of the sending thread's own CPU time (0: not
	 * known): on a shared machine, what the loop does while it runs. */
	double cpu_msg_rate_mpps = 0;
	uint64_t received = 0; /* as counted by the receiver, when known */
	bool received_known = false;
};

inline void print_lat_table(FILE *f, const std::vector<lat_result> &rows)
{
	fprintf(f, "---------------------------------------------------------------------------------------\n");
	fprintf(f, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
		   "t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec] \n");
	for (const auto &r : rows)
		fprintf(f, " %-7u %-10lu    %-7.2f        %-7.2f      %-7.2f            %-7.2f          %-7.2f"
			   "         %-7.2f                 %-7.2f\n",
			r.bytes, (unsigned long)r.iterations, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev,
			r.p99, r.p999);
	fprintf(f, "---------------------------------------------------------------------------------------\n");
}

inline void print_bw_table(FILE *f, const std::vector<bw_result> &rows)
{
	fprintf(f, "---------------------------------------------------------------------------------------\n");
	fprintf(f, " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
	for (const auto &r : rows)
		fprintf(f, " %-10u %-10lu     %-.2f            %-.2f               %-.6f\n", r.bytes,
			(unsigned long)r.iterations, r.bw_peak_mib, r.bw_avg_mib, r.msg_rate_mpps);
	fprintf(f, "---------------------------------------------------------------------------------------\n");
	for (const auto &r : rows)
		if (r.received_known)
			fprintf(f, " receiver: %lu of %lu messages of %u bytes arrived (%.3f%% lost)\n",
				(unsigned long)r.received, (unsigned long)r.iterations, r.bytes,
				r.iterations ? 100.0 * double(r.iterations - std::min(r.received, r.iterations)) /
						       double(r.iterations)
					     : 0.0);
}

inline std::string lat_json(const lat_result &r)
{
	char b[512];
	snprintf(b, sizeof(b),
		 "{\"test\":\"lat\",\"bytes\":%u,\"iterations\":%lu,\"lost\":%lu,\"t_min_us\":%.3f,"
		 "\"t_max_us\":%.3f,\"t_typical_us\":%.3f,\"t_avg_us\":%.3f,\"t_stdev_us\":%.3f,"
		 "\"p99_us\":%.3f,\"p99_9_us\":%.3f}",
		 r.bytes, (unsigned long)r.iterations, (unsigned long)r.lost, r.t_min, r.t_max, r.t_typical,
		 r.t_avg, r.t_stdev, r.p99, r.p999);
	return b;
}

inline std::string bw_json(const bw_result &r)
{
	char b[512];
	snprintf(b, sizeof(b),
		 "{\"test\":\"bw\",\"bytes\":%u,\"iterations\":%lu,\"bw_peak_mib_s\":%.3f,"
		 "\"bw_avg_mib_s\":%.3f,\"msg_rate_mpps\":%.6f%s%s%s}",
		 r.bytes, (unsigned long)r.iterations, r.bw_peak_mib, r.bw_avg_mib, r.msg_rate_mpps,
		 r.cpu_msg_rate_mpps > 0 ? (",\"cpu_msg_rate_mpps\":" + std::to_string(r.cpu_msg_rate_mpps)).c_str() : "",
		 r.received_known ? ",\"received\":" : "",
		 r.received_known ? std::to_string(r.received).c_str() : "");
	return b;
}

/* The status line: printed by the control thread (a poller) every
 * interval from what the poll threads published (perf_status.h). */
struct status_printer {
	const perf_config *c;
	std::vector<const progress *> progs; /* a client's workers; empty: a server */
	std::vector<const telemetry::qp_publisher *> qps;
	uint64_t start = 0, next = 0, interval = 0;
	uint64_t last_done = 0, last_tsc = 0;
	int last_phase = progress::idle;

	/* A control_thread poller (control thread). */
	static bool poll(void *arg, uint64_t now)
	{
		auto *p = static_cast<status_printer *>(arg);
		if (now < p->next)
			return false;
		p->next = now + p->interval;
		p->print(now);
		return false;
	}
	void print(uint64_t now);
};

/* One client worker's results, for the sum and the per-worker detail. */
struct worker_result {
	unsigned index, lcore;
	uint32_t qpn;
	const std::vector<lat_result> *lat;
	const std::vector<double> *lat_samples; /* RTT/2, us */
	const std::vector<bw_result> *bw;
};

/* The workers' latency rows as one: every worker's samples together
 * (their percentiles, not an average of percentiles); a lone worker's
 * rows as they are. */
std::vector<lat_result> merge_lat(const std::vector<worker_result> &w);

/* The workers' bandwidth rows as one: messages summed over the longest
 * worker's time (so workers that did not overlap are not counted as if
 * they had), peaks and CPU rates summed, the receiver's counts summed
 * when every worker has one; a lone worker's rows as they are. */
std::vector<bw_result> merge_bw(const std::vector<worker_result> &w);

/* The client's results on stdout: JSON lines with c.json, else the
 * latency then the bandwidth table. With per (several workers), each
 * JSON line also carries "workers": each worker's own figures. */
void print_results(const perf_config &c, const std::vector<lat_result> &lat, const std::vector<bw_result> &bw,
		   const std::vector<worker_result> *per = nullptr);

/* The client's exit status: 0 when its tests completed (ok), else 130
 * after SIGINT/SIGTERM or 1 at the timeout, with one line on stderr. */
int client_status(const perf_config &c, bool ok);

/* txonly --dests: messages per destination and the pool's mbufs on
 * stderr. Returns status, or 1 when mbufs are missing from mp and status
 * was 0. */
int report_dests(const perf_config &c, size_t n_dests, const std::vector<bw_result> &bw, rte_mempool *mp,
		 int status);

/* --hist-csv and --hist-plot (either may be ""): writes the CSV, draws the
 * plot, one line on stdout for each (not with c.json). Returns status, or
 * 1 (CSV) or 3 (plot) on a failure when status was 0. */
int write_histogram(const perf_config &c, const latency_hist &h, const std::string &csv, const std::string &plot,
		    int status);

/* The queues' non-zero counters after the results (stdout flushed first,
 * so a pipe keeps the order): one line per role, "ROLE counters:
 * name=value ..." (scripts read it), then what each name means. K is a
 * driver's counters (stats.h: for_each of xstat_name and value). */
template <class K> void print_counters(const std::vector<std::pair<const char *, const K *>> &qs)
{
	const auto counted = [](const xstat_name &n, uint64_t v) { return v != 0 && n.kind != counter_kind::traffic; };
	std::vector<const xstat_name *> seen;
	for (const auto &q : qs)
		q.second->for_each([&](const xstat_name &n, uint64_t v) {
			if (counted(n, v) && std::none_of(seen.begin(), seen.end(), [&](const xstat_name *p) {
				    return strcmp(p->name, n.name) == 0;
			    }))
				seen.push_back(&n);
		});
	fflush(stdout);
	if (seen.empty())
		return;
	fprintf(stderr, " queue counters, non-zero (packets and bytes left out):\n");
	for (const auto &q : qs) {
		/* A plain name, not a structured binding: clang before 16
		 * cannot capture a binding in the lambda below. */
		const auto &role = q.first;
		bool any = false;
		q.second->for_each([&](const xstat_name &n, uint64_t v) {
			if (!counted(n, v))
				return;
			if (!any)
				fprintf(stderr, " %s counters:", role);
			fprintf(stderr, " %s=%lu", n.name, (unsigned long)v);
			any = true;
		});
		if (any)
			fprintf(stderr, "\n");
	}
	for (const xstat_name *n : seen)
		fprintf(stderr, "   %-20s %s: %s\n", n->name,
			n->kind == counter_kind::drop ? "drop (messages lost)" : "event (not a loss)", n->desc);
}

/* Every drop counter of a queue that is not zero, by name: the driver's
 * whole set (stats.h, drivers/<d>/<d>_counters.h). One line on stderr,
 * none when nothing was dropped. */
template <class K> void print_drops(const char *drv, const K &k)
{
	std::string out;
	k.for_each([&](const xstat_name &n, uint64_t v) {
		if (n.kind == counter_kind::drop && v != 0)
			out += std::string(" ") + n.name + "=" + std::to_string(v);
	});
	if (!out.empty())
		fprintf(stderr, "rdgram-perf: driver %s drops:%s\n", drv, out.c_str());
}

} // namespace rdgram::perf

#endif
