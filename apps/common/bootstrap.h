/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * rdgram-coll bootstrap for ranks in separate processes: who am I (a
 * launcher's environment or the command line) and the address exchange (a
 * plain TCP rendezvous at rank 0). Control path only: blocking sockets with
 * deadlines, never on a poll thread.
 */
#ifndef RDGRAM_COLL_BOOTSTRAP_H
#define RDGRAM_COLL_BOOTSTRAP_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rdgram::coll {

/* Rank and size from a launcher: Open MPI's mpirun (OMPI_COMM_WORLD_RANK,
 * OMPI_COMM_WORLD_SIZE) or a PMIx server (PMIX_RANK with PMIX_NAMESPACE;
 * the job size is not in a PMIx environment, so it comes from --ranks).
 * Returns the launcher's name, or "" when neither is present; -1 size:
 * unknown. err gets a message for a malformed value. */
struct launch_env {
	std::string launcher;
	int rank = -1, size = -1;
};
bool detect_launcher(launch_env *out, std::string *err);

/* What one rank publishes: enough to create an AH to it and send to its
 * QP (RoCEv2: GID; the soft fabric also needs the MAC as a static
 * neighbour entry, since there is no ARP across the rendezvous). */
struct __attribute__((packed)) rank_addr {
	uint32_t rank;
	uint8_t gid[16];
	uint32_t qpn;
	uint32_t qkey;
	uint8_t mac[6];
	uint16_t lid; /* InfiniBand: the port's LID (0 on Ethernet) */
};

/* A TCP rendezvous: rank 0 listens on host:port and collects one
 * rank_addr from every other rank, then sends everyone the table. The
 * connections stay open for finish(): a final barrier. */
class rendezvous {
public:
	/* magic: what a peer's hello must start with, so that two tools
	 * sharing a port never pair up (rdgram-coll "RCOL", rdgram-perf
	 * "RPRF"). */
	explicit rendezvous(uint32_t magic = 0x52434f4c) : magic_(magic) {}
	rendezvous(const rendezvous &) = delete;
	rendezvous &operator=(const rendezvous &) = delete;
	~rendezvous() { close_all(); }

	/* Exchanges self for the table (index = rank). 0 or an errno value
	 * with error(): ETIMEDOUT after timeout_s, EPROTO on bad peers. */
	int exchange(const std::string &hostport, unsigned rank, unsigned size, const rank_addr &self,
		     double timeout_s, std::vector<rank_addr> *table);
	/* Barrier over the same connections: returns once every rank called
	 * it (0) or on timeout/error (errno value). Each rank brings one
	 * figure (mine); rank 0 gets them all in *all (index = rank) and runs
	 * at_all (if any) once every rank arrived, before it lets them go. */
	int finish(double timeout_s, double mine, std::vector<double> *all,
		   const std::function<void()> &at_all = {});
	/* The same with several figures per rank (every rank the same
	 * number): *all is rank-major, mine.size() per rank. */
	int finish(double timeout_s, const std::vector<double> &mine, std::vector<double> *all,
		   const std::function<void()> &at_all = {});
	const std::string &error() const { return err_; }

private:
	void close_all();
	int fail(int e, const std::string &m)
	{
		err_ = m;
		return e;
	}
	uint32_t magic_;
	unsigned rank_ = 0;
	int listen_fd_ = -1;
	std::vector<int> fds_; /* rank 0: one per peer; others: one */
	std::string err_;
};

/* "host:port" -> parts; false on a malformed string. */
bool split_hostport(const std::string &s, std::string *host, uint16_t *port);

} // namespace rdgram::coll

#endif
