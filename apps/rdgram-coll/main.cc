/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll: the HPC collectives test over UD, on any driver.
 *
 *   rdgram-coll [EAL args --] [--driver soft|verbs|mlx5|efa] [--mode threads|procs]
 *               [--workers N] [options]
 *
 * The driver is named once (--driver, [job] driver) and the whole job is
 * a template on its device and queue type (apps/common/driver.h). On the
 * RDMA drivers every rank opens the device itself (its own context, QP and
 * AH service; threads mode: every rank on this host's device). On the
 * soft driver every rank is one soft RoCEv2 device (its own port, GID,
 * MAC, UD QP, AH service), on a fabric (coll_fabric.h):
 *
 *   threads  all ranks in one process, on net_ring ports joined by an
 *            Ethernet switch in software (static neighbours).
 *   procs    one rank per process, on a real DPDK port (--port: e.g.
 *            net_af_packet on a veth plugged into a Linux bridge, or a
 *            NIC); the peers' MACs are resolved by ARP through the fabric.
 *            Rank, size and every rank's endpoint record come from the
 *            launcher's PMIx server (mpirun, srun --mpi=pmix) or a TCP
 *            rendezvous at rank 0 (--bootstrap, job_bootstrap.h).
 *
 * --workers poll threads (one lcore each, the main lcore taken last)
 * drive the local ranks' queues round robin, each its own share (threads
 * mode: rank r on worker r % N; worker 0 also the switch), each rank a
 * state machine (coll_engine.h), so 8 ranks need no 8 cores; --idle says what it does when nothing arrives (poll_idle.h), so
 * that many ranks can share few cores. It polls from the moment the
 * devices open (answering ARP, holding early datagrams for the engine).
 * Phases: address exchange; the AH storm (each rank creates AHs to all
 * N - 1 peers in one create_ah_batch, timed per rank); then --iters
 * barriers, allgathers and alltoalls, verified, with per-op latency. *
 * main() parses, then prepares and sets up the job (coll_setup.cc), runs
 * the AH storm and the collectives (coll_run.cc; the poll lcore's loop is
 * coll_poll.h), closes the ranks and reports (coll_report.cc).
 */
#include <cstdio>
#include <string>
#include <vector>

#include "app_start.h"
#include "cli.h"
#include "coll_config.h"
#include "coll_job.h"
#include "driver.h"
#include "rdgram/runtime.h"

using namespace rdgram;
using namespace rdgram::coll;

namespace {

/* Settings that belong to one kind of driver: nullptr, or why not. */
const char *soft_only_settings(const coll_config &c, const cli::parser &app, apps::driver_kind d)
{
	const bool soft = d == apps::driver_kind::soft;
	if (!soft && !c.port.devargs.empty())
		return "--port is the soft driver's DPDK port; the RDMA drivers take --device (and --ib-port, --gid-index)";
	if (!soft && app.count("--mtu") != 0)
		return "--mtu is the soft driver's; an RDMA device's path MTU is its port's";
	if (soft && (!c.rdma.device.empty() || c.rdma.gid_index >= 0 || app.count("--ib-port") != 0))
		return "--device, --ib-port and --gid-index are for the verbs, mlx5 and efa drivers";
	return nullptr;
}

} // namespace

int main(int argc, char **argv)
{
	split_args sa = split_command_line(argc, argv);
	coll_config c;

	cli::parser app{"rdgram-coll",
			"rdgram-coll: HPC collectives over UD on the soft RoCEv2 driver: address exchange, the AH "
			"storm (timed per rank), then barrier (dissemination), allgather (ring) and alltoall "
			"(pairwise) with the app's own loss recovery, verified results and per-op latency.\n"
			"Usage: rdgram-coll [EAL args --] [options]",
			34};
	app.config("-c,--config", "TOML config file (see config/rdgram-coll.toml); options override it",
		   [&](const std::string &path) { load_coll_config(path, c); });
	app.add("--capture", c.capture, apps::capture_help)
		.one_of({"auto", "on", "off"});
	app.add("--driver", c.driver,
		"soft (each rank a soft RoCEv2 device on a DPDK port), verbs (an RDMA device through libibverbs: "
		"any rdma-core provider, rxe included), mlx5 (direct verbs) or efa [soft]");
	app.add("--device", c.rdma.device, "verbs, mlx5, efa: the RDMA device [the first usable one]");
	app.add("--ib-port", c.rdma.port, "verbs, mlx5: the device's physical port [1]").range(1u, 255u);
	app.add("--gid-index", c.rdma.gid_index,
		"verbs, mlx5, efa: the source GID index of every AH, whose GID is the rank's address (-1: the "
		"port's first IPv4 RoCE v2 GID, else its first GID) [-1]")
		.range(-1, 255);
	app.add("--workers", c.workers,
		"poll threads, each on its own lcore with its own ranks' queues; threads mode spreads the ranks "
		"over them (rank r on worker r % N); the main lcore is the last one taken, so -l 0,1 runs 2; "
		"procs mode: 1 (one rank per process) [1]")
		.range(1u, 128u);
	app.add("--mode", c.mode,
		"threads: all ranks in this process over a net_ring switch; procs: this process is one "
		"rank, on the DPDK port --port (peers found by ARP) [threads]")
		.one_of({"threads", "procs"});
	app.add("--ranks", c.ranks,
		"number of ranks (threads: at most 32, DPDK's RTE_MAX_ETHPORTS; procs: at most 64, taken from mpirun's "
		"OMPI_COMM_WORLD_SIZE when set) [8]")
		.range(1u, max_procs_ranks);
	app.add("--rank", c.rank, "procs: this process's rank (-1: from OMPI_COMM_WORLD_RANK or PMIX_RANK) [-1]")
		.range(-1, int(max_procs_ranks) - 1);
	app.add("--bootstrap", c.bootstrap,
		"procs: how ranks find each other: pmix (the launcher's PMIx server: rank, size and endpoint "
		"records through PMIx), tcp (--rendezvous at rank 0), auto (pmix when a PMIx server is in the "
		"environment) [auto]")
		.one_of({"auto", "pmix", "tcp"});
	app.add("--job", c.job,
		"procs: the job's name in every endpoint record; a record of another name is refused "
		"[the PMIx namespace]");
	app.add("--rendezvous", c.rendezvous,
		"procs, tcp: host:port where rank 0 listens for the address exchange [127.0.0.1:18515]");
	app.add("--port", c.port.devargs,
		"procs: this rank's DPDK port, as devargs (a vdev, e.g. net_af_packet{rank},iface=veth{rank}, "
		"probed here) or the name of a port given to the EAL (--vdev, -a); {rank} is replaced by the rank");
	app.add("--idle", c.idle,
		"what the poll lcore does after --idle-spins empty polls: busy (spin), yield (sched_yield), "
		"sleep (nanosleep, 1 us doubling up to --idle-sleep-us) [busy]")
		.one_of({"busy", "yield", "sleep"});
	app.add("--idle-spins", c.idle_spins, "empty polls in a row before --idle yield/sleep gives the core up [64]")
		.range(0u, 100000000u);
	app.add("--idle-sleep-us", c.idle_sleep_us, "--idle sleep: the longest nap, us [100]").range(1u, 1000000u);
	app.add("--iters", c.iters, "iterations of each collective [100]").range(1u, 1000000u);
	app.add("--size", c.size, "bytes per rank block in allgather and alltoall (one datagram) [64]")
		.range(1u, max_size);
	app.add("--rto-us", c.rto_us, "retransmission timeout of an unacknowledged message, us [200]")
		.range(1u, 10000000u);
	app.add("--drop-rate", c.drop_rate,
		"fraction of received datagrams each rank throws away, to exercise loss recovery [0]")
		.range(0.0, 0.5);
	app.add("--seed", c.seed, "seed of the drop pattern (per rank: seed and rank) [1]");
	app.add("--json", c.json, "also write the results (storm per rank, each collective's p50/p99/max, "
				  "counters, PASS/FAIL; procs, rank 0: every rank's storm) as one JSON object to FILE ({rank}: "
				  "this process's rank); - for stdout [none]");
	app.add("--timeout", c.timeout_s, "deadline of each phase (exchange, storm, collectives), s [30]")
		.range(0.1, 3600.0);
	app.add("--qkey", c.qkey, "Q_Key of every rank's QP (below 0x80000000) [0x11110000]").range(0u, 0x7fffffffu);
	app.add("--mtu", c.port.mtu, "path MTU of every rank's device: 256, 512, 1024, 2048 or 4096 [2048]")
		.range(256u, 4096u);

	if (int rc = app.parse(sa.app); rc >= 0)
		return rc;

	if ((c.port.mtu & (c.port.mtu - 1)) != 0) {
		fprintf(stderr, "rdgram-coll: --mtu %u: expected 256, 512, 1024, 2048 or 4096\n", c.port.mtu);
		return 2;
	}
	apps::driver_kind drv;
	if (std::string err; apps::parse_driver(c.driver, &drv, &err) != 0) {
		fprintf(stderr, "rdgram-coll: %s\n", err.c_str());
		return 2;
	}
	if (const char *why = soft_only_settings(c, app, drv)) {
		fprintf(stderr, "rdgram-coll: %s\n", why);
		return 2;
	}
	job_ctl k;
	if (int rc = prepare_job(c, app, sa.eal_given ? sa.eal : c.eal_args, &k); rc != 0)
		return rc;

	runtime rt;
	if (int rc = apps::start_runtime(rt, {.app = "rdgram-coll",
					      .eal = k.eal,
					      .argv0 = argv[0],
					      .capture = apps::capture_of(c.capture)}); rc != 0)
		return rc;
	/* The driver, picked once: the job is compiled for each built
	 * driver's queue type and this runs one of them. */
	const int status = apps::with_driver(drv, [&](auto tag) {
		using Dev = typename decltype(tag)::type;
		return run_job<Dev>(c, rt, k);
	});
	rt.fini();
	return status;
}
