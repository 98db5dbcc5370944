/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll: the HPC collectives test over UD on the soft RoCEv2 driver.
 *
 *   rdgram-coll [EAL args --] [--mode threads|procs] [options]
 *
 * Every rank is one soft RoCEv2 device (its own port, GID, MAC, UD QP, AH
 * service), on a fabric (coll_fabric.h):
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
 * One poll lcore drives the switch and every local rank's queue round
 * robin (each rank a state machine, coll_engine.h), so 8 ranks need no 8
 * cores; --idle says what it does when nothing arrives (poll_idle.h), so
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

#include "cli.h"
#include "coll_config.h"
#include "coll_job.h"
#include "rdgram/config.h"
#include "rdgram/runtime.h"

using namespace rdgram;
using namespace rdgram::coll;

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
	std::string cfg_path;
	app.add("-c,--config", cfg_path, "TOML config file (see config/rdgram-coll.toml); options override it");
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
	app.add("--port", c.port,
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
	app.add("--mtu", c.mtu, "path MTU of every rank's device: 256, 512, 1024, 2048 or 4096 [2048]")
		.range(256u, 4096u);

	/* A config file is applied first, so options (which CLI11 writes into c
	 * while parsing) must win: parse twice, the second time over the
	 * file's values. */
	if (int rc = app.parse(sa.app); rc >= 0)
		return rc;
	if (!cfg_path.empty()) {
		try {
			load_coll_config(cfg_path, c);
		} catch (const config_error &e) {
			fprintf(stderr, "rdgram-coll: %s\n", e.what());
			return 2;
		}
		if (int rc = app.parse(sa.app); rc >= 0)
			return rc;
	}

	if ((c.mtu & (c.mtu - 1)) != 0) {
		fprintf(stderr, "rdgram-coll: --mtu %u: expected 256, 512, 1024, 2048 or 4096\n", c.mtu);
		return 2;
	}
	job_ctl k;
	if (int rc = prepare_job(c, app, sa.eal_given ? sa.eal : c.eal_args, &k); rc != 0)
		return rc;

	runtime rt;
	if (rt.init(k.eal, argv[0]) != 0) {
		fprintf(stderr, "rdgram-coll: %s\n", rt.error().c_str());
		return 1;
	}
	int status = 0;
	{
		job j;
		status = set_up_job(c, rt, j, k);
		if (status == 0) {
			status = run_storm(j, k);
			print_storm(c, j, k);
		}
		if (status == 0)
			status = run_collectives(c, j, k);
		const close_stats cs = close_job(rt, j, k, status);
		if (status == 0)
			status = report_job(c, j, k, cs);
		fflush(stdout);
	}
	rt.fini();
	return status;
}
