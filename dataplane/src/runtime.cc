/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "rdgram/runtime.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <sched.h>
#include <unistd.h>

#include <rte_cpuflags.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_net_crc.h>

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

std::vector<std::string> default_eal_args(unsigned mem_mb, const std::string &lcores, bool quiet)
{
	std::vector<std::string> a;
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
	if (!list.empty()) {
		a.push_back("-l");
		a.push_back(list);
	}
	a.push_back("--no-pci");
	a.push_back("--file-prefix=rdgram-" + std::to_string(getpid()));
	if (hugepages_available()) {
		a.push_back("--in-memory");
	} else {
		a.push_back("--no-huge");
		a.push_back("--no-shconf");
		a.push_back("-m");
		a.push_back(std::to_string(mem_mb));
	}
	if (quiet)
		for (auto &o : eal_quiet_log_args())
			a.push_back(std::move(o));
	return a;
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
	eal_args_ = eal_args.empty() ? default_eal_args(512, default_lcores, !verbose_) : eal_args;
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
		/* DPDK leaves its runtime directory (telemetry socket, config)
		 * behind; remove ours, named rdgram-*, so runs do not pile up. */
		std::string dir = rte_eal_get_runtime_dir();
		rte_eal_cleanup();
		eal_up_ = false;
		const size_t slash = dir.rfind('/');
		if (dir.compare(slash + 1, 7, "rdgram-") == 0) {
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
