/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The endpoint record's checks, the choice of bootstrap and the TCP one;
 * the PMIx one is pmix_bootstrap.cc (built only with libpmix).
 */
#include "job_bootstrap.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char **environ;

namespace rdgram::coll {

namespace {

std::string hex(uint64_t v)
{
	char b[24];
	snprintf(b, sizeof(b), "0x%lx", (unsigned long)v);
	return b;
}

/* The rendezvous carries addresses only; the rest of a peer's record is
 * what the job agreed on the command line. */
class tcp_job final : public job_bootstrap {
public:
	tcp_job(const std::string &hostport, unsigned rank, unsigned size, const std::string &launcher)
		: hostport_(hostport), launcher_(launcher)
	{
		rank_ = int(rank);
		size_ = int(size);
	}
	std::string name() const override { return "TCP rendezvous"; }
	std::string launcher() const override { return launcher_; }
	int exchange(const endpoint_record &self, double timeout_s, std::vector<endpoint_record> *table) override
	{
		std::vector<rank_addr> t;
		if (int rc = rv_.exchange(hostport_, unsigned(rank_), unsigned(size_), self.addr, timeout_s, &t); rc != 0)
			return fail(rc, rv_.error());
		started_ = std::chrono::steady_clock::now();
		table->assign(t.size(), self);
		for (size_t r = 0; r < t.size(); r++) {
			(*table)[r].addr = t[r];
			(*table)[r].mtu = r == size_t(rank_) ? self.mtu : 0;
			std::string why;
			if (!check_record(self, (*table)[r], uint32_t(r), &why))
				return fail(EPROTO, why);
		}
		return 0;
	}
	int finish(double timeout_s, const std::vector<double> &mine, std::vector<double> *all,
		   const std::function<void()> &at_all) override
	{
		if (int rc = rv_.finish(timeout_s, mine, all, at_all); rc != 0)
			return fail(rc, rv_.error());
		return 0;
	}

private:
	std::string hostport_, launcher_;
	rendezvous rv_;
};

} // namespace

uint64_t job_key(const std::string &name)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (unsigned char c : name) {
		h ^= c;
		h *= 0x100000001b3ull;
	}
	return h;
}

bool check_record(const endpoint_record &self, const endpoint_record &peer, uint32_t rank, std::string *why)
{
	const std::string who = "rank " + std::to_string(rank) + "'s endpoint record";
	if (peer.magic != endpoint_magic) {
		*why = who + " is not one (magic " + hex(peer.magic) + ", expected " + hex(endpoint_magic) + ")";
		return false;
	}
	if (peer.format != self.format) {
		*why = who + " has format " + std::to_string(peer.format) + ", this rank reads format " +
		       std::to_string(self.format) + " (another rdgram version)";
		return false;
	}
	if (peer.job != self.job) {
		*why = who + " belongs to another job (job key " + hex(peer.job) + ", this job's " + hex(self.job) + ")";
		return false;
	}
	if (peer.addr.rank != rank) {
		*why = who + " claims rank " + std::to_string(peer.addr.rank);
		return false;
	}
	if (peer.addr.qkey != self.addr.qkey) {
		*why = who + " has Q_Key " + hex(peer.addr.qkey) + ", this rank's is " + hex(self.addr.qkey) +
		       " (every rank needs the same --qkey)";
		return false;
	}
	if (peer.mtu != 0 && self.mtu != 0 && peer.mtu != self.mtu) {
		*why = who + " has MTU " + std::to_string(peer.mtu) + ", this rank's is " + std::to_string(self.mtu) +
		       " (every rank needs the same --mtu)";
		return false;
	}
	return true;
}

std::string auto_bootstrap()
{
	if (!have_pmix())
		return "tcp";
	/* A PMIx server exports its address to its clients as
	 * PMIX_SERVER_URI2, URI21, URI3, URI4, URI41 (one per protocol
	 * version it speaks); a bare PMIX_RANK may be someone's shell. */
	for (char **e = environ; e != nullptr && *e != nullptr; e++)
		if (strncmp(*e, "PMIX_SERVER_URI", 15) == 0)
			return "pmix";
	return "tcp";
}

std::unique_ptr<job_bootstrap> tcp_bootstrap(const std::string &hostport, unsigned rank, unsigned size,
					     const std::string &launcher)
{
	return std::make_unique<tcp_job>(hostport, rank, size, launcher);
}

#ifndef RDGRAM_HAVE_PMIX
bool have_pmix() { return false; }

std::unique_ptr<job_bootstrap> pmix_bootstrap(std::string *err)
{
	*err = "PMIx: this build has none (libpmix-dev was missing when meson configured it: meson option pmix); "
	       "use --bootstrap tcp";
	return nullptr;
}
#endif

} // namespace rdgram::coll
