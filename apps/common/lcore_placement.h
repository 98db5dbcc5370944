/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * Where the lcores of one rank go when a launcher (mpirun, srun) starts
 * several ranks on one host: each rank knows its local rank and the local
 * size (PMIx: PMIX_LOCAL_RANK, PMIX_LOCAL_SIZE) and the CPUs its task may
 * use (sched_getaffinity(2)), and places its lcores so that local ranks do
 * not share a CPU while the CPUs suffice. Every rank gets the same EAL
 * arguments (`-l 0,1`); without this, every rank pins the same CPUs.
 *
 * Control path, before the EAL starts (main thread; plan_lcores is a pure
 * function, thread safe).
 */
#ifndef RDGRAM_APPS_LCORE_PLACEMENT_H
#define RDGRAM_APPS_LCORE_PLACEMENT_H

#include <string>
#include <vector>

namespace rdgram::apps {

/* Linux's CPU list syntax ("0-3,8,10-11": /sys/devices/system/cpu/online,
 * cpuset.cpus, the EAL's -l). The CPUs sorted, each once; false on a
 * malformed list or a CPU id above 65535. */
bool parse_cpu_list(const std::string &s, std::vector<unsigned> *cpus);
/* The reverse: sorted CPUs as "0-3,8"; "" for none. */
std::string format_cpu_list(const std::vector<unsigned> &cpus);

/* One rank's lcores on CPUs. */
struct lcore_plan {
	std::vector<unsigned> cpus; /* cpus[j]: the CPU of the rank's j-th lcore */
	bool shared = false;        /* a CPU here carries another local rank's lcore too
				     * (or two of this rank's) */
};

/* Where the `lcores` lcores of local rank `local_rank` (of `local_size`)
 * go among `allowed` (sorted CPU ids, the same set for every local rank):
 *   CPUs suffice (allowed.size() >= lcores * local_size): local rank i
 *     takes the block allowed[i * lcores, (i + 1) * lcores): no CPU is
 *     shared;
 *   they do not: lcore j of local rank i on allowed[(i + j) % n]: for
 *     each j the local ranks' j-th lcores spread evenly over the n CPUs
 *     (the poll lcores of 8 ranks on 2 CPUs: 4 on each), and one rank's
 *     lcores are on distinct CPUs while lcores <= n; shared is set.
 * local_size 0 or local_rank >= local_size is taken as one rank alone;
 * allowed empty gives an empty plan. */
lcore_plan plan_lcores(const std::vector<unsigned> &allowed, unsigned lcores, unsigned local_rank,
		       unsigned local_size);

/* The CPUs of this task: sched_getaffinity(2). */
std::vector<unsigned> task_cpus();
/* The CPUs the calling thread may run on, as a CPU list ("1", "0-3"): what
 * its binding really is (sched_getaffinity(0) of the thread itself). */
std::string this_thread_cpus();
/* The CPUs this process could have at most: the online CPUs
 * (/sys/devices/system/cpu/online) within its cgroup's cpuset (v2
 * cpuset.cpus.effective, v1 cpuset.effective_cpus) where one is readable.
 * A task whose affinity is narrower was bound by its launcher. */
std::vector<unsigned> host_cpus();

/* Rewrites one rank's EAL arguments for its place on the host. The lcores
 * `-l LIST` names (2, lcores 0 and 1, when no lcore option is given) keep
 * their ids and move to the CPUs plan_lcores picks: the option becomes
 * `--lcores ID@CPU,...`. task is the task's CPUs (task_cpus()), host
 * what it could have (host_cpus()):
 *   task == host (the launcher did not bind it, as srun with task/none or
 *     mpirun --bind-to none): placed among task by local rank;
 *   task narrower (bound by the launcher, e.g. mpirun's default
 *     --bind-to core): placed on task alone (local rank 0 of 1), so the
 *     EAL stays within the launcher's binding; with no lcore option the
 *     arguments stay as they are (the EAL then takes the task's CPUs).
 * Left alone, *line saying why: --lcores or -c given (the user mapped
 * lcores to CPUs), local rank unknown (local_rank < 0). Returns false
 * with *line the reason when -l is malformed. *line is one line starting
 * "placement: " for the app to print. */
bool place_eal_lcores(std::vector<std::string> *eal, int local_rank, int local_size,
		      const std::vector<unsigned> &task, const std::vector<unsigned> &host, std::string *line);

} // namespace rdgram::apps

#endif
