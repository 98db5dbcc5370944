/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * How the ranks of a job in separate processes find each other: one choice
 * per process, made before the EAL starts.
 *
 *   pmix  the launcher's PMIx server (Open MPI's mpirun, Slurm's
 *         srun --mpi=pmix): rank, job size, local rank and local size from
 *         PMIx; each rank PMIx_Puts its endpoint record, PMIx_Fence with
 *         PMIX_COLLECT_DATA is the job's start barrier, PMIx_Get reads the
 *         peers' records; the end barrier is a fence too.
 *   tcp   rdgram's own rendezvous (bootstrap.h): rank 0 listens, the others
 *         connect; rank and size from a launcher's environment
 *         (OMPI_COMM_WORLD_*, PMIX_RANK) or the command line.
 *
 * Control path only: every call blocks the caller with a deadline; none is
 * made on a poll thread. A job_bootstrap is used by one thread (NOT thread
 * safe).
 */
#ifndef RDGRAM_JOB_BOOTSTRAP_H
#define RDGRAM_JOB_BOOTSTRAP_H

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap.h"

namespace rdgram::coll {

/* What a rank publishes under the key "rdgram.ep" (PMIx) or sends to rank
 * 0 (tcp, where only addr travels): everything a peer needs to create an
 * AH to it and send to its QP, plus what must agree across the job. */
struct __attribute__((packed)) endpoint_record {
	uint32_t magic;  /* endpoint_magic */
	uint16_t format; /* endpoint_format: the layout of this record */
	uint16_t mtu;    /* path MTU of the rank's device, bytes (0: not carried) */
	uint64_t job;    /* job_key() of the job the rank belongs to */
	rank_addr addr;  /* rank, GID, QPN, Q_Key, MAC, LID */
};
inline constexpr uint32_t endpoint_magic = 0x50454452; /* "RDEP" little endian */
inline constexpr uint16_t endpoint_format = 1;
static_assert(sizeof(endpoint_record) == 16 + sizeof(rank_addr));

/* FNV-1a 64 of a job's name: the PMIx namespace, or what --job says. */
uint64_t job_key(const std::string &name);

/* Whether peer's record (the one published by rank `rank`) may join a job
 * whose own record is self: the same format, job, Q_Key and (when both
 * carry one) MTU, and the rank it claims. false with the reason in *why,
 * worded "rank R's endpoint record ...". */
bool check_record(const endpoint_record &self, const endpoint_record &peer, uint32_t rank, std::string *why);

class job_bootstrap {
public:
	virtual ~job_bootstrap() = default;
	/* "PMIx" or "TCP rendezvous". */
	virtual std::string name() const = 0;
	/* Who gave this process its rank: "PMIx", or (tcp) "Open MPI",
	 * "PMIx" (a PMIX_RANK environment) or "command line". */
	virtual std::string launcher() const = 0;
	int rank() const { return rank_; }
	int size() const { return size_; }
	int local_rank() const { return local_rank_; }
	int local_size() const { return local_size_; }
	/* A short word naming this job, safe in a file name (the PMIx
	 * namespace; "" for tcp). */
	virtual std::string job_name() const { return ""; }

	/* The start barrier and address exchange: publishes self, returns
	 * every rank's record (index = rank), each checked against self by
	 * check_record. 0, or an errno value with error(): ETIMEDOUT (a rank
	 * did not arrive; error() names it where the bootstrap can tell),
	 * EPROTO (a record refused), EIO (the launcher's server failed). */
	virtual int exchange(const endpoint_record &self, double timeout_s, std::vector<endpoint_record> *table) = 0;
	/* The end barrier: returns once every rank called it. Each rank
	 * brings the same number of figures (mine); rank 0 gets them all in
	 * *all (rank-major) and runs at_all, if any, once every rank arrived
	 * and before any leaves. 0 or an errno value with error(). */
	virtual int finish(double timeout_s, const std::vector<double> &mine, std::vector<double> *all,
			   const std::function<void()> &at_all) = 0;
	/* After this rank gave up (its collectives' deadline passed): tells
	 * the others and names the ranks that did not say the same within
	 * wait_s ("" when it cannot tell: tcp). */
	virtual std::string absent_ranks(double wait_s) { (void)wait_s; return ""; }
	const std::string &error() const { return err_; }
	/* When the start barrier let this rank go (PMIx: PMIx_Fence
	 * returned; tcp: the table arrived), set by exchange(). */
	std::chrono::steady_clock::time_point started() const { return started_; }

protected:
	int fail(int e, const std::string &m)
	{
		err_ = m;
		return e;
	}
	int rank_ = -1, size_ = -1, local_rank_ = -1, local_size_ = -1;
	std::string err_;
	std::chrono::steady_clock::time_point started_{};
};

/* Which bootstrap "auto" takes here: "pmix" when this build has PMIx and a
 * PMIx server announced itself in the environment (PMIX_SERVER_URI*),
 * else "tcp". */
std::string auto_bootstrap();
/* Whether this build has PMIx (meson option pmix). */
bool have_pmix();

/* The PMIx bootstrap: PMIx_Init and the job's rank and sizes. nullptr with
 * *err (one line) when the build has no PMIx or no server answers. */
std::unique_ptr<job_bootstrap> pmix_bootstrap(std::string *err);

/* The TCP rendezvous at hostport for rank of size (rank and size already
 * decided from a launcher's environment or the command line); launcher is
 * who said so, for name(). */
std::unique_ptr<job_bootstrap> tcp_bootstrap(const std::string &hostport, unsigned rank, unsigned size,
					     const std::string &launcher);

} // namespace rdgram::coll

#endif
