/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 *
 * The PMIx bootstrap (job_bootstrap.h) through libpmix, as the PMIx
 * Standard v4 describes the client calls: PMIx_Init, PMIx_Get of the job's
 * and the process's keys (PMIX_JOB_SIZE on the wildcard rank,
 * PMIX_LOCAL_RANK, PMIX_LOCAL_SIZE), PMIx_Put(PMIX_GLOBAL) + PMIx_Commit,
 * PMIx_Fence with PMIX_COLLECT_DATA (the peers' records then answer
 * PMIx_Get locally), PMIx_Finalize. Every blocking call carries
 * PMIX_TIMEOUT, so a rank that never arrives costs a bounded wait, and the
 * ranks that did arrive are then told apart from the others by asking the
 * server for each one's key of that step (PMIx_Get_nb, all at once).
 */
#include "job_bootstrap.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <pmix.h>

namespace rdgram::coll {

namespace {

constexpr const char *key_endpoint = "rdgram.ep";  /* endpoint_record */
constexpr const char *key_finish = "rdgram.fin";   /* the end barrier's figures */
constexpr const char *key_gave_up = "rdgram.end";  /* this rank stopped waiting */

std::string pmix_err(const char *call, pmix_status_t st)
{
	return std::string(call) + ": " + PMIx_Error_string(st);
}

/* An info array that frees itself. */
struct infos {
	pmix_info_t *v = nullptr;
	size_t n = 0;
	explicit infos(size_t k) : n(k) { PMIX_INFO_CREATE(v, k); }
	~infos() { PMIX_INFO_FREE(v, n); }
	infos(const infos &) = delete;
	infos &operator=(const infos &) = delete;
};

int timeout_of(double s)
{
	const int t = int(s + 0.999);
	return t < 1 ? 1 : t;
}

class pmix_job final : public job_bootstrap {
public:
	~pmix_job() override
	{
		if (up_)
			PMIx_Finalize(nullptr, 0);
	}

	bool init(std::string *err)
	{
		pmix_status_t st = PMIx_Init(&me_, nullptr, 0);
		if (st != PMIX_SUCCESS) {
			*err = "PMIx: no PMIx server answers (" + pmix_err("PMIx_Init", st) +
			       "): start the job under mpirun or srun --mpi=pmix, or use --bootstrap tcp";
			return false;
		}
		up_ = true;
		pmix_proc_t wild;
		PMIX_LOAD_PROCID(&wild, me_.nspace, PMIX_RANK_WILDCARD);
		uint64_t size = 0, lrank = 0, lsize = 0;
		if (!get_number(wild, PMIX_JOB_SIZE, &size, err) || !get_number(me_, PMIX_LOCAL_RANK, &lrank, err) ||
		    !get_number(wild, PMIX_LOCAL_SIZE, &lsize, err))
			return false;
		if (me_.rank >= size) {
			*err = "PMIx: rank " + std::to_string(me_.rank) + " of a job of " + std::to_string(size);
			return false;
		}
		rank_ = int(me_.rank);
		size_ = int(size);
		local_rank_ = int(lrank);
		local_size_ = int(lsize);
		return true;
	}

	std::string name() const override { return "PMIx"; }
	std::string launcher() const override { return "PMIx"; }
	std::string job_name() const override { return me_.nspace; }

	int exchange(const endpoint_record &self, double timeout_s, std::vector<endpoint_record> *table) override
	{
		if (int rc = publish(key_endpoint, &self, sizeof(self)); rc != 0)
			return rc;
		if (int rc = fence(true, timeout_s, key_endpoint, "start"); rc != 0)
			return rc;
		started_ = std::chrono::steady_clock::now();
		table->assign(size_t(size_), endpoint_record{});
		for (int r = 0; r < size_; r++) {
			if (r == rank_) {
				(*table)[r] = self;
				continue;
			}
			pmix_proc_t p;
			PMIX_LOAD_PROCID(&p, me_.nspace, pmix_rank_t(r));
			infos in(1);
			const int t = timeout_of(timeout_s);
			PMIX_INFO_LOAD(&in.v[0], PMIX_TIMEOUT, &t, PMIX_INT);
			pmix_value_t *v = nullptr;
			const pmix_status_t st = PMIx_Get(&p, key_endpoint, in.v, in.n, &v);
			if (st != PMIX_SUCCESS)
				return fail(EIO, "PMIx: rank " + std::to_string(r) + "'s endpoint record: " +
							 pmix_err("PMIx_Get", st));
			const bool ok = v->type == PMIX_BYTE_OBJECT && v->data.bo.size == sizeof(endpoint_record);
			if (ok)
				memcpy(&(*table)[r], v->data.bo.bytes, sizeof(endpoint_record));
			const size_t got = v->type == PMIX_BYTE_OBJECT ? v->data.bo.size : 0;
			PMIX_VALUE_RELEASE(v);
			if (!ok)
				return fail(EPROTO, "PMIx: rank " + std::to_string(r) + "'s endpoint record is " +
							    std::to_string(got) + " bytes, expected " +
							    std::to_string(sizeof(endpoint_record)) +
							    " (another rdgram version)");
			std::string why;
			if (!check_record(self, (*table)[r], uint32_t(r), &why))
				return fail(EPROTO, "PMIx: " + why);
		}
		return 0;
	}

	int finish(double timeout_s, const std::vector<double> &mine, std::vector<double> *all,
		   const std::function<void()> &at_all) override
	{
		/* Two fences: the first gathers the figures (every rank
		 * arrived), rank 0 runs at_all, the second lets them go. */
		if (int rc = publish(key_finish, mine.data(), mine.size() * sizeof(double)); rc != 0)
			return rc;
		if (int rc = fence(true, timeout_s, key_finish, "end"); rc != 0)
			return rc;
		const size_t k = mine.size();
		if (rank_ == 0) {
			all->assign(size_t(size_) * k, 0);
			for (int r = 0; r < size_; r++) {
				pmix_proc_t p;
				PMIX_LOAD_PROCID(&p, me_.nspace, pmix_rank_t(r));
				pmix_value_t *v = nullptr;
				const pmix_status_t st = PMIx_Get(&p, key_finish, nullptr, 0, &v);
				if (st != PMIX_SUCCESS)
					return fail(EIO, "PMIx: rank " + std::to_string(r) + "'s figures: " +
								 pmix_err("PMIx_Get", st));
				if (v->type == PMIX_BYTE_OBJECT && v->data.bo.size == k * sizeof(double))
					memcpy(all->data() + size_t(r) * k, v->data.bo.bytes, k * sizeof(double));
				PMIX_VALUE_RELEASE(v);
			}
			if (at_all)
				at_all();
		}
		return fence(false, timeout_s, nullptr, "release");
	}

	std::string absent_ranks(double wait_s) override
	{
		const uint8_t one = 1;
		if (publish(key_gave_up, &one, 1) != 0)
			return "";
		return absent(key_gave_up, wait_s);
	}

private:
	bool get_number(const pmix_proc_t &p, const char *key, uint64_t *out, std::string *err)
	{
		pmix_value_t *v = nullptr;
		const pmix_status_t st = PMIx_Get(&p, key, nullptr, 0, &v);
		if (st != PMIX_SUCCESS) {
			*err = std::string("PMIx: ") + key + ": " + pmix_err("PMIx_Get", st);
			return false;
		}
		bool ok = true;
		const int type = v->type;
		switch (type) {
		case PMIX_UINT8: *out = v->data.uint8; break;
		case PMIX_UINT16: *out = v->data.uint16; break;
		case PMIX_UINT32: *out = v->data.uint32; break;
		case PMIX_UINT64: *out = v->data.uint64; break;
		case PMIX_UINT: *out = v->data.uint; break;
		case PMIX_INT: ok = v->data.integer >= 0; *out = uint64_t(v->data.integer); break;
		default: ok = false;
		}
		PMIX_VALUE_RELEASE(v);
		if (!ok)
			*err = std::string("PMIx: ") + key + " is not a count (PMIx type " + std::to_string(type) + ")";
		return ok;
	}

	int publish(const char *key, const void *p, size_t n)
	{
		pmix_value_t v;
		PMIX_VALUE_CONSTRUCT(&v);
		v.type = PMIX_BYTE_OBJECT;
		v.data.bo.bytes = static_cast<char *>(const_cast<void *>(p));
		v.data.bo.size = n;
		/* PMIx_Put copies the value. */
		pmix_status_t st = PMIx_Put(PMIX_GLOBAL, key, &v);
		if (st == PMIX_SUCCESS)
			st = PMIx_Commit();
		if (st != PMIX_SUCCESS)
			return fail(EIO, "PMIx: " + std::string(key) + ": " + pmix_err("PMIx_Put/PMIx_Commit", st));
		return 0;
	}

	/* A fence over the whole job. On a timeout, names the ranks whose
	 * key of this step (if any) the server does not have. */
	int fence(bool collect, double timeout_s, const char *key, const char *what)
	{
		infos in(collect ? 2 : 1);
		const int t = timeout_of(timeout_s);
		PMIX_INFO_LOAD(&in.v[0], PMIX_TIMEOUT, &t, PMIX_INT);
		if (collect) {
			const bool yes = true;
			PMIX_INFO_LOAD(&in.v[1], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
		}
		const pmix_status_t st = PMIx_Fence(nullptr, 0, in.v, in.n);
		if (st == PMIX_SUCCESS)
			return 0;
		/* PMIX_ERR_TIMEOUT: some rank did not arrive in time;
		 * PMIX_ERR_PARTIAL_SUCCESS: the server saw some end first. */
		std::string m = std::string("PMIx: the job's ") + what + " fence: " + pmix_err("PMIx_Fence", st);
		if (st == PMIX_ERR_TIMEOUT)
			m = std::string("PMIx: the job's ") + what + " fence timed out after " + std::to_string(t) + " s";
		const std::string gone = key != nullptr ? absent(key, 2.0) : "";
		if (!gone.empty())
			m += ": " + gone;
		return fail(st == PMIX_ERR_TIMEOUT ? ETIMEDOUT : EIO, m);
	}

	/* The ranks whose key the server cannot give within wait_s: every
	 * peer asked at once (PMIx_Get_nb), so the wait is one wait_s. */
	struct ask {
		std::atomic<int> done{0};
		pmix_status_t st = PMIX_SUCCESS;
	};
	static void answered(pmix_status_t st, pmix_value_t *, void *arg)
	{
		auto *a = static_cast<ask *>(arg);
		a->st = st;
		a->done.store(1, std::memory_order_release);
	}
	std::string absent(const char *key, double wait_s)
	{
		/* A peer that has committed data before but not this key yet
		 * is answered NOT_FOUND at once, not when the key comes: ask
		 * again, in rounds, until every peer answered or wait_s
		 * passed. */
		std::vector<bool> found(size_t(size_), false);
		found[size_t(rank_)] = true;
		const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(wait_s * 1000));
		for (;;) {
			if (!ask_round(key, &found))
				break;
			if (std::find(found.begin(), found.end(), false) == found.end() ||
			    std::chrono::steady_clock::now() >= end)
				break;
			std::this_thread::sleep_for(std::chrono::milliseconds(100));
		}
		std::string gone;
		unsigned n = 0;
		for (int r = 0; r < size_; r++)
			if (!found[size_t(r)])
				gone += (n++ ? ", " : "") + std::to_string(r);
		if (n == 0)
			return "";
		return (n == 1 ? "rank " : "ranks ") + gone + " did not arrive within " +
		       std::to_string(timeout_of(wait_s)) + " s more (dead or hung)";
	}

	/* One round: every peer not yet found asked at once (PMIx_Get_nb,
	 * PMIX_TIMEOUT 1 s). false when some callback never came back: the
	 * askers and their info array are then left allocated (the library
	 * still owns them) rather than freed under it. */
	bool ask_round(const char *key, std::vector<bool> *found)
	{
		auto *asks = new ask[size_t(size_)];
		auto *in = new infos(1);
		const int t = 1;
		PMIX_INFO_LOAD(&in->v[0], PMIX_TIMEOUT, &t, PMIX_INT);
		std::vector<bool> asked(size_t(size_), false);
		for (int r = 0; r < size_; r++) {
			if ((*found)[size_t(r)])
				continue;
			pmix_proc_t p;
			PMIX_LOAD_PROCID(&p, me_.nspace, pmix_rank_t(r));
			asked[size_t(r)] = PMIx_Get_nb(&p, key, in->v, in->n, answered, &asks[r]) == PMIX_SUCCESS;
		}
		const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(t * 1000 + 2000);
		bool all_back = false;
		while (!all_back && std::chrono::steady_clock::now() < end) {
			all_back = true;
			for (int r = 0; r < size_; r++)
				all_back &= !asked[size_t(r)] || asks[r].done.load(std::memory_order_acquire) != 0;
			if (!all_back)
				std::this_thread::sleep_for(std::chrono::milliseconds(10));
		}
		for (int r = 0; r < size_; r++)
			if (asked[size_t(r)] && asks[r].done.load(std::memory_order_acquire) != 0 &&
			    asks[r].st == PMIX_SUCCESS)
				(*found)[size_t(r)] = true;
		if (all_back) {
			delete[] asks;
			delete in;
		}
		return all_back;
	}

	pmix_proc_t me_{};
	bool up_ = false;
};

} // namespace

bool have_pmix() { return true; }

std::unique_ptr<job_bootstrap> pmix_bootstrap(std::string *err)
{
	auto j = std::make_unique<pmix_job>();
	if (!j->init(err))
		return nullptr;
	return j;
}

} // namespace rdgram::coll
