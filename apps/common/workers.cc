/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright(c) 2026 The rdgram authors
 */
#include "workers.h"

#include <thread>

#include <rte_lcore.h>

namespace rdgram::apps {

int pick_workers(const runtime &rt, int numa_node, unsigned n, std::vector<lcore_cpu> *out, std::string *err)
{
	const std::vector<lcore_cpu> all = rt.poll_lcores(numa_node);
	if (n == 0 || n > all.size()) {
		*err = "--workers " + std::to_string(n) + ": " +
		       (n == 0 ? std::string("at least 1") : "only " + std::to_string(all.size()) + " lcore(s) given to the EAL (-l)");
		return EINVAL;
	}
	out->clear();
	const unsigned main_lcore = rte_get_main_lcore();
	for (const lcore_cpu &l : all)
		if (l.lcore != main_lcore && out->size() < n)
			out->push_back(l);
	for (const lcore_cpu &l : all)
		if (l.lcore == main_lcore && out->size() < n)
			out->push_back(l);
	return 0;
}

namespace {

struct worker_slot {
	int (*fn)(void *);
	void *arg;
	std::atomic<unsigned> *running;
	int rc;
};

int worker_entry(void *p)
{
	auto *s = static_cast<worker_slot *>(p);
	s->rc = s->fn(s->arg);
	s->running->fetch_sub(1, std::memory_order_release);
	return s->rc;
}

} // namespace

int run_workers(const std::vector<lcore_cpu> &lcores, int (*fn)(void *), const std::vector<void *> &args,
		const std::function<void(const std::atomic<unsigned> &running)> &watch)
{
	const unsigned main_lcore = rte_get_main_lcore();
	std::atomic<unsigned> running{unsigned(lcores.size())};
	std::vector<worker_slot> slots(lcores.size());
	std::vector<bool> launched(lcores.size(), false);
	int first_err = 0;
	int on_main = -1;
	for (size_t i = 0; i < lcores.size(); i++) {
		slots[i] = worker_slot{fn, args[i], &running, 0};
		if (lcores[i].lcore == main_lcore) {
			on_main = int(i);
			continue;
		}
		int rc = launch_on_lcore(worker_entry, &slots[i], lcores[i].lcore);
		if (rc != 0) {
			running.fetch_sub(1, std::memory_order_release);
			if (first_err == 0)
				first_err = rc;
			continue;
		}
		launched[i] = true;
	}
	if (on_main >= 0) {
		std::thread w([&] { watch(running); });
		worker_entry(&slots[size_t(on_main)]);
		w.join();
	} else {
		watch(running);
	}
	for (size_t i = 0; i < lcores.size(); i++)
		if (launched[i])
			wait_on_lcore(lcores[i].lcore);
	if (first_err != 0)
		return first_err;
	for (const worker_slot &s : slots)
		if (s.rc != 0)
			return s.rc;
	return 0;
}

} // namespace rdgram::apps
