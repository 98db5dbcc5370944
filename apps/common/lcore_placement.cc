/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * A rank's lcores among its task's CPUs (lcore_placement.h).
 */
#include "lcore_placement.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace rdgram::apps {

namespace {

bool parse_cpu(const std::string &s, unsigned *v)
{
	if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos)
		return false;
	const unsigned long x = strtoul(s.c_str(), nullptr, 10);
	if (x > 65535)
		return false;
	*v = unsigned(x);
	return true;
}

std::string read_line(const std::string &path)
{
	std::ifstream f(path);
	std::string s;
	if (f)
		std::getline(f, s);
	return s;
}

/* The cpuset of this process's cgroup, or "" where none is readable. */
std::string cgroup_cpuset()
{
	std::ifstream f("/proc/self/cgroup");
	std::string l;
	while (std::getline(f, l)) {
		/* "0::/path" (v2) or "N:cpuset:/path" (v1). */
		const size_t a = l.find(':'), b = a == std::string::npos ? a : l.find(':', a + 1);
		if (b == std::string::npos)
			continue;
		const std::string ctl = l.substr(a + 1, b - a - 1), path = l.substr(b + 1);
		std::string s;
		if (ctl.empty())
			s = read_line("/sys/fs/cgroup" + path + "/cpuset.cpus.effective");
		else if (ctl == "cpuset")
			s = read_line("/sys/fs/cgroup/cpuset" + path + "/cpuset.effective_cpus");
		if (!s.empty())
			return s;
	}
	return "";
}

std::string join(const std::vector<unsigned> &v)
{
	std::string s;
	for (size_t i = 0; i < v.size(); i++) {
		if (i)
			s += ',';
		s += std::to_string(v[i]);
	}
	return s;
}

} // namespace

bool parse_cpu_list(const std::string &s, std::vector<unsigned> *cpus)
{
	cpus->clear();
	std::stringstream in(s);
	std::string item;
	while (std::getline(in, item, ',')) {
		const size_t dash = item.find('-');
		unsigned lo, hi;
		if (dash == std::string::npos) {
			if (!parse_cpu(item, &lo))
				return false;
			hi = lo;
		} else if (!parse_cpu(item.substr(0, dash), &lo) || !parse_cpu(item.substr(dash + 1), &hi) || hi < lo) {
			return false;
		}
		for (unsigned c = lo; c <= hi; c++)
			cpus->push_back(c);
	}
	if (cpus->empty() || (!s.empty() && s.back() == ','))
		return false;
	std::sort(cpus->begin(), cpus->end());
	cpus->erase(std::unique(cpus->begin(), cpus->end()), cpus->end());
	return true;
}

std::string format_cpu_list(const std::vector<unsigned> &cpus)
{
	std::string s;
	for (size_t i = 0; i < cpus.size();) {
		size_t j = i;
		while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
			j++;
		if (!s.empty())
			s += ',';
		s += std::to_string(cpus[i]);
		if (j > i) {
			s += '-';
			s += std::to_string(cpus[j]);
		}
		i = j + 1;
	}
	return s;
}

lcore_plan plan_lcores(const std::vector<unsigned> &allowed, unsigned lcores, unsigned local_rank,
		       unsigned local_size)
{
	lcore_plan p;
	const size_t n = allowed.size();
	if (n == 0 || lcores == 0)
		return p;
	if (local_size == 0 || local_rank >= local_size)
		local_rank = 0, local_size = 1;
	if (n >= size_t(lcores) * local_size) {
		for (unsigned j = 0; j < lcores; j++)
			p.cpus.push_back(allowed[size_t(local_rank) * lcores + j]);
		return p;
	}
	p.shared = true;
	for (unsigned j = 0; j < lcores; j++)
		p.cpus.push_back(allowed[(size_t(local_rank) + j) % n]);
	return p;
}

std::vector<unsigned> task_cpus()
{
	std::vector<unsigned> v;
	cpu_set_t s;
	CPU_ZERO(&s);
	if (sched_getaffinity(0, sizeof(s), &s) != 0)
		return v;
	for (unsigned c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &s))
			v.push_back(c);
	return v;
}

std::string this_thread_cpus()
{
	return format_cpu_list(task_cpus());
}

std::vector<unsigned> host_cpus()
{
	std::vector<unsigned> online, set, both;
	if (!parse_cpu_list(read_line("/sys/devices/system/cpu/online"), &online))
		return task_cpus();
	if (!parse_cpu_list(cgroup_cpuset(), &set))
		return online;
	std::set_intersection(online.begin(), online.end(), set.begin(), set.end(), std::back_inserter(both));
	return both;
}

bool place_eal_lcores(std::vector<std::string> *eal, int local_rank, int local_size,
		      const std::vector<unsigned> &task, const std::vector<unsigned> &host, std::string *line)
{
	/* Where the lcore option is: -l LIST, -lLIST, --lcores, -c MASK. */
	std::vector<std::string> &a = *eal;
	size_t at = a.size(), len = 0;
	std::string list;
	for (size_t i = 0; i < a.size(); i++) {
		if (a[i] == "--lcores" || a[i].rfind("--lcores=", 0) == 0 || a[i] == "-c" ||
		    (a[i].rfind("-c", 0) == 0 && a[i].size() > 2 && a[i][2] != '-')) {
			*line = "placement: the EAL's lcores mapped by " + a[i].substr(0, a[i][1] == '-' ? 8 : 2) +
				", as given";
			return true;
		}
		if (a[i] == "-l" && i + 1 < a.size()) {
			at = i, len = 2, list = a[i + 1];
		} else if (a[i].rfind("-l", 0) == 0 && a[i].size() > 2) {
			at = i, len = 1, list = a[i].substr(2);
		}
	}
	if (local_rank < 0) {
		*line = "placement: no local rank (this bootstrap does not give one): lcores as given";
		return true;
	}
	std::vector<unsigned> ids;
	if (at == a.size()) {
		ids = {0, 1};
	} else if (!parse_cpu_list(list, &ids)) {
		*line = "placement: -l " + list + ": expected a list of lcore ids such as 0,1 or 0-3";
		return false;
	}
	if (task.empty()) {
		*line = "placement: sched_getaffinity gave no CPUs: lcores as given";
		return true;
	}
	const bool bound = task.size() < host.size();
	if (bound && at == a.size()) {
		*line = "placement: bound by the launcher to CPUs " + format_cpu_list(task) +
			": the EAL takes them (no -l)";
		return true;
	}
	const unsigned lsize = bound ? 1 : unsigned(std::max(local_size, 1));
	const unsigned lrank = bound ? 0 : unsigned(local_rank);
	const lcore_plan p = plan_lcores(task, unsigned(ids.size()), lrank, lsize);
	std::string map;
	for (size_t j = 0; j < ids.size(); j++)
		map += (j ? "," : "") + std::to_string(ids[j]) + "@" + std::to_string(p.cpus[j]);
	if (len == 2)
		a.erase(a.begin() + long(at), a.begin() + long(at) + 2);
	else if (len == 1)
		a.erase(a.begin() + long(at));
	a.insert(a.begin() + long(std::min(at, a.size())), {"--lcores", map});

	std::string s = "placement: local rank " + std::to_string(local_rank) + " of " + std::to_string(local_size);
	if (bound)
		s += ", bound by the launcher to CPUs " + format_cpu_list(task);
	else
		s += ", the task's CPUs " + format_cpu_list(task) + " (every local rank's)";
	s += ": lcore" + std::string(ids.size() > 1 ? "s " : " ") + join(ids) + " on CPU" +
	     (ids.size() > 1 ? "s " : " ") + join(p.cpus) + "; ";
	if (bound)
		s += p.shared ? "more lcores than CPUs: they share" : "its own CPUs";
	else if (p.shared)
		s += std::to_string(ids.size() * lsize) + " lcores on " + std::to_string(task.size()) +
		     " CPUs: local ranks share CPUs";
	else
		s += "no CPU shared with another local rank";
	*line = s;
	return true;
}

} // namespace rdgram::apps
