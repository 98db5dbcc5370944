/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "rdgram/control.h"
#include "rdgram/fault.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>

#include <rte_errno.h>
#include <rte_cycles.h>
#include <rte_lcore.h>

namespace rdgram {

namespace {
struct call_ctx {
	const std::function<void()> *f;
};
void run_call(ctl_request *r) { (*static_cast<call_ctx *>(r->arg)->f)(); }
thread_local bool tls_is_ctl = false;
} // namespace

int control_thread::start(const char *name)
{
	static std::atomic<unsigned> seq{0};
	char rname[RTE_RING_NAMESIZE];
	snprintf(rname, sizeof(rname), "rdgram_ctl%u", seq.fetch_add(1));
	ring_ = rte_ring_create(rname, 1024, SOCKET_ID_ANY, RING_F_SC_DEQ);
	if (ring_ == nullptr)
		return rte_errno;
	stop_.store(false);
	int rc = rte_ctrl_thread_create(&tid_, name, nullptr, &control_thread::main, this);
	if (rc != 0) {
		rte_ring_free(ring_);
		ring_ = nullptr;
		return rc < 0 ? -rc : rc;
	}
	running_.store(true, std::memory_order_release);
	return 0;
}

void control_thread::stop()
{
	if (!running_.load())
		return;
	stop_.store(true, std::memory_order_release);
	wake();
	pthread_join(tid_, nullptr);
	running_.store(false);
	rte_ring_free(ring_);
	ring_ = nullptr;
}

bool control_thread::on_control_thread() const { return tls_is_ctl; }

void control_thread::wake()
{
	{
		std::lock_guard<std::mutex> lk(nap_mu_);
		woken_ = true;
	}
	nap_cv_.notify_one();
}

int control_thread::add_poller(poller_fn fn, void *arg)
{
	int rc = 0;
	auto add = [&] {
		if (npollers_ == max_pollers)
			rc = ENOSPC;
		else
			pollers_[npollers_++] = poller{fn, arg};
	};
	if (running())
		call(add);
	else
		add();
	return rc;
}

void control_thread::remove_poller(poller_fn fn, void *arg)
{
	auto rm = [&] {
		for (unsigned i = 0; i < npollers_; i++)
			if (pollers_[i].fn == fn && pollers_[i].arg == arg) {
				pollers_[i] = pollers_[--npollers_];
				return;
			}
	};
	if (running())
		call(rm);
	else
		rm();
}

bool control_thread::run_pollers(uint64_t now)
{
	bool busy = false;
	for (unsigned i = 0; i < npollers_; i++)
		busy |= pollers_[i].fn(pollers_[i].arg, now);
	return busy;
}

void control_thread::call(const std::function<void()> &f)
{
	if (tls_is_ctl) {
		f();
		return;
	}
	call_ctx ctx{&f};
	ctl_request r;
	r.fn = run_call;
	r.arg = &ctx;
	while (!post(&r)) {
		timespec ts{0, 10000};
		nanosleep(&ts, nullptr);
	}
	wake();
	/* Application thread: sleeping while the control thread works is fine. */
	unsigned spins = 0;
	while (!r.done.load(std::memory_order_acquire)) {
		if (++spins > 64) {
			timespec ts{0, 2000};
			nanosleep(&ts, nullptr);
		}
	}
}

void *control_thread::main(void *arg)
{
	auto *self = static_cast<control_thread *>(arg);
	tls_is_ctl = true;
	void *batch[64];
	long idle_ns = min_nap_ns;
	for (;;) {
		bool stopping = self->stop_.load(std::memory_order_acquire);
		unsigned n = rte_ring_sc_dequeue_burst(self->ring_, batch, 64, nullptr);
		for (unsigned i = 0; i < n; i++) {
			auto *r = static_cast<ctl_request *>(batch[i]);
			RDGRAM_TSAN_ACQUIRE(r);
			r->fn(r);
			r->done.store(true, std::memory_order_release);
		}
		if (n == 0 && stopping)
			break;
		RDGRAM_FAULT_CONTROL_LOOP(self); /* test builds only: fault.h */
		const bool busy = self->run_pollers(rte_get_tsc_cycles());
		if (n == 0 && !busy) {
			/* Idle: the control thread may sleep; poll threads never wait
			 * for it synchronously. The nap grows while idle (the thread
			 * shares a core with an lcore on small machines: control.h,
			 * set_max_nap), call() and stop() end it early, and it drops
			 * back at the first request. */
			{
				std::unique_lock<std::mutex> lk(self->nap_mu_);
				if (!self->woken_)
					self->nap_cv_.wait_for(lk, std::chrono::nanoseconds(idle_ns));
				self->woken_ = false; /* what woke it is in the ring now */
			}
			idle_ns = std::min(self->max_nap_.load(std::memory_order_relaxed), idle_ns + idle_ns / 2);
		} else {
			idle_ns = min_nap_ns;
		}
	}
	return nullptr;
}

} // namespace rdgram
