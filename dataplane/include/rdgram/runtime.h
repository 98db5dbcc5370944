/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Runtime: EAL start-up with DPDK's convention for apps (EAL arguments, then
 * "--", then the app's own), container-friendly defaults, hwloc placement of
 * poll threads on the device's NUMA node, the control thread, and the QSBR
 * variable poll threads report quiescence to.
 */
#ifndef RDGRAM_RUNTIME_H
#define RDGRAM_RUNTIME_H

#include <string>
#include <vector>

#include <hwloc.h>
#include <rte_rcu_qsbr.h>

#include "rdgram/control.h"

namespace rdgram {

/* Splits argv at the first "--": before it, EAL arguments; after, the app's.
 * With no "--", every argument is the app's and the EAL gets defaults. */
struct split_args {
	std::vector<std::string> eal;
	std::vector<std::string> app;
	bool eal_given = false;
};
split_args split_command_line(int argc, char **argv);

/* Live capture (DPDK's pdump, e.g. dpdk-dumpcap as a secondary process):
 * off:  the container defaults below, no shared EAL configuration;
 * auto: a shared configuration on hugepages when they can be had, else off
 *       with the reason;
 * on:   a shared configuration on hugepages, or the runtime refuses to
 *       start (with the reason). */
enum class capture_mode { off, automatic, on };
/* "off", "auto" or "on": 0, or EINVAL. */
int parse_capture_mode(const std::string &name, capture_mode *m);

/* The default EAL arguments and what they allow. */
struct eal_defaults {
	std::vector<std::string> args;
	bool shared = false;    /* hugepages in a hugetlbfs mount, shared configuration */
	std::string why_not;    /* !shared: why (one clause, e.g. "no hugetlbfs mount") */
};

/* EAL arguments that run in a container: every CPU this process may use as
 * an lcore, no PCI scan, a private --file-prefix (rdgram-<pid>), and
 *   shared (capture auto/on, hugepages_for_capture): hugepages in the
 *     mount, memory taken as needed up to mem_mb per NUMA node
 *     (--socket-limit), and a shared configuration secondaries attach to;
 *   else hugepages only when some are free, --in-memory (private), or
 *     --no-huge with -m mem_mb and --no-shconf (DPDK 22.11 refuses
 *     --in-memory together with --no-huge);
 * quiet: eal_quiet_log_args. */
eal_defaults default_eal_setup(unsigned mem_mb, const std::string &lcores, bool quiet, capture_mode capture);
/* default_eal_setup(..., capture_mode::off).args */
std::vector<std::string> default_eal_args(unsigned mem_mb = 512, const std::string &lcores = "",
					  bool quiet = true);
/* True when a primary can start with a shared configuration on hugepages:
 * a hugetlbfs mount this process may write (its directory in *dir), whose
 * page size has at least need_mb of free pages. Else false, with the
 * reason in *why. */
bool hugepages_for_capture(unsigned need_mb, std::string *dir, std::string *why);
/* Whether explicit EAL arguments leave a shared configuration on
 * hugepages (no --no-huge, --in-memory or --no-shconf): else false with
 * the option that rules it out in *why. */
bool eal_args_allow_capture(const std::vector<std::string> &args, std::string *why);

/* The EAL options that keep DPDK's start-up quiet: its libraries and PMDs
 * at WARNING (the EAL's "Detected CPU lcores", the CRC library's handler
 * choice, PMD notices are INFO), and the telemetry library at ERROR (its
 * one start-up line, "No legacy callbacks, legacy socket not created", is
 * a WARNING that says nothing is wrong). The specific pattern comes first:
 * a log type registered after these options are parsed (telemetry's)
 * takes the level of the first pattern it matches. rdgram's own types
 * (rdgram.*) stay at INFO. */
std::vector<std::string> eal_quiet_log_args();
/* True when args hold an EAL --log-level option (either spelling). */
bool has_eal_log_level(const std::vector<std::string> &args);

/* True when the system has at least one free hugepage of any size. */
bool hugepages_available();

/* Poll-core placement from an hwloc topology: of the candidate lcores
 * (lcore id -> OS cpu), those whose CPU lies in NUMA node numa_node come
 * first, in order, then the rest. numa_node < 0 means "no preference". */
struct lcore_cpu {
	unsigned lcore;
	unsigned cpu;
};
std::vector<lcore_cpu> order_by_numa(hwloc_topology_t topo, int numa_node,
				     const std::vector<lcore_cpu> &candidates);
/* The OS CPU an lcore runs on: the first of its EAL cpuset
 * (rte_lcore_cpuset), which --lcores 1@3 makes CPU 3. Not
 * rte_lcore_to_cpu_id: that is the topology's core id of CPU <lcore>.
 * The lcore id itself when the set is empty. (Any thread, after EAL init.) */
unsigned lcore_os_cpu(unsigned lcore);
/* NUMA node (hwloc logical index... os index) of an OS cpu, or -1. */
int numa_of_cpu(hwloc_topology_t topo, unsigned cpu);
/* Where the NUMA-local AV replicas go: the distinct NUMA nodes (OS index,
 * which is DPDK's socket id on Linux) of the poll lcores, in the order the
 * lcores are given; a CPU without a node maps to -1 (SOCKET_ID_ANY). */
std::vector<int> replica_nodes(hwloc_topology_t topo, const std::vector<lcore_cpu> &poll);

class runtime {
public:
	runtime() = default;
	runtime(const runtime &) = delete;
	runtime &operator=(const runtime &) = delete;
	~runtime();

	/* Initializes the EAL (from eal_args, or defaults when empty), hwloc and
	 * the QSBR variable, and starts the control thread. Returns 0, or an
	 * errno value with a message in error(). */
	int init(const std::vector<std::string> &eal_args, const char *prog,
		 const std::string &default_lcores = "");
	/* Before init: off (the default), auto or on (capture_mode). With a
	 * shared configuration init also starts DPDK's pdump server
	 * (rte_pdump_init) and fini stops it. */
	void set_capture(capture_mode m) { capture_ = m; }
	/* After init: true when a secondary (dpdk-dumpcap) can capture from
	 * this process's ports; else capture_why() says why not. */
	bool capture_ready() const { return pdump_up_; }
	const std::string &capture_why() const { return capture_why_; }
	/* After init: the EAL's --file-prefix ("rdgram-<pid>" by default). */
	std::string file_prefix() const;
	/* Before init: false (the default) starts the EAL quietly, with
	 * eal_quiet_log_args ahead of eal_args, unless they hold a --log-level
	 * of their own (then the caller's levels stand); true leaves DPDK's
	 * log levels at its own defaults (every start-up line). */
	void set_verbose(bool v) { verbose_ = v; }
	void fini();

	/* The lcores (main included) ordered for a device on numa_node. */
	std::vector<lcore_cpu> poll_lcores(int numa_node) const;
	/* Binds the calling thread to one CPU with hwloc. 0 or errno. */
	int bind_this_thread(unsigned cpu) const;

	control_thread &ctl() { return ctl_; }
	rte_rcu_qsbr *qsbr() const { return qs_; }
	hwloc_topology_t topology() const { return topo_; }
	const std::string &error() const { return err_; }
	const std::vector<std::string> &eal_args() const { return eal_args_; }

private:
	bool eal_up_ = false;
	bool verbose_ = false;
	bool pdump_up_ = false;
	capture_mode capture_ = capture_mode::off;
	std::string capture_why_;
	hwloc_topology_t topo_ = nullptr;
	rte_rcu_qsbr *qs_ = nullptr;
	control_thread ctl_;
	std::string err_;
	std::vector<std::string> eal_args_;
};

/* Runs f(arg) on a worker lcore (rte_eal_remote_launch) and waits for it
 * (rte_eal_wait_lcore). Same semantics; in TSan builds the launch and the
 * join are also announced to TSan, which cannot see the EAL's own hand-off. */
int launch_on_lcore(int (*f)(void *), void *arg, unsigned lcore);
int wait_on_lcore(unsigned lcore);

/* Poll thread registration with the runtime's QSBR variable (thread id =
 * lcore id). Quiescent-state reports are a store each: no syscall. */
inline void poll_thread_online(rte_rcu_qsbr *qs, unsigned tid)
{
	rte_rcu_qsbr_thread_register(qs, tid);
	rte_rcu_qsbr_thread_online(qs, tid);
}
/* Offline, but still registered: a writer's grace-period check then reads
 * this thread's counter (an acquire load pairing with the offline's release
 * store, both inline in rte_rcu_qsbr.h) instead of skipping an unregistered
 * thread, which it does inside librte_rcu where ThreadSanitizer cannot see
 * the ordering. Registering again is a no-op; an offline thread never
 * delays a grace period. */
inline void poll_thread_offline(rte_rcu_qsbr *qs, unsigned tid)
{
	rte_rcu_qsbr_thread_offline(qs, tid);
}

} // namespace rdgram

#endif
