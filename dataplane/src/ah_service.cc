/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "rdgram/ah_service.h"
#include "rdgram/log.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <rte_errno.h>

namespace rdgram {

namespace {
void nap_us(long us)
{
	timespec ts{0, us * 1000};
	nanosleep(&ts, nullptr);
}
uint64_t us_to_cycles(uint64_t us) { return us * rte_get_tsc_hz() / 1000000; }
} // namespace

/* ---- ah_client: set-up (control path) ----------------------------------- */

int ah_client::init(const ah_client_config &c, const dest_cache *dc, const port_attr *port,
		    const gid_index *gids, unsigned id)
{
	fini();
	if (c.max_dests == 0 || c.max_total == 0 || c.max_per_dest == 0 || c.max_dests > (1u << 20) ||
	    c.max_total > (1u << 24))
		return EINVAL;
	cfg_ = c;
	dc_ = dc;
	port_ = port;
	gids_ = gids;
	const uint32_t nidx = rte_align32pow2(2 * c.max_dests);
	imask_ = nidx - 1;
	dests_ = static_cast<pdest *>(rte_zmalloc_socket("rdgram_pdest", sizeof(pdest) * c.max_dests, 64, c.socket));
	msgs_ = static_cast<pmsg *>(rte_zmalloc_socket("rdgram_pmsg", sizeof(pmsg) * c.max_total, 64, c.socket));
	index_ = static_cast<uint32_t *>(rte_malloc_socket("rdgram_pidx", sizeof(uint32_t) * nidx, 64, c.socket));
	free_dest_ = static_cast<uint32_t *>(rte_malloc_socket("rdgram_pfd", sizeof(uint32_t) * c.max_dests, 64, c.socket));
	free_msg_ = static_cast<uint32_t *>(rte_malloc_socket("rdgram_pfm", sizeof(uint32_t) * c.max_total, 64, c.socket));
	ready_ = static_cast<uint32_t *>(rte_malloc_socket("rdgram_prdy", sizeof(uint32_t) * c.max_dests, 64, c.socket));
	static std::atomic<unsigned> seq{0};
	const unsigned s = seq.fetch_add(1);
	char name[RTE_RING_NAMESIZE];
	/* Both rings hold every destination at once, so the control thread's
	 * answer never finds its ring full. */
	const unsigned rsz = rte_align32pow2(c.max_dests + 1);
	snprintf(name, sizeof(name), "rdgram_mq%u_%u", id, s);
	req_ = rte_ring_create(name, rsz, c.socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
	snprintf(name, sizeof(name), "rdgram_ma%u_%u", id, s);
	resp_ = rte_ring_create(name, rsz, c.socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (dests_ == nullptr || msgs_ == nullptr || index_ == nullptr || free_dest_ == nullptr ||
	    free_msg_ == nullptr || ready_ == nullptr || req_ == nullptr || resp_ == nullptr) {
		fini();
		return ENOMEM;
	}
	memset(index_, 0xff, sizeof(uint32_t) * nidx);
	nfree_dest_ = 0;
	for (uint32_t i = c.max_dests; i-- > 0;)
		free_dest_[nfree_dest_++] = i;
	nfree_msg_ = 0;
	for (uint32_t i = c.max_total; i-- > 0;)
		free_msg_[nfree_msg_++] = i;
	nready_ = active_ = total_ = 0;
	timeout_cyc_ = us_to_cycles(c.timeout_us);
	next_deadline_ = UINT64_MAX;
	ctr_ = ah_client_counters{};
	return 0;
}

void ah_client::fini()
{
	if (dests_ != nullptr && msgs_ != nullptr)
		for (uint32_t d = 0; d < cfg_.max_dests; d++)
			if (dests_[d].state == st_asked || dests_[d].state == st_ready)
				drop_all(dests_[d], ctr_.pend_timeout);
	rte_ring_free(req_);
	rte_ring_free(resp_);
	rte_free(dests_);
	rte_free(msgs_);
	rte_free(index_);
	rte_free(free_dest_);
	rte_free(free_msg_);
	rte_free(ready_);
	req_ = resp_ = nullptr;
	dests_ = nullptr;
	msgs_ = nullptr;
	index_ = free_dest_ = free_msg_ = ready_ = nullptr;
	nfree_dest_ = nfree_msg_ = nready_ = active_ = total_ = 0;
}

/* ---- ah_service ----------------------------------------------------------- */

int ah_service::start(device &dev, control_thread &ctl, const ah_service_config &cfg)
{
	if (started_)
		return EBUSY;
	if (!ctl.running())
		return EINVAL;
	dev_ = &dev;
	ctl_ = &ctl;
	cfg_ = cfg;
	int rc = 0;
	ctl.call([&] {
		reg_ = new ah_registry(dev, cfg.capacity);
		reg_->add_evict_hook(&ah_service::on_evict, this);
		rc = dc_.init(reg_->capacity(), cfg.socket, cfg.qsbr);
		gids_.build(dev.port().gids);
	});
	if (rc != 0) {
		ctl.call([&] {
			delete reg_;
			reg_ = nullptr;
		});
		return rc;
	}
	rc = ctl.add_poller(&ah_service::poll_cb, this);
	if (rc != 0) {
		ctl.call([&] {
			dc_.fini();
			delete reg_;
			reg_ = nullptr;
		});
		return rc;
	}
	started_ = true;
	return 0;
}

void ah_service::stop()
{
	if (!started_)
		return;
	ctl_->remove_poller(&ah_service::poll_cb, this);
	ctl_->call([&] {
		waiting_.clear();
		nclients_ = 0;
		reg_->clear();
		delete reg_;
		reg_ = nullptr;
		dc_.fini();
		dev_->reclaim();
	});
	started_ = false;
}

int ah_service::add_client(ah_client &c, const ah_client_config &cfg)
{
	if (!started_)
		return EINVAL;
	int rc = 0;
	ctl_->call([&] {
		if (nclients_ == max_clients) {
			rc = ENOSPC;
			return;
		}
		rc = c.init(cfg, &dc_, &dev_->port(), &gids_, nclients_);
		if (rc == 0)
			clients_[nclients_++] = &c;
	});
	return rc;
}

void ah_service::remove_client(ah_client &c)
{
	if (!started_)
		return;
	ctl_->call([&] {
		for (unsigned i = 0; i < nclients_; i++)
			if (clients_[i] == &c) {
				clients_[i] = clients_[--nclients_];
				break;
			}
		for (auto it = waiting_.begin(); it != waiting_.end();) {
			auto &v = it->second;
			v.erase(std::remove_if(v.begin(), v.end(), [&](const waiter &w) { return w.c == &c; }),
				v.end());
			it = v.empty() ? waiting_.erase(it) : std::next(it);
		}
	});
}

void ah_service::on_evict(void *arg, const ah_key &k, ah_handle)
{
	/* The registry is destroying this AH: poll threads must stop finding
	 * it (lookups miss at once; the bucket is reused after a grace
	 * period, and so is the driver's AV slot). */
	static_cast<ah_service *>(arg)->dc_.erase(k);
}

ah_handle ah_service::create_cached(const ah_key &k, int *err)
{
	const ibv_ah_attr a = attr_of(k);
	ah_handle h = reg_->acquire(a, err);
	if (*err != 0)
		return ah_null;
	int rc = dc_.insert(k, h);
	if (rc != 0 && rc != EEXIST) {
		/* Cannot happen while the cache is as large as the registry;
		 * fail rather than hand out an AH poll threads cannot find. */
		reg_->release(h);
		*err = rc;
		return ah_null;
	}
	reg_->release(h); /* cached, unreferenced: LRU-evictable */
	return h;
}

void ah_service::answer(const waiter &w, ah_handle h, int err)
{
	if (w.c != nullptr) {
		ah_client::pdest &p = w.c->dests_[w.d];
		p.result = h;
		p.err = err;
		RDGRAM_TSAN_RELEASE(&p);
		/* The ring holds every destination: never full. */
		rte_ring_sp_enqueue(w.c->resp_, reinterpret_cast<void *>(uintptr_t(w.d)));
	}
	if (err == 0) {
		st_.created++;
	} else {
		st_.failed++;
		/* Misses that failed: what the poll threads' pend_<errno>
		 * counters show, said once in a while with the reason. */
		if (telemetry::log_occurrence(st_.failed))
			RDGRAM_LOG(ah, WARNING, "AH creation for a pending destination failed: %s (failures so far: %lu)",
				   strerror(err), (unsigned long)st_.failed);
	}
}

void ah_service::handle_request(ah_client *c, uint32_t d)
{
	st_.requests++;
	const ah_key k = c->dests_[d].key;
	const waiter w{c, d, nullptr};
	ah_handle h;
	if (dc_.lookup(k, &h)) {
		st_.answered_cached++;
		ah_client::pdest &p = c->dests_[d];
		p.result = h;
		p.err = 0;
		RDGRAM_TSAN_RELEASE(&p);
		rte_ring_sp_enqueue(c->resp_, reinterpret_cast<void *>(uintptr_t(d)));
		return;
	}
	if (auto it = waiting_.find(k); it != waiting_.end()) {
		it->second.push_back(w);
		return;
	}
	const int rc = dev_->prepare_ah(attr_of(k));
	if (rc == 0) {
		int e = 0;
		h = create_cached(k, &e);
		answer(w, h, e);
	} else if (rc == EINPROGRESS) {
		st_.neigh_waits++;
		waiting_[k].push_back(w);
	} else {
		answer(w, ah_null, rc);
	}
}

void ah_service::recheck_waiting()
{
	for (auto it = waiting_.begin(); it != waiting_.end();) {
		const int rc = dev_->prepare_ah(attr_of(it->first));
		if (rc == EINPROGRESS) {
			++it;
			continue;
		}
		ah_handle h = ah_null;
		int e = rc;
		if (rc == 0)
			h = create_cached(it->first, &e);
		for (const waiter &w : it->second)
			answer(w, h, e);
		it = waiting_.erase(it);
	}
}

bool ah_service::poll(uint64_t now)
{
	const bool dev_busy = dev_->poll(now);
	bool busy = dev_busy;
	for (unsigned i = 0; i < nclients_; i++) {
		ah_client *c = clients_[i];
		void *req[32];
		const unsigned n = rte_ring_sc_dequeue_burst(c->req_, req, 32, nullptr);
		for (unsigned j = 0; j < n; j++) {
			const uint32_t d = uint32_t(reinterpret_cast<uintptr_t>(req[j]));
			RDGRAM_TSAN_ACQUIRE(&c->dests_[d]);
			handle_request(c, d);
		}
		busy |= n != 0;
	}
	/* Waiting keys move on only when the device did something (a reply,
	 * a retry, a timeout), or every millisecond. */
	if (!waiting_.empty() && (dev_busy || now >= next_recheck_)) {
		recheck_waiting();
		next_recheck_ = now + us_to_cycles(1000);
	}
	return busy;
}

/* ---- application API ---------------------------------------------------- */

ah_handle ah_service::create_ah(const ibv_ah_attr &attr, int *err)
{
	ah_handle h = ah_null;
	unsigned n = create_ah_batch(&attr, 1, &h, err);
	return n == 1 ? h : ah_null;
}

unsigned ah_service::create_ah_batch(const ibv_ah_attr *attrs, unsigned n, ah_handle *out, int *errs)
{
	if (!started_) {
		for (unsigned i = 0; i < n; i++) {
			out[i] = ah_null;
			errs[i] = EINVAL;
		}
		return 0;
	}
	std::vector<unsigned> pending(n);
	for (unsigned i = 0; i < n; i++) {
		pending[i] = i;
		out[i] = ah_null;
		errs[i] = EINPROGRESS;
	}
	const uint64_t deadline = rte_get_tsc_cycles() + us_to_cycles(cfg_.app_timeout_us);
	unsigned ok = 0;
	/* Chunks keep each control-thread call short, so poll threads' misses
	 * are answered between them. */
	constexpr unsigned chunk = 4096;
	while (!pending.empty()) {
		std::vector<unsigned> next;
		for (size_t s = 0; s < pending.size(); s += chunk) {
			const size_t e = std::min(pending.size(), s + chunk);
			ctl_->call([&] {
				for (size_t j = s; j < e; j++) {
					const unsigned i = pending[j];
					int rc = dev_->prepare_ah(attrs[i]);
					if (rc == EINPROGRESS) {
						next.push_back(i);
						continue;
					}
					if (rc == 0) {
						ah_handle h = reg_->acquire(attrs[i], &rc);
						if (rc == 0) {
							int ie = dc_.insert(ah_key::of(attrs[i]), h);
							if (ie != 0 && ie != EEXIST) {
								reg_->release(h);
								rc = ie;
							} else {
								out[i] = h;
								ok++;
								st_.app_creates++;
							}
						}
					}
					errs[i] = rc;
				}
			});
		}
		pending.swap(next);
		if (pending.empty())
			break;
		if (rte_get_tsc_cycles() >= deadline) {
			for (unsigned i : pending)
				errs[i] = ETIMEDOUT;
			break;
		}
		nap_us(100); /* neighbour resolution runs on the control thread */
	}
	return ok;
}

int ah_service::destroy_ah(ah_handle h)
{
	if (!started_)
		return EINVAL;
	int rc = 0;
	ctl_->call([&] {
		rc = reg_->release(h);
		if (rc == 0)
			st_.app_destroys++;
	});
	return rc;
}

ah_handle ah_service::create_ah_from_wc(const recv_wc &wc, const void *grh, int *err)
{
	ibv_ah_attr a;
	if (init_ah_from_wc(dev_->port(), gids_, 1, wc, grh, &a) != 0) {
		*err = errno;
		return ah_null;
	}
	return create_ah(a, err);
}

} // namespace rdgram
