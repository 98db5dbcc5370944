/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Progress of a running rdgram-perf: what the poll threads publish while
 * they run (messages done, a latency histogram, their QP counters through
 * telemetry::qp_publisher), the status line the control thread prints from
 * it every --status-interval, and the histogram's CSV and gnuplot plot.
 *
 * The poll threads only store: single-writer relaxed atomics (a load and a
 * store, no read-modify-write, no syscall), read by the control thread. A
 * status line is therefore approximate by the few samples in flight; the
 * final tables are computed from the poll threads' own data after they
 * stopped.
 */
#ifndef RDGRAM_PERF_STATUS_H
#define RDGRAM_PERF_STATUS_H

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include <rte_cycles.h>

#include "rdgram/telemetry.h"

namespace rdgram::perf {

/*
 * Log-linear latency histogram in nanoseconds (HDR-style): values below 16
 * have a bucket each; above, every power of two is split into 16 buckets,
 * so a bucket is at most 6.25% of its value wide. 640 buckets reach ~2^40
 * ns (18 minutes); anything above lands in the last one. (record: one
 * writer thread; everything else: any thread.)
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
	/* The lower bound of the bucket holding quantile q (0 when empty). */
	uint64_t quantile_ns(double q) const
	{
		uint64_t tot = 0;
		for (unsigned i = 0; i < nbuckets; i++)
			tot += at(i);
		if (tot == 0)
			return 0;
		const uint64_t rank = std::max<uint64_t>(1, uint64_t(q * double(tot) + 0.999999));
		uint64_t cum = 0;
		for (unsigned i = 0; i < nbuckets; i++) {
			cum += at(i);
			if (cum >= rank)
				return lower_of(i);
		}
		return lower_of(nbuckets - 1);
	}

private:
	std::atomic<uint64_t> b_[nbuckets]{};
	std::atomic<uint64_t> n_{0};
};

/* What the client poll thread publishes for the status line. */
struct progress {
	enum : int { idle = 0, lat = 1, bw = 2 };
	std::atomic<int> phase{idle};
	std::atomic<uint64_t> done{0}; /* data messages of the current phase */
	latency_hist hist;             /* lat: RTT/2 per measured iteration */
};

/* Hooks the poll loops call (loop_env::hooks; nullptr: none). */
struct loop_hooks {
	progress *prog = nullptr;                 /* client only */
	telemetry::qp_publisher *pub = nullptr;   /* this loop's QP */
};

/* Writes the histogram as CSV: lower_ns,count,cumulative_fraction, one
 * line per bucket from the first non-empty to the last. 0 or errno. */
inline int write_hist_csv(const latency_hist &h, const std::string &path)
{
	FILE *f = fopen(path.c_str(), "w");
	if (f == nullptr)
		return errno;
	unsigned lo = latency_hist::nbuckets, hi = 0;
	uint64_t tot = 0;
	for (unsigned i = 0; i < latency_hist::nbuckets; i++)
		if (h.at(i) != 0) {
			lo = std::min(lo, i);
			hi = i;
			tot += h.at(i);
		}
	fprintf(f, "lower_ns,count,cumulative_fraction\n");
	uint64_t cum = 0;
	for (unsigned i = lo; tot != 0 && i <= hi; i++) {
		cum += h.at(i);
		fprintf(f, "%lu,%lu,%.6f\n", (unsigned long)latency_hist::lower_of(i), (unsigned long)h.at(i),
			double(cum) / double(tot));
	}
	const int rc = ferror(f) ? EIO : 0;
	return fclose(f) != 0 && rc == 0 ? errno : rc;
}

/* Runs gnuplot on the CSV to draw out (.svg or .png by its suffix).
 * 0; ENOENT with a message when gnuplot is not installed; EINVAL for
 * another suffix; EIO when gnuplot failed. */
inline int plot_hist(const std::string &csv, const std::string &out, const std::string &title, std::string *err)
{
	auto ends = [&](const char *s) {
		const size_t n = strlen(s);
		return out.size() >= n && out.compare(out.size() - n, n, s) == 0;
	};
	const char *term = ends(".svg") ? "svg size 900,500 dynamic background rgb 'white'"
			   : ends(".png") ? "pngcairo size 900,500"
					  : nullptr;
	if (term == nullptr) {
		*err = "--hist-plot wants a file ending in .svg or .png: " + out;
		return EINVAL;
	}
	if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
		*err = "gnuplot is not installed (Debian: apt-get install gnuplot-nox); the CSV " + csv +
		       " was written, the plot was not";
		return ENOENT;
	}
	const std::string script = "/tmp/rdgram-perf-plot." + std::to_string(getpid()) + ".gp";
	FILE *f = fopen(script.c_str(), "w");
	if (f == nullptr) {
		*err = "cannot write " + script + ": " + strerror(errno);
		return errno;
	}
	/* Paths go in single quotes: refuse ones that contain one. */
	if (csv.find('\'') != std::string::npos || out.find('\'') != std::string::npos) {
		fclose(f);
		unlink(script.c_str());
		*err = "plot paths must not contain a single quote";
		return EINVAL;
	}
	fprintf(f,
		"set terminal %s\n"
		"set output '%s'\n"
		"set datafile separator ','\n"
		"set title '%s'\n"
		"set xlabel 'RTT/2 latency (ns, bucket lower bound, log scale)'\n"
		"set ylabel 'samples'\n"
		"set y2label 'cumulative fraction'\n"
		"set logscale x\n"
		"set y2range [0:1]\n"
		"set ytics nomirror\n"
		"set y2tics 0.1\n"
		"set grid\n"
		"set key center right\n"
		"plot '%s' using 1:2 skip 1 with impulses lw 3 title 'samples per bucket', \\\n"
		"     '%s' using 1:3 skip 1 axes x1y2 with steps lw 2 title 'cumulative'\n",
		term, out.c_str(), title.c_str(), csv.c_str(), csv.c_str());
	fclose(f);
	const std::string cmd = "gnuplot '" + script + "' 2>&1";
	const int rc = system(cmd.c_str());
	unlink(script.c_str());
	if (rc != 0 || access(out.c_str(), F_OK) != 0) {
		*err = "gnuplot failed (exit " + std::to_string(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1) + ")";
		return EIO;
	}
	return 0;
}

} // namespace rdgram::perf

#endif
