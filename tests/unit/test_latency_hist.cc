/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The apps' latency histogram and percentiles (apps/common/latency_hist.h):
 * bucket bounds, the nearest-rank quantile with few samples, the histogram
 * and the sorted-vector percentile agreeing, the CSV, plot refusals.
 */
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "latency_hist.h"

using rdgram::apps::latency_hist;
using rdgram::apps::nearest_rank;
using rdgram::apps::percentile;

namespace {

std::unique_ptr<latency_hist> hist_of(const std::vector<uint64_t> &ns)
{
	auto h = std::make_unique<latency_hist>();
	for (uint64_t v : ns)
		h->record(v);
	return h;
}

TEST(LatencyHist, BucketsHoldTheirValuesWithinOneSixteenth)
{
	std::vector<uint64_t> vals;
	for (uint64_t v = 0; v < 5000; v++)
		vals.push_back(v);
	for (unsigned e = 4; e < 40; e++)
		for (int64_t d = -2; d <= 2; d++)
			vals.push_back(uint64_t(int64_t(uint64_t(1) << e) + d));
	std::mt19937_64 rng(18);
	for (int i = 0; i < 100000; i++)
		vals.push_back(rng() >> (24 + rng() % 40)); /* below 2^40 */
	unsigned prev_b = 0;
	uint64_t prev_v = 0;
	for (uint64_t v : vals) {
		const unsigned b = latency_hist::bucket_of(v);
		ASSERT_LT(b, latency_hist::nbuckets - 1) << v;
		const uint64_t lo = latency_hist::lower_of(b), next = latency_hist::lower_of(b + 1);
		EXPECT_LE(lo, v) << v;
		EXPECT_LT(v, next) << v;
		if (v < latency_hist::sub) {
			EXPECT_EQ(lo, v);
		} else {
			EXPECT_LE(double(v - lo), double(v) / 16) << v;
		}
		if (v >= prev_v) {
			EXPECT_GE(b, prev_b) << v; /* monotonic in the value */
		}
		prev_b = b;
		prev_v = v;
	}
	/* Beyond ~2^40 ns: the last bucket. */
	EXPECT_EQ(latency_hist::bucket_of(uint64_t(1) << 50), latency_hist::nbuckets - 1);
	EXPECT_EQ(latency_hist::bucket_of(UINT64_MAX), latency_hist::nbuckets - 1);
}

TEST(LatencyHist, EmptyIsZero)
{
	latency_hist h;
	EXPECT_EQ(h.count(), 0u);
	EXPECT_EQ(h.quantile_ns(0.5), 0u);
	EXPECT_EQ(h.quantile_ns(0.99), 0u);
	EXPECT_EQ(percentile(std::vector<double>{}, 0.5), 0.0);
}

TEST(LatencyHist, OneSampleIsEveryQuantile)
{
	auto h = hist_of({7});
	for (double q : {0.0, 0.01, 0.5, 0.99, 1.0})
		EXPECT_EQ(h->quantile_ns(q), 7u) << q;
	/* Above 16 ns: the bucket's lower bound (992 <= 1000 < 1024). */
	h = hist_of({1000});
	for (double q : {0.0, 0.5, 1.0})
		EXPECT_EQ(h->quantile_ns(q), 992u) << q;
	EXPECT_EQ(percentile(std::vector<double>{4.5}, 0.5), 4.5);
	EXPECT_EQ(percentile(std::vector<double>{4.5}, 0.99), 4.5);
}

/* The few-samples case: p50 of two is the smaller, never the larger (the
 * index floor(q * n) rdgram-coll and rdgram-ah used gave the larger). */
TEST(LatencyHist, FewSamplesNearestRank)
{
	auto h = hist_of({9, 3});
	EXPECT_EQ(h->quantile_ns(0.5), 3u);
	EXPECT_EQ(h->quantile_ns(0.51), 9u);
	EXPECT_EQ(h->quantile_ns(0.99), 9u);
	EXPECT_EQ(h->quantile_ns(1.0), 9u);
	EXPECT_EQ(h->quantile_ns(0.0), 3u);
	const std::vector<double> two{3.0, 9.0};
	EXPECT_EQ(percentile(two, 0.5), 3.0);
	EXPECT_EQ(percentile(two, 0.99), 9.0);

	h = hist_of({1, 2, 3});
	EXPECT_EQ(h->quantile_ns(0.33), 1u);
	EXPECT_EQ(h->quantile_ns(0.34), 2u);
	EXPECT_EQ(h->quantile_ns(0.5), 2u);
	EXPECT_EQ(h->quantile_ns(0.67), 3u);
	const std::vector<int> three{1, 2, 3};
	EXPECT_EQ(percentile(three, 0.5), 2);
	EXPECT_EQ(percentile(three, 0.99), 3);

	/* One sample of a zero-cycle measurement among few is p50 only when
	 * it is at least half of them. */
	h = hist_of({0, 5, 6});
	EXPECT_EQ(h->quantile_ns(0.5), 5u);
	h = hist_of({0, 0, 6});
	EXPECT_EQ(h->quantile_ns(0.5), 0u);
}

TEST(LatencyHist, RankOfExactProducts)
{
	/* 0.07 * 100 is 7.000000000000001 in binary: rank 7, not 8. */
	EXPECT_EQ(nearest_rank(0.07, 100), 7u);
	EXPECT_EQ(nearest_rank(0.99, 100), 99u);
	EXPECT_EQ(nearest_rank(0.999, 1000), 999u);
	EXPECT_EQ(nearest_rank(0.5, 2), 1u);
	EXPECT_EQ(nearest_rank(0.5, 3), 2u);
	EXPECT_EQ(nearest_rank(0.0, 10), 1u);
	EXPECT_EQ(nearest_rank(1.0, 10), 10u);
	std::vector<double> v;
	for (int i = 1; i <= 100; i++)
		v.push_back(i);
	EXPECT_EQ(percentile(v, 0.07), 7.0);
	EXPECT_EQ(percentile(v, 0.5), 50.0);
	EXPECT_EQ(percentile(v, 0.99), 99.0);
	EXPECT_EQ(percentile(v, 1.0), 100.0);
}

/* Values below 16 ns have a bucket each: there the histogram and the
 * sorted vector must give the same quantile, for any mix. */
TEST(LatencyHist, HistogramAgreesWithSortedSamples)
{
	std::mt19937 rng(7);
	for (int round = 0; round < 200; round++) {
		const unsigned n = 1 + rng() % (round < 100 ? 6 : 300);
		std::vector<uint64_t> s;
		for (unsigned i = 0; i < n; i++)
			s.push_back(rng() % 16);
		auto h = hist_of(s);
		std::sort(s.begin(), s.end());
		ASSERT_EQ(h->count(), n);
		for (double q : {0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0})
			EXPECT_EQ(h->quantile_ns(q), percentile(s, q)) << "n " << n << " q " << q;
	}
}

TEST(LatencyHist, CsvCountsEverySample)
{
	auto h = hist_of({3, 3, 1000, 1001, 5000});
	char path[] = "/tmp/rdgram-test-hist-XXXXXX";
	const int fd = mkstemp(path);
	ASSERT_GE(fd, 0);
	close(fd);
	ASSERT_EQ(rdgram::apps::write_hist_csv(*h, path), 0);
	std::ifstream in(path);
	std::string line;
	std::getline(in, line);
	EXPECT_EQ(line, "lower_ns,count,cumulative_fraction");
	std::vector<std::string> rows;
	while (std::getline(in, line))
		rows.push_back(line);
	unlink(path);
	/* From the first non-empty bucket (3) to the last (4864 <= 5000). */
	ASSERT_FALSE(rows.empty());
	EXPECT_EQ(rows.front(), "3,2,0.400000");
	EXPECT_EQ(rows.back(), "4864,1,1.000000");
	uint64_t total = 0;
	for (const auto &r : rows)
		total += std::stoull(r.substr(r.find(',') + 1));
	EXPECT_EQ(total, 5u);
	EXPECT_EQ(rdgram::apps::write_hist_csv(*h, "/nonexistent-dir/h.csv"), ENOENT);
}

TEST(LatencyHist, PlotRefusals)
{
	std::string err;
	EXPECT_EQ(rdgram::apps::plot_hist("/tmp/h.csv", "/tmp/h.pdf", "t", &err), EINVAL);
	EXPECT_NE(err.find(".svg or .png"), std::string::npos) << err;
	err.clear();
	EXPECT_EQ(rdgram::apps::plot_hist("/tmp/it's.csv", "/tmp/h.svg", "t", &err), EINVAL);
	EXPECT_NE(err.find("single quote"), std::string::npos) << err;
}

} // namespace
