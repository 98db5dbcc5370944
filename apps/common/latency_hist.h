/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Latency figures of the apps: a log-linear histogram a poll thread records
 * into while another thread reads it (rdgram-perf's RTT/2, rdgram-mcast's
 * one-way latency), its CSV and gnuplot plot, and the percentile of a
 * sorted vector of samples (rdgram-coll's per-collective times, rdgram-ah's
 * readiness). Both percentiles follow one definition, the nearest rank:
 * the q-quantile of n samples is the ceil(q * n)-th smallest (at least the
 * first), so p50 of two samples is the smaller and p100 the largest.
 */
#ifndef RDGRAM_APPS_LATENCY_HIST_H
#define RDGRAM_APPS_LATENCY_HIST_H

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace rdgram::apps {

/* The 1-based nearest rank of quantile q (0 <= q <= 1) among n > 0
 * samples: ceil(q * n), clamped to [1, n]. The product is rounded down
 * first within 1e-6 of an integer: 0.07 * 100 is 7.000000000000001 in
 * binary and must give rank 7, not 8. (Any thread.) */
inline uint64_t nearest_rank(double q, uint64_t n)
{
	const uint64_t r = uint64_t(q * double(n) + 0.999999);
	return std::clamp<uint64_t>(r, 1, n);
}

/* The nearest-rank q-quantile of samples sorted ascending; T{} when there
 * are none. (Any thread.) */
template <typename T>
T percentile(const std::vector<T> &sorted, double q)
{
	return sorted.empty() ? T{} : sorted[nearest_rank(q, sorted.size()) - 1];
}

/*
 * Log-linear latency histogram in nanoseconds (HDR-style): values below 16
 * have a bucket each; above, every power of two is split into 16 buckets,
 * so a bucket is at most 6.25% of its value wide. 640 buckets reach ~2^40
 * ns (18 minutes); anything above lands in the last one. The poll thread
 * only stores: single-writer relaxed atomics (a load and a store, no
 * read-modify-write, no syscall), so a reader on another thread sees it
 * approximate by the few samples in flight.
 * (record: one writer thread; everything else: any thread.)
 */
class latency_hist {
public:
	static constexpr unsigned sub_bits = 4, sub = 1u << sub_bits, nbuckets = 640;

	static unsigned bucket_of(uint64_t ns)
	{
		if (ns < sub)
			return unsigned(ns);
		const unsigned e = 63u - unsigned(__builtin_clzll(ns)); /* >= sub_bits */
		const unsigned shift = e - sub_bits;
		const unsigned b = (shift + 1) * sub + unsigned(ns >> shift) - sub;
		return b < nbuckets ? b : nbuckets - 1;
	}
	/* The smallest value of bucket b. */
	static uint64_t lower_of(unsigned b)
	{
		if (b < sub)
			return b;
		const unsigned shift = b / sub - 1;
		return uint64_t(sub + b % sub) << shift;
	}

	/* (The writer thread.) */
	void record(uint64_t ns)
	{
		auto &c = b_[bucket_of(ns)];
		c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
		n_.store(n_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
	}
	uint64_t count() const { return n_.load(std::memory_order_relaxed); }
	uint64_t at(unsigned b) const { return b_[b].load(std::memory_order_relaxed); }
	/* The lower bound of the bucket holding the nearest-rank q-quantile
	 * (0 when empty): exact below 16 ns, at most 6.25% low above. */
	uint64_t quantile_ns(double q) const;

private:
	std::atomic<uint64_t> b_[nbuckets]{};
	std::atomic<uint64_t> n_{0};
};

/* Writes the histogram as CSV: lower_ns,count,cumulative_fraction, one
 * line per bucket from the first non-empty to the last. 0 or errno.
 * (Any thread; the control path.) */
int write_hist_csv(const latency_hist &h, const std::string &path);

/* Runs gnuplot on that CSV to draw out (.svg or .png by its suffix), the
 * x axis in ns on a log scale, title on top. 0; ENOENT with a message when
 * gnuplot is not installed; EINVAL for another suffix or a path with a
 * single quote; EIO when gnuplot failed. (Any thread; the control path.) */
int plot_hist(const std::string &csv, const std::string &out, const std::string &title, std::string *err);

} // namespace rdgram::apps

#endif
