/* SPDX-License-Identifier: BSD-3-Clause */
#include "rdgram/burst_guard.h"

#include <dlfcn.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#include <rte_common.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>

namespace rdgram {
namespace {

/* PMDs that free queue memory on the EAL interrupt thread while the port
 * is started (see burst_guard.h). */
bool unmaps_behind_poll_threads(uint16_t port)
{
	rte_eth_dev_info info{};
	if (rte_eth_dev_info_get(port, &info) != 0 || info.driver_name == nullptr)
		return false;
	return strcmp(info.driver_name, "net_memif") == 0;
}

std::mutex setup_mu;
struct slot_key {
	uint16_t port, queue;
};
slot_key keys[burst_guard::max_slots];
unsigned nslots = 0;
std::atomic<uint64_t> nwaits{0}, ntimeouts{0};

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

} // namespace

int burst_guard::slot_for(uint16_t port, uint16_t queue)
{
	if (!unmaps_behind_poll_threads(port))
		return -1;
	std::lock_guard<std::mutex> g(setup_mu);
	for (unsigned i = 0; i < nslots; i++)
		if (keys[i].port == port && keys[i].queue == queue)
			return int(i);
	if (nslots == max_slots)
		return -1;
	rte_rcu_qsbr *v = v_.load(std::memory_order_relaxed);
	if (v == nullptr) {
		/* Process lifetime, like the PMDs' own state; never freed. */
		const size_t sz = RTE_ALIGN_CEIL(rte_rcu_qsbr_get_memsize(max_slots), RTE_CACHE_LINE_SIZE);
		v = static_cast<rte_rcu_qsbr *>(aligned_alloc(RTE_CACHE_LINE_SIZE, sz));
		if (v == nullptr || rte_rcu_qsbr_init(v, max_slots) != 0) {
			free(v);
			return -1;
		}
		v_.store(v, std::memory_order_release);
	}
	if (rte_rcu_qsbr_thread_register(v, nslots) != 0)
		return -1;
	keys[nslots] = slot_key{port, queue};
	return int(nslots++);
}

bool burst_guard::synchronize(uint64_t timeout_ns)
{
	rte_rcu_qsbr *v = v_.load(std::memory_order_acquire);
	if (v == nullptr)
		return true;
	const uint64_t token = rte_rcu_qsbr_start(v);
	if (rte_rcu_qsbr_check(v, token, false) == 1)
		return true;
	nwaits.fetch_add(1, std::memory_order_relaxed);
	const uint64_t deadline = now_ns() + timeout_ns;
	while (rte_rcu_qsbr_check(v, token, false) != 1) {
		if (now_ns() > deadline) {
			ntimeouts.fetch_add(1, std::memory_order_relaxed);
			return false;
		}
		/* The burst's thread may be preempted on this very CPU. */
		sched_yield();
	}
	return true;
}

uint64_t burst_guard::waits() { return nwaits.load(std::memory_order_relaxed); }
uint64_t burst_guard::timeouts() { return ntimeouts.load(std::memory_order_relaxed); }

} // namespace rdgram

/*
 * munmap(2), interposed for every caller in the process (the executable
 * exports it: see dataplane/meson.build). On the EAL interrupt thread, once
 * a guarded port exists, it first waits for the bursts in flight (1 s at
 * most); everywhere else it is the next munmap in link order (libc, or a
 * sanitizer's interceptor) unchanged.
 */
/* A sanitizer's munmap interceptor, when one is linked: with clang the
 * runtime is inside the executable, where RTLD_NEXT would skip it. */
extern "C" int __interceptor_munmap(void *addr, size_t len) __attribute__((weak));

extern "C" int munmap(void *addr, size_t len) noexcept
{
	using munmap_fn = int (*)(void *, size_t);
	static const munmap_fn next = __interceptor_munmap != nullptr
					      ? __interceptor_munmap
					      : reinterpret_cast<munmap_fn>(dlsym(RTLD_NEXT, "munmap"));
	if (rdgram::burst_guard::v_.load(std::memory_order_acquire) != nullptr && rte_thread_is_intr())
		rdgram::burst_guard::synchronize(1000000000u);
	if (next != nullptr)
		return next(addr, len);
	return int(syscall(SYS_munmap, addr, len));
}
