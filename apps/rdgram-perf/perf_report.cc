/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "perf_report.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

#include <rte_cycles.h>

#include "perf_tests.h"

namespace rdgram::perf {

void status_printer::print(uint64_t now)
{
	const double hz = double(rte_get_tsc_hz());
	uint64_t drops = 0, rx = 0;
	for (const auto *q : qps) {
		telemetry::qp_snapshot s;
		if (q->read(&s)) {
			drops += s.drops();
			rx += s.value("rx_pkts");
		}
	}
	const double el = double(now - start) / hz;
	if (progs.empty()) { /* server: what arrived */
		const double rate = last_tsc ? double(rx - last_done) / (double(now - last_tsc) / hz) : 0;
		fprintf(stderr, " [%7.1f s] server: %lu received, %.0f/s, drops %lu\n", el, (unsigned long)rx, rate,
			(unsigned long)drops);
		last_done = rx;
		last_tsc = now;
		return;
	}
	/* The workers run the same tests: the phase is the first's, the
	 * messages done the sum, the latency the first worker's histogram. */
	const progress *prog = progs[0];
	const int phase = prog->phase.load(std::memory_order_relaxed);
	uint64_t done = 0;
	for (const progress *p : progs)
		done += p->done.load(std::memory_order_relaxed);
	if (phase == progress::idle)
		return;
	if (phase != last_phase)
		last_done = 0; /* the new phase counts from 0 */
	const double dt = last_tsc ? double(now - last_tsc) / hz : 0;
	const double rate = dt > 0 ? double(done - std::min(done, last_done)) / dt : 0;
	char lat[96] = "p50/p99 -";
	if (prog->hist.count() != 0)
		snprintf(lat, sizeof(lat), "p50 %.2f us, p99 %.2f us", double(prog->hist.quantile_ns(0.5)) / 1e3,
			 double(prog->hist.quantile_ns(0.99)) / 1e3);
	fprintf(stderr, " [%7.1f s] %s: %lu done, %.3f Mmsg/s, drops %lu, %s\n", el,
		phase == progress::lat ? "lat" : "bw", (unsigned long)done, rate / 1e6, (unsigned long)drops, lat);
	last_phase = phase;
	last_done = done;
	last_tsc = now;
}

std::vector<lat_result> merge_lat(const std::vector<worker_result> &w)
{
	if (w.size() == 1)
		return *w[0].lat;
	std::vector<lat_result> out;
	for (size_t row = 0;; row++) {
		std::vector<double> all;
		uint64_t lost = 0;
		uint32_t bytes = 0;
		bool any = false;
		for (const worker_result &x : w)
			if (row < x.lat->size()) {
				any = true;
				bytes = (*x.lat)[row].bytes;
				lost += (*x.lat)[row].lost;
				all.insert(all.end(), x.lat_samples->begin(), x.lat_samples->end());
			}
		if (!any)
			return out;
		out.push_back(summarize_latency(all, bytes));
		out.back().lost = lost;
	}
}

std::vector<bw_result> merge_bw(const std::vector<worker_result> &w)
{
	if (w.size() == 1)
		return *w[0].bw;
	std::vector<bw_result> out;
	for (size_t row = 0;; row++) {
		bw_result s;
		bool any = false;
		s.received_known = true;
		for (const worker_result &x : w) {
			if (row >= x.bw->size()) {
				s.received_known = false;
				continue;
			}
			const bw_result &r = (*x.bw)[row];
			any = true;
			s.bytes = r.bytes;
			s.iterations += r.iterations;
			s.seconds = std::max(s.seconds, r.seconds);
			s.bw_peak_mib += r.bw_peak_mib;
			s.cpu_msg_rate_mpps += r.cpu_msg_rate_mpps;
			s.received += r.received;
			s.received_known &= r.received_known;
		}
		if (!any)
			return out;
		s.msg_rate_mpps = s.seconds > 0 ? double(s.iterations) / s.seconds / 1e6 : 0;
		s.bw_avg_mib = s.seconds > 0 ? double(s.iterations) * s.bytes / s.seconds / 1048576.0 : 0;
		s.bw_peak_mib = std::max(s.bw_peak_mib, s.bw_avg_mib);
		if (!s.received_known)
			s.received = 0;
		out.push_back(s);
	}
}

namespace {

/* A JSON object's closing brace replaced by ,"workers":[...]}. */
std::string with_workers(std::string j, const std::vector<std::string> &each)
{
	j.pop_back();
	j += ",\"workers\":[";
	for (size_t i = 0; i < each.size(); i++)
		j += (i ? "," : "") + each[i];
	return j + "]}";
}

} // namespace

void print_results(const perf_config &c, const std::vector<lat_result> &lat, const std::vector<bw_result> &bw,
		   const std::vector<worker_result> *per)
{
	if (c.json) {
		char b[320];
		for (size_t row = 0; row < lat.size(); row++) {
			std::vector<std::string> each;
			for (const worker_result &x : per ? *per : std::vector<worker_result>{})
				if (row < x.lat->size()) {
					const lat_result &r = (*x.lat)[row];
					snprintf(b, sizeof(b),
						 "{\"worker\":%u,\"lcore\":%u,\"qpn\":%u,\"iterations\":%lu,\"lost\":%lu,"
						 "\"t_typical_us\":%.3f,\"t_avg_us\":%.3f,\"p99_us\":%.3f}",
						 x.index, x.lcore, x.qpn, (unsigned long)r.iterations, (unsigned long)r.lost,
						 r.t_typical, r.t_avg, r.p99);
					each.push_back(b);
				}
			printf("%s\n", per ? with_workers(lat_json(lat[row]), each).c_str() : lat_json(lat[row]).c_str());
		}
		for (size_t row = 0; row < bw.size(); row++) {
			std::vector<std::string> each;
			for (const worker_result &x : per ? *per : std::vector<worker_result>{})
				if (row < x.bw->size()) {
					const bw_result &r = (*x.bw)[row];
					snprintf(b, sizeof(b),
						 "{\"worker\":%u,\"lcore\":%u,\"qpn\":%u,\"iterations\":%lu,\"seconds\":%.6f,"
						 "\"msg_rate_mpps\":%.6f,\"cpu_msg_rate_mpps\":%.6f%s%s}",
						 x.index, x.lcore, x.qpn, (unsigned long)r.iterations, r.seconds, r.msg_rate_mpps,
						 r.cpu_msg_rate_mpps,
						 r.received_known ? ",\"received\":" : "",
						 r.received_known ? std::to_string(r.received).c_str() : "");
					each.push_back(b);
				}
			printf("%s\n", per ? with_workers(bw_json(bw[row]), each).c_str() : bw_json(bw[row]).c_str());
		}
		return;
	}
	if (!lat.empty())
		print_lat_table(stdout, lat);
	if (!bw.empty())
		print_bw_table(stdout, bw);
}

int client_status(const perf_config &c, bool ok)
{
	if (ok)
		return 0;
	if (perf_stop.load()) {
		fprintf(stderr, "rdgram-perf: interrupted\n");
		return 130;
	}
	fprintf(stderr, "rdgram-perf: the test did not complete before the %.1f s timeout\n", c.timeout_s);
	return 1;
}

int report_dests(const perf_config &c, size_t n_dests, const std::vector<bw_result> &bw, rte_mempool *mp, int status)
{
	/* Every message accounted for: sent, or counted as a drop; every
	 * mbuf back in the pool (inline sends). */
	const unsigned avail = rte_mempool_avail_count(mp), size = mp->size;
	const uint64_t sent = bw.empty() ? 0 : bw[0].iterations;
	fprintf(stderr,
		" txonly: %zu destinations, %s order, %lu messages (%.1f per destination), "
		"mbufs in the pool %u of %u\n",
		n_dests, c.dest_order.c_str(), (unsigned long)sent, double(sent) / double(n_dests), avail, size);
	if (avail != size && status == 0) {
		fprintf(stderr, "rdgram-perf: %u mbufs not back in the pool\n", size - avail);
		return 1;
	}
	return status;
}

int write_histogram(const perf_config &c, const latency_hist &h, const std::string &csv, const std::string &plot,
		    int status)
{
	if (csv.empty())
		return status;
	if (int rc = write_hist_csv(h, csv); rc != 0) {
		fprintf(stderr, "rdgram-perf: cannot write %s: %s\n", csv.c_str(), strerror(rc));
		status = status ? status : 1;
	} else if (!c.json) {
		printf(" latency histogram: %lu samples -> %s\n", (unsigned long)h.count(), csv.c_str());
	}
	if (!plot.empty() && access(csv.c_str(), F_OK) == 0) {
		std::string err;
		char title[128];
		snprintf(title, sizeof(title), "rdgram-perf RTT/2, %u-byte payloads, %lu samples", c.size,
			 (unsigned long)h.count());
		if (plot_hist(csv, plot, title, &err) != 0) {
			fprintf(stderr, "rdgram-perf: --hist-plot: %s\n", err.c_str());
			status = status ? status : 3;
		} else if (!c.json) {
			printf(" latency plot -> %s\n", plot.c_str());
		}
	}
	return status;
}

} // namespace rdgram::perf
