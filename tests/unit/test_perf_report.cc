/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-perf --workers: how the workers' results become the one figure
 * the tables and --json report (perf_report.cc's merge_lat, merge_bw and
 * print_results' "workers" detail). No EAL: these are plain arithmetic.
 */
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "perf_report.h"

using namespace rdgram::perf;

namespace {

bw_result bw(uint64_t iters, double secs, double peak, uint64_t received, bool known)
{
	bw_result r;
	r.bytes = 64;
	r.iterations = iters;
	r.seconds = secs;
	r.msg_rate_mpps = double(iters) / secs / 1e6;
	r.bw_avg_mib = double(iters) * 64 / secs / 1048576.0;
	r.bw_peak_mib = peak;
	r.cpu_msg_rate_mpps = 10;
	r.received = received;
	r.received_known = known;
	return r;
}

} // namespace

/* One worker: its rows as they are (the figures rdgram-perf printed
 * before --workers, unchanged). */
TEST(PerfReport, OneWorkerPassesThrough)
{
	std::vector<bw_result> b{bw(1000, 0.5, 7, 990, true)};
	std::vector<double> s{3, 1, 2};
	std::vector<lat_result> l{summarize_latency(s, 64)};
	std::vector<worker_result> w{{0, 1, 0x101, &l, &s, &b}};
	const auto mb = merge_bw(w);
	ASSERT_EQ(mb.size(), 1u);
	EXPECT_EQ(mb[0].iterations, 1000u);
	EXPECT_DOUBLE_EQ(mb[0].msg_rate_mpps, b[0].msg_rate_mpps);
	EXPECT_DOUBLE_EQ(mb[0].bw_peak_mib, 7);
	EXPECT_EQ(mb[0].received, 990u);
	const auto ml = merge_lat(w);
	ASSERT_EQ(ml.size(), 1u);
	EXPECT_DOUBLE_EQ(ml[0].t_typical, 2);
}

/* Two workers: messages summed over the longer worker's time (a worker
 * that ran alone for part of it is not counted as if both had run
 * throughout), peaks and CPU rates summed, the receiver's count only when
 * every worker has one. */
TEST(PerfReport, BandwidthSumsOverTheLongerTime)
{
	std::vector<bw_result> b0{bw(1000000, 0.1, 700, 1000000, true)};
	std::vector<bw_result> b1{bw(1000000, 0.05, 1400, 999000, true)};
	std::vector<lat_result> none;
	std::vector<double> no_samples;
	std::vector<worker_result> w{{0, 1, 0x101, &none, &no_samples, &b0}, {1, 0, 0x102, &none, &no_samples, &b1}};
	auto m = merge_bw(w);
	ASSERT_EQ(m.size(), 1u);
	EXPECT_EQ(m[0].iterations, 2000000u);
	EXPECT_DOUBLE_EQ(m[0].seconds, 0.1);
	EXPECT_NEAR(m[0].msg_rate_mpps, 20.0, 1e-9); /* 2M over 0.1 s, not 10 + 20 */
	EXPECT_NEAR(m[0].bw_avg_mib, 2e6 * 64 / 0.1 / 1048576.0, 1e-6);
	EXPECT_DOUBLE_EQ(m[0].bw_peak_mib, 2100);
	EXPECT_DOUBLE_EQ(m[0].cpu_msg_rate_mpps, 20);
	EXPECT_TRUE(m[0].received_known);
	EXPECT_EQ(m[0].received, 1999000u);

	b1[0].received_known = false;
	m = merge_bw(w);
	EXPECT_FALSE(m[0].received_known);
	EXPECT_EQ(m[0].received, 0u);
}

/* Latency: the percentiles of every worker's samples together, not an
 * average of the workers' percentiles; re-sent pings summed. */
TEST(PerfReport, LatencyFromEverySample)
{
	std::vector<double> s0{1, 1, 1, 1}, s1{9, 9, 9, 9, 9, 9};
	std::vector<lat_result> l0{summarize_latency(s0, 64)}, l1{summarize_latency(s1, 64)};
	l0[0].lost = 2;
	l1[0].lost = 3;
	std::vector<bw_result> none;
	std::vector<worker_result> w{{0, 1, 0x101, &l0, &s0, &none}, {1, 0, 0x102, &l1, &s1, &none}};
	const auto m = merge_lat(w);
	ASSERT_EQ(m.size(), 1u);
	EXPECT_EQ(m[0].iterations, 10u);
	EXPECT_DOUBLE_EQ(m[0].t_min, 1);
	EXPECT_DOUBLE_EQ(m[0].t_max, 9);
	EXPECT_DOUBLE_EQ(m[0].t_typical, 9); /* the median of 4 ones and 6 nines */
	EXPECT_DOUBLE_EQ(m[0].t_avg, 5.8);
	EXPECT_EQ(m[0].lost, 5u);
	EXPECT_TRUE(merge_bw(w).empty());
}

/* --json: the sum's line first (what benchmarks/compare.py reads), each
 * worker's figures in its "workers" array; one worker: no array. */
TEST(PerfReport, JsonCarriesEachWorker)
{
	perf_config c;
	c.json = true;
	std::vector<bw_result> b0{bw(100, 0.01, 1, 0, false)}, b1{bw(300, 0.02, 1, 0, false)};
	std::vector<lat_result> none;
	std::vector<double> no_samples;
	std::vector<worker_result> w{{0, 1, 257, &none, &no_samples, &b0}, {1, 0, 258, &none, &no_samples, &b1}};
	testing::internal::CaptureStdout();
	print_results(c, {}, merge_bw(w), &w);
	const std::string out = testing::internal::GetCapturedStdout();
	EXPECT_EQ(out.rfind("{\"test\":\"bw\",\"bytes\":64,\"iterations\":400,", 0), 0u) << out;
	EXPECT_NE(out.find(",\"workers\":[{\"worker\":0,\"lcore\":1,\"qpn\":257,\"iterations\":100,\"seconds\":0.010000,"),
		  std::string::npos)
		<< out;
	EXPECT_NE(out.find("{\"worker\":1,\"lcore\":0,\"qpn\":258,\"iterations\":300,"), std::string::npos) << out;
	EXPECT_EQ(out.substr(out.size() - 4), "}]}\n") << out;
	EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);

	testing::internal::CaptureStdout();
	print_results(c, {}, b0, nullptr);
	EXPECT_EQ(testing::internal::GetCapturedStdout().find("workers"), std::string::npos);
}
