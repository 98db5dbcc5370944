/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "rdgram/runtime.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <csignal>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <sched.h>
#include <sstream>
#include <sys/file.h>
#include <unistd.h>

#include <rte_cpuflags.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_net_crc.h>
#include <rte_pdump.h>

#include "rdgram/cpu_isa.h"
#include "rdgram/log.h"
#include "rdgram/tsan.h"

namespace rdgram {

void register_tsan_mempool(); /* tsan_mempool.cc */

split_args split_command_line(int argc, char **argv)
{
	split_args s;
	int dd = -1;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			dd = i;
			break;
		}
	if (dd < 0) {
		for (int i = 1; i < argc; i++)
			s.app.emplace_back(argv[i]);
		return s;
	}
	s.eal_given = true;
	for (int i = 1; i < dd; i++)
		s.eal.emplace_back(argv[i]);
	for (int i = dd + 1; i < argc; i++)
		s.app.emplace_back(argv[i]);
	return s;
}

bool hugepages_available()
{
	DIR *d = opendir("/sys/kernel/mm/hugepages");
	if (d == nullptr)
		return false;
	bool any = false;
	while (dirent *e = readdir(d)) {
		if (strncmp(e->d_name, "hugepages-", 10) != 0)
			continue;
		std::ifstream f(std::string("/sys/kernel/mm/hugepages/") + e->d_name + "/free_hugepages");
		long n = 0;
		if (f >> n && n > 0)
			any = true;
	}
	closedir(d);
	return any;
}

std::vector<std::string> eal_quiet_log_args()
{
	return {"--log-level=lib.telemetry,error", "--log-level=lib.*,warning", "--log-level=pmd.*,warning"};
}

bool has_eal_log_level(const std::vector<std::string> &args)
{
	return std::any_of(args.begin(), args.end(),
			   [](const std::string &a) { return a == "--log-level" || a.starts_with("--log-level="); });
}

int parse_capture_mode(const std::string &name, capture_mode *m)
{
	if (name == "off")
		*m = capture_mode::off;
	else if (name == "auto")
		*m = capture_mode::automatic;
	else if (name == "on")
		*m = capture_mode::on;
	else
		return EINVAL;
	return 0;
}

namespace {

/* The hugetlbfs mounts of this mount namespace, in /proc/mounts order (the
 * EAL takes the first of each page size), with their page size in kB. */
struct huge_mount {
	std::string dir;
	unsigned long page_kb;
};

unsigned long default_huge_kb()
{
	std::ifstream f("/proc/meminfo");
	std::string k;
	unsigned long v = 0;
	while (f >> k) {
		if (k == "Hugepagesize:" && f >> v)
			return v;
		f.ignore(4096, '\n');
	}
	return 0;
}

std::vector<huge_mount> hugetlbfs_mounts()
{
	std::vector<huge_mount> out;
	std::ifstream f("/proc/mounts");
	std::string line;
	while (std::getline(f, line)) {
		std::istringstream ls(line);
		std::string dev, dir, type, opts;
		if (!(ls >> dev >> dir >> type >> opts) || type != "hugetlbfs")
			continue;
		unsigned long kb = default_huge_kb();
		const size_t p = opts.find("pagesize=");
		if (p != std::string::npos) {
			char *end = nullptr;
			unsigned long v = strtoul(opts.c_str() + p + 9, &end, 10);
			kb = *end == 'G' ? v << 20 : *end == 'M' ? v << 10 : *end == 'K' ? v : v >> 10;
		}
		out.push_back({dir, kb});
	}
	return out;
}

long huge_sysfs(unsigned long kb, const char *what)
{
	std::ifstream f("/sys/kernel/mm/hugepages/hugepages-" + std::to_string(kb) + "kB/" + what);
	long n = 0;
	return f >> n ? n : 0;
}

/* The NUMA nodes the EAL sees (at least one): --socket-limit takes a value
 * per node. */
unsigned numa_node_count()
{
	unsigned n = 0;
	if (DIR *d = opendir("/sys/devices/system/node")) {
		while (dirent *e = readdir(d))
			if (strncmp(e->d_name, "node", 4) == 0 && isdigit(uint8_t(e->d_name[4])))
				n++;
		closedir(d);
	}
	return n == 0 ? 1 : n;
}

std::vector<std::string> lcore_args(const std::string &lcores)
{
	cpu_set_t cs;
	CPU_ZERO(&cs);
	std::string list;
	if (sched_getaffinity(0, sizeof(cs), &cs) == 0) {
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &cs)) {
				if (!list.empty())
					list += ',';
				list += std::to_string(c);
			}
	}
	if (!lcores.empty())
		list = lcores;
	if (list.empty())
		return {};
	return {"-l", list};
}

/* Hugepage files an rdgram primary left behind when it died (SIGKILL, a
 * crash): each holds its page until unlinked. A live primary holds a shared
 * flock(2) on every file it maps (DPDK eal_memalloc.c), so a file named
 * rdgram-<pid>map_* that is unlocked and whose process is gone is stale. */
void sweep_stale_hugefiles(const std::string &dir)
{
	DIR *d = opendir(dir.c_str());
	if (d == nullptr)
		return;
	while (dirent *e = readdir(d)) {
		unsigned long pid = 0;
		int used = 0;
		if (sscanf(e->d_name, "rdgram-%lumap_%*d%n", &pid, &used) != 1 || used == 0 ||
		    e->d_name[used] != '\0' || pid == 0)
			continue;
		if (kill(pid_t(pid), 0) == 0 || errno != ESRCH)
			continue;
		const std::string path = dir + "/" + e->d_name;
		const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			unlink(path.c_str());
		close(fd);
	}
	closedir(d);
}

/* The hugepage files this process maps (/proc/self/maps) whose name starts
 * with "<prefix>map_": rte_eal_cleanup unmaps them but leaves them in the
 * mount, each holding its page. */
std::vector<std::string> own_hugefiles(const std::string &prefix)
{
	std::vector<std::string> out;
	std::ifstream f("/proc/self/maps");
	std::string line;
	const std::string tag = "/" + prefix + "map_";
	while (std::getline(f, line)) {
		const size_t slash = line.find('/');
		if (slash == std::string::npos || line.find(tag, slash) == std::string::npos)
			continue;
		std::string path = line.substr(slash);
		if (path.ends_with(" (deleted)"))
			continue;
		if (std::find(out.begin(), out.end(), path) == out.end())
			out.push_back(std::move(path));
	}
	return out;
}

} // namespace

bool hugepages_for_capture(unsigned need_mb, std::string *dir, std::string *why)
{
	const std::vector<huge_mount> mounts = hugetlbfs_mounts();
	if (mounts.empty()) {
		const unsigned long kb = default_huge_kb();
		*why = kb != 0 && huge_sysfs(kb, "nr_hugepages") == 0
			       ? "no hugepages reserved (nr_hugepages 0) and no hugetlbfs mount"
			       : "no hugetlbfs mount";
		return false;
	}
	std::string reason;
	for (const huge_mount &m : mounts) {
		const long nr = huge_sysfs(m.page_kb, "nr_hugepages");
		const long free_pages = huge_sysfs(m.page_kb, "free_hugepages");
		const unsigned long free_mb = (unsigned long)free_pages * m.page_kb >> 10;
		std::string r;
		if (access(m.dir.c_str(), W_OK) != 0)
			r = "hugetlbfs mount " + m.dir + " is not writable";
		else if (nr == 0)
			r = "no " + std::to_string(m.page_kb) + " kB hugepages reserved (nr_hugepages 0)";
		else if (free_pages == 0)
			r = "all " + std::to_string(nr) + " hugepages of " + std::to_string(m.page_kb) + " kB are taken";
		else if (free_mb < need_mb)
			r = "only " + std::to_string(free_mb) + " MB of free hugepages, " + std::to_string(need_mb) +
			    " MB needed";
		else {
			*dir = m.dir;
			return true;
		}
		if (reason.empty())
			reason = r;
	}
	*why = reason;
	return false;
}

bool eal_args_allow_capture(const std::vector<std::string> &args, std::string *why)
{
	for (const std::string &a : args)
		if (a == "--no-huge" || a == "--in-memory" || a == "--no-shconf") {
			*why = "the EAL arguments say " + a;
			return false;
		}
	return true;
}

/* What must be free for a shared configuration: the EAL's own memzones
 * and heap and the pools of an app at its defaults (the apps take 56 to
 * 144 MB of 2 MB pages). More is taken as needed, up to mem_mb per NUMA
 * node; with less free the EAL would start and a pool fail later. */
static constexpr unsigned capture_min_mb = 160;

eal_defaults default_eal_setup(unsigned mem_mb, const std::string &lcores, bool quiet, capture_mode capture)
{
	eal_defaults d;
	std::vector<std::string> &a = d.args;
	a = lcore_args(lcores);
	a.push_back("--no-pci");
	a.push_back("--file-prefix=rdgram-" + std::to_string(getpid()));
	std::string dir;
	if (capture == capture_mode::off) {
		d.why_not = "capture off";
	} else if (hugepages_for_capture(std::min(mem_mb, capture_min_mb), &dir, &d.why_not)) {
		d.shared = true;
		sweep_stale_hugefiles(dir);
		a.push_back("--huge-dir=" + dir);
		std::string lim;
		for (unsigned n = numa_node_count(); n > 0; n--)
			lim += std::to_string(mem_mb) + (n > 1 ? "," : "");
		a.push_back("--socket-limit=" + lim);
	}
	if (!d.shared) {
		if (hugepages_available()) {
			a.push_back("--in-memory");
		} else {
			a.push_back("--no-huge");
			a.push_back("--no-shconf");
			a.push_back("-m");
			a.push_back(std::to_string(mem_mb));
		}
	}
	if (quiet)
		for (auto &o : eal_quiet_log_args())
			a.push_back(std::move(o));
	return d;
}

std::vector<std::string> default_eal_args(unsigned mem_mb, const std::string &lcores, bool quiet)
{
	return default_eal_setup(mem_mb, lcores, quiet, capture_mode::off).args;
}

std::vector<int> replica_nodes(hwloc_topology_t topo, const std::vector<lcore_cpu> &poll)
{
	std::vector<int> nodes;
	for (const lcore_cpu &lc : poll) {
		const int n = numa_of_cpu(topo, lc.cpu);
		if (std::find(nodes.begin(), nodes.end(), n) == nodes.end())
			nodes.push_back(n);
	}
	return nodes;
}

int numa_of_cpu(hwloc_topology_t topo, unsigned cpu)
{
	hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topo, cpu);
	if (pu == nullptr)
		return -1;
	hwloc_obj_t n = nullptr;
	while ((n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)) != nullptr)
		if (hwloc_bitmap_isset(n->cpuset, cpu))
			return int(n->os_index);
	return -1;
}

std::vector<lcore_cpu> order_by_numa(hwloc_topology_t topo, int numa_node,
				     const std::vector<lcore_cpu> &cands)
{
	std::vector<lcore_cpu> local, other;
	for (const auto &c : cands) {
		if (numa_node >= 0 && numa_of_cpu(topo, c.cpu) == numa_node)
			local.push_back(c);
		else
			other.push_back(c);
	}
	local.insert(local.end(), other.begin(), other.end());
	return local;
}

runtime::~runtime() { fini(); }

int runtime::init(const std::vector<std::string> &eal_args, const char *prog,
		  const std::string &default_lcores)
{
	bool shared;
	if (eal_args.empty()) {
		eal_defaults d = default_eal_setup(512, default_lcores, !verbose_, capture_);
		eal_args_ = std::move(d.args);
		shared = d.shared;
		capture_why_ = d.why_not;
	} else {
		eal_args_ = eal_args;
		shared = eal_args_allow_capture(eal_args, &capture_why_);
		if (capture_ == capture_mode::off)
			capture_why_ = "capture off";
	}
	if (capture_ == capture_mode::on && !shared) {
		err_ = "capture on: " + capture_why_;
		return ENOTSUP;
	}
	if (!verbose_ && !has_eal_log_level(eal_args_)) {
		auto q = eal_quiet_log_args();
		eal_args_.insert(eal_args_.begin(), q.begin(), q.end());
	}
	/* AVX-512 makes rte_net_crc (the ICRC) much faster on long payloads;
	 * the EAL caps SIMD width at 256 bits unless told otherwise. */
	if (eal_args.empty() && rte_cpu_get_flag_enabled(RTE_CPUFLAG_AVX512F) > 0)
		eal_args_.push_back("--force-max-simd-bitwidth=512");
	std::vector<char *> argv;
	argv.push_back(const_cast<char *>(prog));
	for (auto &s : eal_args_)
		argv.push_back(s.data());
	argv.push_back(nullptr);
	int rc = rte_eal_init(int(argv.size() - 1), argv.data());
	if (rc < 0) {
		err_ = std::string("EAL initialisation failed: ") + rte_strerror(rte_errno);
		return rte_errno ? rte_errno : EINVAL;
	}
	eal_up_ = true;
	/* DPDK's pdump server: a secondary (dpdk-dumpcap) asks it over the
	 * multi-process channel to add RX/TX callbacks that copy each burst
	 * to its ring; until then the ports have no callback. */
	if (capture_ != capture_mode::off && shared) {
		if (rte_pdump_init() == 0) {
			pdump_up_ = true;
			capture_why_.clear();
		} else {
			capture_why_ = std::string("rte_pdump_init: ") + rte_strerror(rte_errno);
			if (capture_ == capture_mode::on) {
				err_ = "capture on: " + capture_why_;
				return ENOTSUP;
			}
		}
	}
	telemetry::register_log_types();
	register_tsan_mempool();
	/* Pick the fastest CRC the CPU and the SIMD cap allow. */
	rte_net_crc_set_alg(RTE_NET_CRC_AVX512);

	if (hwloc_topology_init(&topo_) != 0 || hwloc_topology_load(topo_) != 0) {
		err_ = "hwloc topology load failed";
		return EIO;
	}
	size_t sz = rte_rcu_qsbr_get_memsize(RTE_MAX_LCORE);
	qs_ = static_cast<rte_rcu_qsbr *>(rte_zmalloc("rdgram_qsbr", sz, RTE_CACHE_LINE_SIZE));
	if (qs_ == nullptr || rte_rcu_qsbr_init(qs_, RTE_MAX_LCORE) != 0) {
		err_ = "cannot allocate the QSBR variable";
		return ENOMEM;
	}
	if (int e = ctl_.start(); e != 0) {
		err_ = std::string("cannot start the control thread: ") + strerror(e);
		return e;
	}
	RDGRAM_LOG(runtime, DEBUG, "EAL up: %u lcore(s), main lcore %u, %u NUMA node(s), hugepages %s", rte_lcore_count(),
		   rte_get_main_lcore(), rte_socket_count(), rte_eal_has_hugepages() ? "yes" : "no");
	/* The SIMD level the data path's run-time choices take (cpu_isa.h). */
	cpu_isa cap;
	if (!cpu_isa_env_cap(&cap) && getenv("RDGRAM_CPU_MAX") != nullptr)
		RDGRAM_LOG(runtime, WARNING, "RDGRAM_CPU_MAX=%s is not portable, sse, avx2 or avx512: ignored",
			   getenv("RDGRAM_CPU_MAX"));
	RDGRAM_LOG(runtime, DEBUG, "SIMD level %s (CPU %s)", cpu_isa_name(cpu_isa_max()),
		   cpu_isa_name(cpu_isa_of_cpu()));
	return 0;
}

void runtime::fini()
{
	ctl_.stop();
	if (qs_ != nullptr) {
		rte_free(qs_);
		qs_ = nullptr;
	}
	if (topo_ != nullptr) {
		hwloc_topology_destroy(topo_);
		topo_ = nullptr;
	}
	if (eal_up_) {
		if (pdump_up_) {
			rte_pdump_uninit();
			pdump_up_ = false;
		}
		/* DPDK leaves its runtime directory (telemetry socket, config)
		 * and, with a shared configuration, its hugepage files behind:
		 * remove the files this process mapped, and the directory when
		 * it is named rdgram-*, so runs do not pile up. */
		std::string dir = rte_eal_get_runtime_dir();
		const size_t slash = dir.rfind('/');
		const bool ours = dir.compare(slash + 1, 7, "rdgram-") == 0;
		const std::vector<std::string> huge = own_hugefiles(dir.substr(slash + 1));
		rte_eal_cleanup();
		eal_up_ = false;
		for (const std::string &f : huge)
			unlink(f.c_str());
		if (ours) {
			if (DIR *d = opendir(dir.c_str())) {
				while (dirent *e = readdir(d))
					if (e->d_name[0] != '.')
						unlink((dir + "/" + e->d_name).c_str());
				closedir(d);
			}
			rmdir(dir.c_str());
		}
	}
}

std::string runtime::file_prefix() const
{
	if (!eal_up_)
		return "";
	const std::string dir = rte_eal_get_runtime_dir();
	return dir.substr(dir.rfind('/') + 1);
}

unsigned lcore_os_cpu(unsigned lcore)
{
	const rte_cpuset_t set = rte_lcore_cpuset(lcore);
	for (unsigned c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			return c;
	return lcore;
}

std::vector<lcore_cpu> runtime::poll_lcores(int numa_node) const
{
	std::vector<lcore_cpu> c;
	unsigned l;
	RTE_LCORE_FOREACH(l) {
		c.push_back({l, lcore_os_cpu(l)});
	}
	return order_by_numa(topo_, numa_node, c);
}

int runtime::bind_this_thread(unsigned cpu) const
{
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	hwloc_bitmap_only(set, cpu);
	int rc = hwloc_set_cpubind(topo_, set, HWLOC_CPUBIND_THREAD | HWLOC_CPUBIND_STRICT);
	if (rc != 0)
		rc = hwloc_set_cpubind(topo_, set, HWLOC_CPUBIND_THREAD);
	const int e = rc == 0 ? 0 : errno;
	hwloc_bitmap_free(set);
	if (e != 0)
		RDGRAM_LOG(runtime, WARNING, "cannot bind a thread to CPU %u: %s (it runs unbound)", cpu, strerror(e));
	return e;
}

} // namespace rdgram

namespace rdgram {
namespace {
struct launch_slot {
	int (*f)(void *);
	void *arg;
};
launch_slot g_slots[RTE_MAX_LCORE];

int trampoline(void *p)
{
	auto *s = static_cast<launch_slot *>(p);
	RDGRAM_TSAN_ACQUIRE(s);
	int rc = s->f(s->arg);
	RDGRAM_TSAN_RELEASE(s);
	return rc;
}
} // namespace

int launch_on_lcore(int (*f)(void *), void *arg, unsigned lcore)
{
	if (lcore >= RTE_MAX_LCORE)
		return -EINVAL;
	g_slots[lcore] = launch_slot{f, arg};
	RDGRAM_TSAN_RELEASE(&g_slots[lcore]);
	return rte_eal_remote_launch(trampoline, &g_slots[lcore], lcore);
}

int wait_on_lcore(unsigned lcore)
{
	int rc = rte_eal_wait_lcore(lcore);
	if (lcore < RTE_MAX_LCORE)
		RDGRAM_TSAN_ACQUIRE(&g_slots[lcore]);
	return rc;
}

} // namespace rdgram
