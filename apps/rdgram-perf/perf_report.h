/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * perftest-style result tables (ib_send_lat / ib_send_bw layouts) and JSON.
 */
#ifndef RDGRAM_PERF_REPORT_H
#define RDGRAM_PERF_REPORT_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

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

} // namespace rdgram::perf

#endif
