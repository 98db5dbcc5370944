/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "latency_hist.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

namespace rdgram::apps {

uint64_t latency_hist::quantile_ns(double q) const
{
	/* The buckets' own sum, not count(): a reader on another thread sees
	 * both move, and the rank must be of what it walks. */
	uint64_t tot = 0;
	for (unsigned i = 0; i < nbuckets; i++)
		tot += at(i);
	if (tot == 0)
		return 0;
	const uint64_t rank = nearest_rank(q, tot);
	uint64_t cum = 0;
	for (unsigned i = 0; i < nbuckets; i++) {
		cum += at(i);
		if (cum >= rank)
			return lower_of(i);
	}
	return lower_of(nbuckets - 1);
}

int write_hist_csv(const latency_hist &h, const std::string &path)
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

int plot_hist(const std::string &csv, const std::string &out, const std::string &title, std::string *err)
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
	/* Paths and the title go in single quotes: refuse ones that contain one. */
	if (csv.find('\'') != std::string::npos || out.find('\'') != std::string::npos ||
	    title.find('\'') != std::string::npos) {
		*err = "plot paths and titles must not contain a single quote";
		return EINVAL;
	}
	if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
		*err = "gnuplot is not installed (Debian: apt-get install gnuplot-nox); the CSV " + csv +
		       " was written, the plot was not";
		return ENOENT;
	}
	const std::string script = "/tmp/rdgram-plot." + std::to_string(getpid()) + ".gp";
	FILE *f = fopen(script.c_str(), "w");
	if (f == nullptr) {
		const int e = errno;
		*err = "cannot write " + script + ": " + strerror(e);
		return e;
	}
	fprintf(f,
		"set terminal %s\n"
		"set output '%s'\n"
		"set datafile separator ','\n"
		"set title '%s'\n"
		"set xlabel 'latency (ns, bucket lower bound, log scale)'\n"
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

} // namespace rdgram::apps
